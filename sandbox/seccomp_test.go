package sandbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/sandbox"
)

// TestSeccompClone makes clone with namespace flags and clone3 from
// python3 through ctypes, in the sandbox, and checks that they fail with
// EPERM and ENOSYS. (Each call of the filter's denied list has its own
// case in TestSeccompDeniesEachListedCall.) Numbers are x86_64's; the
// filter refuses other architectures.
func TestSeccompClone(t *testing.T) {
	needPython(t)
	needAMD64(t)
	const ( // clone's namespace flags
		newUser = 0x10000000
		newNet  = 0x40000000
		newNS   = 0x00020000
	)
	for _, c := range []struct {
		name  string
		nr    int
		args  []uint64
		errno int
	}{
		{"clone with CLONE_NEWUSER", 56, []uint64{newUser}, 1},
		{"clone with CLONE_NEWNET", 56, []uint64{newNet}, 1},
		{"clone with CLONE_NEWNS", 56, []uint64{newNS}, 1},
		{"clone3", 435, []uint64{0, 0}, 38},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = fmt.Sprintf("ctypes.c_ulong(%d)", a)
			}
			code := fmt.Sprintf(`import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(%d, %s)
print(r, ctypes.get_errno())
if r == 0:
    os._exit(0)  # a clone that worked: the child must not go on
`, c.nr, strings.Join(args, ", "))
			r := run(t, sandbox.Spec{Command: python(code)})
			want := fmt.Sprintf("-1 %d\n", c.errno)
			if !strings.HasPrefix(r.Stdout, want) {
				t.Fatalf("syscall %s: got %q (%+v), want %q", c.name, r.Stdout, r, want)
			}
		})
	}
}

// A clone without namespace flags — every fork, every thread — still works.
func TestSeccompAllowsForkAndThreads(t *testing.T) {
	needPython(t)
	r := run(t, sandbox.Spec{Command: python(`import os, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
`)})
	if !r.Passed() || r.Stdout != "7\n" {
		t.Fatalf("got %+v, want a fork and a thread", r)
	}
}

// The filter is in force for the command (mode 2, a filter), and a user
// namespace cannot be made (see also TestUserNamespacesDisabledWithoutSeccomp).
func TestKernelSurface(t *testing.T) {
	r := run(t, sandbox.Spec{Command: []string{"sh", "-c", "grep '^Seccomp:' /proc/self/status; unshare -U true && echo UNSHARED"}})
	if r.Stdout != "Seccomp:\t2\n" || !strings.Contains(r.Stderr, "Operation not permitted") {
		t.Fatalf("got %q (stderr %q), want seccomp mode 2 and unshare refused", r.Stdout, r.Stderr)
	}
}
