package sandbox

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A seccompProbe makes one denied system call from python3 through ctypes,
// with arguments that change nothing even when the call runs unfiltered
// and privileged: a bad pointer, an unknown flag, command or clock, fd -1,
// a no-op.
type seccompProbe struct {
	nr   uint32 // x86_64's number, from the kernel's syscall_64.tbl, checked against the filter's
	args string // python expressions: pid is the probe's pid, addr(tv) a struct timeval with tv_usec -1
	// kernelEPERM says when the kernel itself refuses the probe with
	// EPERM, without the filter: a capability the sandbox never has is
	// checked before any argument (on all kernels, or on those named), or
	// a sysctl forbids the call. Empty when the kernel answers the probe
	// with another errno or a success. For those marked, only the marker
	// run shows that the filter, not the kernel, refused the call.
	kernelEPERM string
}

// seccompProbes has a probe for every call of the x86_64 denied list. The
// comments say what this kernel's code answers without the filter.
var seccompProbes = map[string]seccompProbe{
	// PTRACE_PEEKDATA of pid 0: ESRCH.
	"ptrace": {101, "2, 0, 0, 0", ""},
	// Flags 1: EINVAL before the target is looked at.
	"process_vm_readv":  {310, "pid, 0, 0, 0, 0, 1", ""},
	"process_vm_writev": {311, "pid, 0, 0, 0, 0, 1", ""},
	// Itself twice, unknown type 99: EINVAL.
	"kcmp": {312, "pid, pid, 99, 0, 0", ""},
	// fd -1: EBADF.
	"pidfd_getfd": {438, "-1, 0, 0", ""},
	// No flags: a no-op that succeeds.
	"unshare": {272, "0", ""},
	// fd -1: EBADF.
	"setns": {308, "-1, 0", ""},
	// NULL target, looked up before may_mount(): EFAULT.
	"mount": {165, "0, 0, 0, 0, 0", ""},
	// UMOUNT_UNUSED, the flag guaranteed unused: EINVAL before may_mount().
	"umount2":    {166, "0, 0x80000000", ""},
	"pivot_root": {155, "0, 0", "may_mount() (CAP_SYS_ADMIN) comes first"},
	// NULL path: EFAULT before the capability.
	"chroot": {161, "0", ""},
	// Unknown flag: EINVAL.
	"open_tree":     {428, "-1, 0, 0x80000000", ""},
	"move_mount":    {429, "-1, 0, -1, 0, 0x80000000", "may_mount() comes first"},
	"fsopen":        {430, "0, 0x80000000", "may_mount() comes first"},
	"fsconfig":      {431, "-1, 99, 0, 0, 0", ""}, // fd -1: EINVAL
	"fsmount":       {432, "-1, 0x80000000, 0", "may_mount() comes first"},
	"fspick":        {433, "-1, 0, 0x80000000", "may_mount() comes first"},
	"mount_setattr": {442, "-1, 0, 0x80000000, 0, 0", ""}, // unknown flag: EINVAL
	// Unknown flag: EINVAL.
	"name_to_handle_at": {303, "-1, 0, 0, 0, 0x80000000", ""},
	// NULL handle: EFAULT on Linux 6.10 and later.
	"open_by_handle_at": {304, "-1, 0, 0", "before Linux 6.10, CAP_DAC_READ_SEARCH comes first"},
	// Unknown command: EOPNOTSUPP.
	"keyctl": {250, "9999, 0, 0, 0, 0", ""},
	// NULL key type: EFAULT.
	"add_key":     {248, "0, 0, 0, 0, 0", ""},
	"request_key": {249, "0, 0, 0, 0", ""},
	// Unknown command: EINVAL on recent kernels.
	"bpf": {321, "9999, 0, 0", "older kernels check kernel.unprivileged_bpf_disabled first"},
	// Unknown flag: EINVAL (EACCES where Debian's perf_event_paranoid=3 applies).
	"perf_event_open": {298, "0, 0, -1, -1, 0x80000000", ""},
	// UFFD_USER_MODE_ONLY and an unknown flag: EINVAL.
	"userfaultfd": {323, "3", "before Linux 5.11 (no UFFD_USER_MODE_ONLY), vm.unprivileged_userfaultfd=0 refuses first"},
	// NULL params: EFAULT.
	"io_uring_setup": {425, "1, 0", "kernel.io_uring_disabled=2 refuses first"},
	// fd -1: EBADF; an unknown opcode: EINVAL.
	"io_uring_enter":    {426, "-1, 0, 0, 0, 0, 0", ""},
	"io_uring_register": {427, "-1, 0, 0, 0", ""},
	// FAN_REPORT_FID (allowed unprivileged) and an unknown flag: EINVAL.
	"fanotify_init":  {300, "0x80000200, 0", "before Linux 5.13, CAP_SYS_ADMIN comes first"},
	"lookup_dcookie": {212, "0, 0, 0", "CAP_SYS_ADMIN comes first (ENOSYS from Linux 6.10, which removed it)"},
	// Compiled out here (ENOSYS); where present, the capability comes first.
	"kexec_load":      {246, "0, 0, 0, 0x80000000", "CAP_SYS_BOOT comes first"},
	"kexec_file_load": {320, "-1, -1, 0, 0, 0x80000000", "CAP_SYS_BOOT comes first"},
	"init_module":     {175, "0, 0, 0", "CAP_SYS_MODULE comes first"},
	"finit_module":    {313, "-1, 0, 0x80000000", "CAP_SYS_MODULE comes first"},
	"delete_module":   {176, "0, 0", "CAP_SYS_MODULE comes first"},
	// Wrong magic numbers: EINVAL, after the capability.
	"reboot": {169, "0, 0, 0, 0", "CAP_SYS_BOOT comes first"},
	// Unknown flags: EINVAL before the capability.
	"swapon":  {167, "0, -1", ""},
	"swapoff": {168, "1", "CAP_SYS_ADMIN comes first"},
	"acct":    {163, "1", "CAP_SYS_PACCT comes first"},
	// Quota type 255: EINVAL.
	"quotactl": {179, "0xff, 0, 0, 0", ""},
	// SYSLOG_ACTION_SIZE_BUFFER, allowed when kernel.dmesg_restrict=0.
	"syslog": {103, "10, 0, 0", "kernel.dmesg_restrict=1 refuses first"},
	// tv_usec -1: EINVAL before the capability.
	"settimeofday": {164, "addr(tv), 0", ""},
	// CLOCK_MONOTONIC cannot be set: EINVAL.
	"clock_settime": {227, "1, addr(tv)", ""},
	// NULL timex: EFAULT.
	"clock_adjtime": {305, "0, 0", ""},
	"adjtimex":      {159, "0", ""},
	// Length -1: EINVAL, after the capability.
	"sethostname":   {170, "0, -1", "CAP_SYS_ADMIN comes first"},
	"setdomainname": {171, "0, -1", "CAP_SYS_ADMIN comes first"},
	// Level 4, no ports: EINVAL (ENOSYS without CONFIG_X86_IOPL_IOPERM).
	"iopl":    {172, "4", ""},
	"ioperm":  {173, "0, 0, 0", ""},
	"vhangup": {153, "", "CAP_SYS_TTY_CONFIG comes first"},
	// NULL path: EFAULT, or ENOSYS without CONFIG_USELIB.
	"uselib": {134, "0", ""},
	// Removed in Linux 5.5 and 3.1: ENOSYS.
	"_sysctl":    {156, "0", ""},
	"nfsservctl": {180, "", ""},
}

