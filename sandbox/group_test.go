package sandbox_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/sandbox"
)

// hog forks children that each allocate and touch mb MiB, tell the parent,
// and wait; the parent prints "all allocated" once every child has.
func hog(children, mb int) []string {
	return python(`import os, signal, sys
n, mb = ` + strconv.Itoa(children) + `, ` + strconv.Itoa(mb) + `
r, w = os.pipe()
for _ in range(n):
    if os.fork() == 0:
        os.close(r)
        b = b"\x01" * (mb << 20)   # touched: resident, not just reserved
        os.write(w, b"x")
        os.close(w)                # the parent reads EOF once no child can write
        signal.pause()
os.close(w)
got = 0
while got < n:
    c = os.read(r, 1)
    if not c:
        break
    got += 1
print("allocated", got)
sys.exit(0 if got == n else 1)
`)
}

// With a cgroup, the memory limit binds the sandbox as a whole: eight
// children of 100 MiB each do not fit in 256 MiB, whatever each process's
// own limit; the kernel kills one and the run reads StatusMemory.
func TestMemoryLimitBindsTheSandbox(t *testing.T) {
	needPython(t)
	if !sandbox.PerSandbox() {
		t.Skip("no cgroup bounds a sandbox here (" + sandbox.Enforcement() + "); TestFallbackLimits covers the fallback")
	}
	r := run(t, sandbox.Spec{Command: hog(8, 100),
		Limits: sandbox.Limits{MemoryBytes: 256 << 20, Procs: 32, CPUTime: 20 * time.Second, Wall: 60 * time.Second}})
	if r.Passed() || r.Status != sandbox.StatusMemory || !r.MemoryExceeded {
		t.Fatalf("got %+v, want status %s", r, sandbox.StatusMemory)
	}
	t.Logf("enforcement: %s; 8 × 100 MiB under 256 MiB: status %s, stdout %q", sandbox.Enforcement(), r.Status, r.Stdout)
}

// With a cgroup, the process limit counts the whole sandbox too, and the
// CPU limit is the sum over its processes: four children that each stay
// under CPUTime use more than CPUTime together.
func TestCPULimitBindsTheSandbox(t *testing.T) {
	needPython(t)
	if !sandbox.PerSandbox() {
		t.Skip("no cgroup bounds a sandbox here (" + sandbox.Enforcement() + "); TestFallbackLimits covers the fallback")
	}
	r := run(t, sandbox.Spec{Command: python(`import os, time
pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        while time.process_time() < 0.8:   # each under the 1 s limit of a process
            pass
        os._exit(0)
    pids.append(pid)
for p in pids:
    os.waitpid(p, 0)
print("done")
`), Limits: sandbox.Limits{CPUTime: time.Second, Wall: 60 * time.Second}})
	if r.Passed() || r.Status != sandbox.StatusTimeout || !r.TimedOut {
		t.Fatalf("got %+v, want status %s: 3.2 s of CPU in all over a 1 s budget", r, sandbox.StatusTimeout)
	}
}
