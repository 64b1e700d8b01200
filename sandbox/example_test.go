package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlpipe/rlpipe/sandbox"
)

// A model's solution is graded by a checker that runs beside it.
func ExampleRun() {
	solution := []byte("def add(a, b):\n    return a + b\n")
	checker := []byte("from solution import add\nassert add(2, 3) == 5\nprint('2 + 3 = 5')\n")
	r, err := sandbox.Run(context.Background(), sandbox.Spec{
		Command: []string{"python3", "test.py"},
		Files:   map[string][]byte{"solution.py": solution, "test.py": checker},
		Limits:  sandbox.Limits{CPUTime: 5 * time.Second, Wall: 20 * time.Second},
	})
	if err != nil {
		fmt.Println("no verdict:", err)
		return
	}
	fmt.Println(r.Status, r.Passed(), r.ExitCode)
	fmt.Print(r.Stdout)
	// Output:
	// ok true 0
	// 2 + 3 = 5
}

// A program that loops forever ends at its CPU limit: a verdict, not an error.
func ExampleRun_timeout() {
	r, err := sandbox.Run(context.Background(), sandbox.Spec{
		Command: []string{"sh", "-c", "while :; do :; done"},
		Limits:  sandbox.Limits{CPUTime: time.Second, Wall: 20 * time.Second},
	})
	if err != nil {
		fmt.Println("no verdict:", err)
		return
	}
	fmt.Println(r.Status, r.TimedOut, r.Passed())
	// Output: timeout true false
}

// Result.Vars feeds a reward expression.
func ExampleResult_Vars() {
	r, err := sandbox.Run(context.Background(), sandbox.Spec{
		Command: []string{"sh", "-c", "echo 3 tests, 1 failed; exit 1"},
	})
	if err != nil {
		fmt.Println("no verdict:", err)
		return
	}
	v := r.Vars()
	fmt.Println(v["passed"], v["exit_code"], v["timed_out"], v["status"])
	fmt.Printf("%q\n", v["stdout"])
	// Output:
	// false 1 false failed
	// "3 tests, 1 failed\n"
}

// An infrastructure failure is an error wrapping ErrInfra, never a reward.
func ExampleRun_infra() {
	_, err := sandbox.Run(context.Background(), sandbox.Spec{
		Command: []string{"true"},
		Bwrap:   "/nonexistent/bwrap",
	})
	fmt.Println(errors.Is(err, sandbox.ErrInfra), errors.Is(err, sandbox.ErrNoBwrap))
	// Output: true true
}

func ExampleAvailable() {
	if err := sandbox.Available(); err != nil {
		fmt.Println("sandbox unavailable:", err)
		return
	}
	fmt.Println("sandbox ready")
	// Output: sandbox ready
}

// A worker loads once and answers many requests, one line each; a
// request that hangs is killed at the wall limit, and the caller starts a
// new worker.
func ExampleStart() {
	worker := []byte("import sys\nn = 0\nfor line in sys.stdin:\n    n += 1\n    print(n, line.strip().upper(), flush=True)\n")
	p, err := sandbox.Start(context.Background(), sandbox.Spec{
		Command:       []string{"python3", "/worker/upper.py"},
		ReadOnlyFiles: map[string][]byte{"/worker/upper.py": worker},
		Limits:        sandbox.Limits{Wall: 20 * time.Second}, // per request
	})
	if err != nil {
		fmt.Println("no worker:", err)
		return
	}
	for _, req := range []string{"a", "b", "c"} {
		answer, err := p.Call(context.Background(), []byte(req))
		if err != nil {
			fmt.Println(err) // the worker ended: p.Wait says how
			return
		}
		fmt.Println(string(answer))
	}
	p.CloseRequests() // the worker exits at the end of its input
	r, _ := p.Wait()
	fmt.Println(r.Status)
	// Output:
	// 1 A
	// 2 B
	// 3 C
	// ok
}
