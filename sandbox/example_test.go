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