// seccompMarker is the errno the filter returns for denied calls in the
// marker run: no kernel code returns it for any of them.
const seccompMarker = unix.EHWPOISON

// TestSeccompDeniesEachListedCall makes every call of the filter's denied
// list in a real sandbox, three times, and checks:
//
//   - with the filter as shipped, the call fails with EPERM;
//   - with the filter returning seccompMarker for denied calls (the same
//     program but for that errno), it fails with seccompMarker: the
//     filter caught this very number before the kernel ran the call, so
//     the EPERM of the first run is the filter's;
//   - without the filter, the call does not fail with EPERM, unless the
//     probe's kernelEPERM says when the kernel refuses it with EPERM by
//     itself (a capability check before the arguments, a sysctl): for
//     those the marker run is the only proof, and this run shows that
//     the probe changes nothing.
//
// The test is driven by the filter's list: a call added to it without a
// probe in seccompProbes fails, as does a probe for a call not on it.
func TestSeccompDeniesEachListedCall(t *testing.T) {
	needSeccompPython(t)
	a, _ := archFilter()
	listed := map[string]bool{}
	for _, d := range a.denied {
		listed[d.name] = true
	}
	for name := range seccompProbes {
		if !listed[name] {
			t.Errorf("seccompProbes has %s, which the filter does not deny: remove the probe", name)
		}
	}
	script := seccompProbeScript(t, a.denied)

	filtered := runProbes(t, script, a.denied)
	var marked, unfiltered map[string]unix.Errno
	withFilter(&testDenyErrno, seccompMarker, func() { marked = runProbes(t, script, a.denied) })
	withFilter(&testWithoutSeccomp, true, func() { unfiltered = runProbes(t, script, a.denied) })

	for _, d := range a.denied {
		t.Run(d.name, func(t *testing.T) {
			p := seccompProbes[d.name]
			if got := filtered[d.name]; got != unix.EPERM {
				t.Errorf("filtered: %s gave %s, want EPERM", d.name, errnoName(got))
			}
			if got := marked[d.name]; got != seccompMarker {
				t.Errorf("marker filter: %s gave %s, want %s: the filter did not catch it", d.name, errnoName(got), errnoName(seccompMarker))
			}
			got := unfiltered[d.name]
			switch {
			case got == seccompMarker:
				t.Errorf("unfiltered: %s gave the marker %s: the filter was on", d.name, errnoName(got))
			case got == unix.EPERM && p.kernelEPERM == "":
				t.Errorf("unfiltered: %s gave EPERM: its probe cannot tell the filter from the kernel; "+
					"choose arguments the kernel refuses before its permission checks", d.name)
			}
			note := ""
			if p.kernelEPERM != "" {
				note = " (the kernel may refuse it by itself: " + p.kernelEPERM + ")"
			}
			t.Logf("%s: filtered %s, marker %s, unfiltered %s%s", d.name,
				errnoName(filtered[d.name]), errnoName(marked[d.name]), errnoName(got), note)
		})
	}
}

