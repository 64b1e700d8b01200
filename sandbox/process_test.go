package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/sandbox"
)

// worker is a line-delimited JSON worker: it answers each request with
// the number of requests it has served, its pid and what the request's
// op asked for.
const worker = `
import errno, json, os, socket, sys, time
n = 0
for line in sys.stdin:
    n += 1
    req = json.loads(line)
    op, out = req.get("op"), None
    if op == "hang":
        time.sleep(3600)
    elif op == "alloc":
        out = len(bytearray(req["bytes"]))
    elif op == "write":
        try:
            open(req["path"], "w").write("x")
            out = "written"
        except OSError as e:
            out = errno.errorcode[e.errno]
    elif op == "connect":
        try:
            socket.create_connection((req["host"], req["port"]), timeout=2)
            out = "connected"
        except OSError as e:
            out = errno.errorcode.get(e.errno, str(e))
    elif op == "env":
        out = sorted(os.environ)
    elif op == "big":
        out = "x" * req["n"]
    print(json.dumps({"n": n, "pid": os.getpid(), "out": out}), flush=True)
`

type answer struct {
	N   int             `json:"n"`
	Pid int             `json:"pid"`
	Out json.RawMessage `json:"out"`
}

// startWorker starts worker with small limits and wall as the per-request
// limit, and kills it when the test ends.
func startWorker(t *testing.T, wall time.Duration) *sandbox.Process {
	t.Helper()
	needPython(t)
	lim := small
	lim.Wall = wall
	p, err := sandbox.Start(context.Background(), sandbox.Spec{
		Command:       []string{"python3", "/worker/worker.py"},
		ReadOnlyFiles: map[string][]byte{"/worker/worker.py": []byte(worker)},
		Limits:        lim,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(p.Kill)
	return p
}

// call sends req and decodes the answer, failing t on an error.
func call(t *testing.T, p *sandbox.Process, req string) answer {
	t.Helper()
	b, err := p.Call(context.Background(), []byte(req))
	if err != nil {
		t.Fatalf("Call(%s): %v", req, err)
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("Call(%s) answered %q: %v", req, b, err)
	}
	return a
}

func TestProcessAnswersManyRequests(t *testing.T) {
	p := startWorker(t, 20*time.Second)
	var pids []int
	for i := 1; i <= 3; i++ {
		a := call(t, p, `{"op": "echo"}`)
		if a.N != i {
			t.Fatalf("request %d: the worker counted %d requests, want %d (one process serving all)", i, a.N, i)
		}
		pids = append(pids, a.Pid)
	}
	if pids[0] != pids[1] || pids[1] != pids[2] {
		t.Fatalf("pids %v, want one process", pids)
	}
	if err := p.CloseRequests(); err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait()
	if err != nil || r.Status != sandbox.StatusOK {
		t.Fatalf("Wait after end of input: %+v, %v; want status ok", r, err)
	}
}

func TestProcessHangIsKilledAtTheWallLimit(t *testing.T) {
	p := startWorker(t, 2*time.Second)
	if a := call(t, p, `{"op": "echo"}`); a.N != 1 {
		t.Fatalf("request 1: n=%d", a.N)
	}
	_, err := p.Call(context.Background(), []byte(`{"op": "hang"}`))
	const want = "request 2: the process ended without an answer: timeout (no answer within the wall limit 2s): sandboxed process ended"
	if !errors.Is(err, sandbox.ErrEnded) || err.Error() != want {
		t.Fatalf("the hung request: %v\nwant %s", err, want)
	}
	r, err := p.Wait()
	if err != nil || r.Status != sandbox.StatusTimeout || !r.TimedOut {
		t.Fatalf("Wait: %+v, %v; want status timeout", r, err)
	}
	_, err = p.Call(context.Background(), []byte(`{"op": "echo"}`))
	const after = "request 3: the process ended without an answer: timeout (no answer within the wall limit 2s): sandboxed process ended"
	if err == nil || err.Error() != after {
		t.Fatalf("a request to the killed process: %v\nwant %s", err, after)
	}
	// The caller restarts the worker, which answers the next request.
	q := startWorker(t, 2*time.Second)
	if a := call(t, q, `{"op": "echo"}`); a.N != 1 {
		t.Fatalf("the restarted worker's first request: n=%d", a.N)
	}
}

func TestProcessConfinement(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	t.Setenv("RLPIPE_TEST_SECRET_TOKEN", "hunter2")
	p := startWorker(t, 20*time.Second)
	for _, c := range []struct {
		name, req, want string
	}{
		{"write under /usr", `{"op": "write", "path": "/usr/rlpipe-worker-x"}`, `"EROFS"`},
		{"write to /etc/passwd", `{"op": "write", "path": "/etc/passwd"}`, `"EROFS"`},
		{"write to a host path outside the binds", `{"op": "write", "path": "/root/rlpipe-worker-x"}`, `"ENOENT"`}, // no /root in the sandbox
		{"connect to 1.1.1.1:80", `{"op": "connect", "host": "1.1.1.1", "port": 80}`, `"ENETUNREACH"`},
		{"connect to the host's loopback listener", fmt.Sprintf(`{"op": "connect", "host": "127.0.0.1", "port": %d}`, port), `"ECONNREFUSED"`}, // the sandbox's own, empty loopback
		{"the host's environment", `{"op": "env"}`, `["HOME", "LANG", "PATH", "PWD"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := call(t, p, c.req)
			if got := string(a.Out); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
	if a := call(t, p, `{"op": "echo"}`); a.N != 7 {
		t.Fatalf("the probes ran in %d requests of one process, want 7", a.N)
	}
}

func TestProcessMemoryLimit(t *testing.T) {
	p := startWorker(t, 20*time.Second)
	_, err := p.Call(context.Background(), []byte(`{"op": "alloc", "bytes": 1073741824}`))
	if !errors.Is(err, sandbox.ErrEnded) || err.Error() != "request 1: the process ended without an answer: memory (memory limit 256 MiB): sandboxed process ended" {
		t.Fatalf("a request that allocates 1 GiB past a 256 MiB limit: %v", err)
	}
	r, err := p.Wait()
	if err != nil || r.Status != sandbox.StatusMemory || !r.MemoryExceeded {
		t.Fatalf("Wait: %+v, %v; want status memory", r, err)
	}
}

// An answer is read whole however long, up to OutputBytes; a longer one
// ends the process.
func TestProcessAnswerSize(t *testing.T) {
	p := startWorker(t, 20*time.Second)
	a := call(t, p, `{"op": "big", "n": 60000}`) // 15 reads of bufio's 4 KiB
	if len(a.Out) != 60002 {
		t.Fatalf("an answer of 60000 x's came back with %d bytes", len(a.Out))
	}
	_, err := p.Call(context.Background(), []byte(`{"op": "big", "n": 70000}`))
	const want = "request 2: the process ended without an answer: output_limit (an answer longer than 65536 bytes): sandboxed process ended"
	if !errors.Is(err, sandbox.ErrEnded) || err.Error() != want {
		t.Fatalf("an answer past the 64 KiB limit: %v\nwant %s", err, want)
	}
	if r, _ := p.Wait(); r.Status != sandbox.StatusOutputLimit || !r.OutputTruncated {
		t.Fatalf("Wait: %+v, want status output_limit", r)
	}
}

func TestProcessKill(t *testing.T) {
	p := startWorker(t, 20*time.Second)
	call(t, p, `{"op": "echo"}`)
	p.Kill()
	r, err := p.Wait()
	if err != nil || r.Status != sandbox.StatusCanceled {
		t.Fatalf("Wait after Kill: %+v, %v; want status canceled", r, err)
	}
	_, err = p.Call(context.Background(), []byte(`{"op": "echo"}`))
	const want = "request 2: the process ended without an answer: canceled: sandboxed process ended"
	if err == nil || err.Error() != want {
		t.Fatalf("Call after Kill: %v\nwant %s", err, want)
	}
}

func TestProcessCallCanceled(t *testing.T) {
	p := startWorker(t, 20*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Call(ctx, []byte(`{"op": "hang"}`))
	if !errors.Is(err, context.Canceled) || err.Error() != "request 1: context canceled" {
		t.Fatalf("a canceled request: %v", err)
	}
	if r, _ := p.Wait(); r.Status != sandbox.StatusCanceled {
		t.Fatalf("Wait: %+v, want status canceled (an unanswered request ends the process)", r)
	}
}

func TestStartInvalid(t *testing.T) {
	for _, c := range []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"stdin", sandbox.Spec{Command: []string{"cat"}, Stdin: []byte("x")},
			"a started process reads its requests from Call, not Stdin: invalid sandbox spec"},
		{"verdict", sandbox.Spec{Command: []string{"cat"}, Verdict: true},
			"a started process has no verdict channel: judge its answers in a Run: invalid sandbox spec"},
		{"empty command", sandbox.Spec{}, "empty command: invalid sandbox spec"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sandbox.Start(context.Background(), c.spec)
			if !errors.Is(err, sandbox.ErrInvalid) || err.Error() != c.want {
				t.Fatalf("got %v, want %s", err, c.want)
			}
		})
	}
	p, err := sandbox.Start(context.Background(), sandbox.Spec{Command: []string{"cat"}, Limits: small})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if _, err := p.Call(context.Background(), []byte("a\nb")); err == nil ||
		err.Error() != "a request is one line: it holds a newline: invalid sandbox spec" {
		t.Fatalf("a request of two lines: %v", err)
	}
	if b, err := p.Call(context.Background(), []byte("echoed by cat")); err != nil || string(b) != "echoed by cat" {
		t.Fatalf("cat's answer: %q, %v", b, err)
	}
}