// seccompProbeScript is a python3 program making each denied call, in the
// list's order, printing "name errno" (errno 0 for a success) per call.
func seccompProbeScript(t *testing.T, denied []deniedSyscall) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
pid = os.getpid()
tv = (ctypes.c_long * 2)(0, -1)
def addr(b):
    return ctypes.addressof(b)
def probe(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print(name, ctypes.get_errno() if r == -1 else 0, flush=True)
`)
	for _, d := range denied {
		p, ok := seccompProbes[d.name]
		if !ok {
			t.Errorf("no probe for %s (number %d), which the filter denies: add one to seccompProbes", d.name, d.nr)
			continue
		}
		if p.nr != d.nr {
			t.Errorf("the filter denies %s as number %d; x86_64's table says %d", d.name, d.nr, p.nr)
		}
		args := ""
		if p.args != "" {
			args = ", " + p.args
		}
		fmt.Fprintf(&b, "probe(%q, %d%s)\n", d.name, p.nr, args)
	}
	if t.Failed() {
		t.FailNow()
	}
	return b.String()
}

// runProbes runs script in a sandbox and returns each denied call's errno.
func runProbes(t *testing.T, script string, denied []deniedSyscall) map[string]unix.Errno {
	t.Helper()
	r, err := Run(context.Background(), Spec{Command: []string{"python3", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed() {
		t.Fatalf("the probes failed: %+v", r)
	}
	got := map[string]unix.Errno{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		name, e, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(e)
		if !ok || err != nil {
			t.Fatalf("probe output line %q is not \"name errno\"", line)
		}
		got[name] = unix.Errno(n)
	}
	for _, d := range denied {
		if _, ok := got[d.name]; !ok {
			t.Fatalf("no result for %s in the probes' output %q", d.name, r.Stdout)
		}
	}
	return got
}

// TestSeccomp32BitCalls makes the 32-bit calls a 64-bit process can
// make on x86_64, which the filter's numbers would mistake for other calls:
//
//   - int 0x80 (the ia32 entry; getpid, 20 there) kills the process with
//     SIGSYS. Without the filter the same code returns the pid, so the
//     kill is the filter's. A kernel without ia32 emulation answers int
//     0x80 with SIGSEGV before any filter: the case is skipped there.
//   - an x32 call (getpid's number with __X32_SYSCALL_BIT) fails with
//     EPERM, as the filter's comment says: it is not killed. Without the
//     filter it fails with ENOSYS (no CONFIG_X86_X32_ABI) or succeeds.
func TestSeccomp32BitCalls(t *testing.T) {
	needSeccompPython(t)
	t.Run("int 0x80", func(t *testing.T) {
		// mov eax, 20; int 0x80; ret — from an executable page, called
		// through ctypes.
		const code = `import ctypes, mmap, os
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print("calling", flush=True)
print("returned", "pid" if f() == os.getpid() else "other", flush=True)
`
		var r Result
		withFilter(&testWithoutSeccomp, true, func() { r = runPython(t, code) })
		if r.Signal == "SIGSEGV" && r.Stdout == "calling\n" {
			t.Skip("this kernel has no ia32 emulation: int 0x80 faults before any filter sees it")
		}
		if r.Stdout != "calling\nreturned pid\n" {
			t.Fatalf("unfiltered: got %+v, want int 0x80 getpid to return the pid", r)
		}
		r = runPython(t, code)
		if r.Stdout != "calling\n" || r.Signal != "SIGSYS" || r.Status != StatusSignal {
			t.Fatalf("filtered: got %+v, want the process killed by SIGSYS at int 0x80", r)
		}
	})
	t.Run("x32", func(t *testing.T) {
		code := fmt.Sprintf(`import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(ctypes.c_long(%d))
print(ctypes.get_errno() if r == -1 else 0)
`, 0x40000000|unix.SYS_GETPID)
		var r Result
		withFilter(&testWithoutSeccomp, true, func() { r = runPython(t, code) })
		if r.Stdout == fmt.Sprintf("%d\n", unix.EPERM) || !r.Passed() {
			t.Fatalf("unfiltered: got %+v, want ENOSYS or a success", r)
		}
		if r = runPython(t, code); r.Stdout != fmt.Sprintf("%d\n", unix.EPERM) {
			t.Fatalf("filtered: got %+v, want EPERM (%d)", r, unix.EPERM)
		}
	})
}

// withFilter runs f with a test knob of the filter set to v, and puts the
// knob back even when f fails the test.
func withFilter[T any](knob *T, v T, f func()) {
	old := *knob
	*knob = v
	defer func() { *knob = old }()
	f()
}

// runPython runs code with python3 in a sandbox.
func runPython(t *testing.T, code string) Result {
	t.Helper()
	r, err := Run(context.Background(), Spec{Command: []string{"python3", "-c", code}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// needSeccompPython skips on another architecture (the numbers are
// x86_64's) and without python3 under /usr, which the probes run in.
func needSeccompPython(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("system call numbers are x86_64's; the seccomp filter exists for amd64 only")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed under /usr")
	}
}

func errnoName(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return strconv.Itoa(int(e))
}
