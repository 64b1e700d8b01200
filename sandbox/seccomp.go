package sandbox

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter is the second wall around model code, after the
// namespaces: a classic BPF program that bwrap loads (--seccomp FD) just
// before it executes the command, so that the program and everything it
// starts cannot make the system calls that model code never needs and
// that are most of the kernel's attack surface.
//
// What it does, in order:
//
//  1. A system call made with another architecture's calling convention
//     (a 32-bit int 0x80 call on x86_64) kills the process: the numbers
//     below would mean other calls there.
//  2. On x86_64, x32 calls (number with bit 30 set) fail with EPERM.
//  3. Each call of deniedSyscalls fails with EPERM.
//  4. socket and socketpair fail with EPERM unless their address family
//     is one of socketFamilies: local sockets, and IPv4 and IPv6 in the
//     sandbox's empty network namespace. The others reach past that
//     namespace (AF_VSOCK shares the VM's port space with the host) or
//     are large kernel interfaces no model code needs (AF_NETLINK,
//     AF_PACKET, AF_ALG, AF_KEY, AF_BLUETOOTH, …). bwrap configures the
//     sandbox's loopback over netlink before it loads the filter, so the
//     filter need not allow AF_NETLINK for it. (io_uring, which can make
//     a socket too, is refused whole by rule 3.)
//  5. clone with any CLONE_NEW* flag fails with EPERM: no new namespace.
//  6. clone3 fails with ENOSYS: its flags sit in memory that a filter
//     cannot read, and C libraries fall back to clone on ENOSYS.
//  7. Everything else is allowed.
//
// The filter is built per architecture (seccomp_amd64.go); on one without
// a table, Run refuses to start (ErrInfra) rather than run unfiltered.

// A deniedSyscall is a system call the filter refuses, by name for errors
// and documentation.
type deniedSyscall struct {
	name string
	nr   uint32
}

// seccompArch describes the running architecture for the filter.
type seccompArch struct {
	audit  uint32 // AUDIT_ARCH_* the kernel reports in seccomp_data.arch
	x32Bit uint32 // the bit that marks x32 calls; 0 when the arch has none
	clone  uint32 // clone's number: its flags are the first argument
	clone3 uint32
	// socket and socketpair: their address family is the first argument.
	socket, socketpair uint32
	denied             []deniedSyscall
}

// socketFamilies are the address families a sandboxed program may open
// sockets of (rule 4 above).
var socketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}

// cloneNamespaceFlags are clone's flags that make a new namespace.
// (CLONE_NEWTIME, 0x80, exists only for clone3 and unshare: in clone's
// first argument those bits are the exit signal.)
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// Offsets into struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // args[0], low 32 bits on a little-endian machine
)

// seccompProgram returns the filter for the running architecture as the
// bytes bwrap reads (an array of struct sock_filter), or an error naming
// the architecture when there is no table for it.
func seccompProgram() ([]byte, error) {
	a, ok := archFilter()
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for GOARCH=%s (only amd64 has one); run the sandbox on x86_64, "+
			"or set %s=1 to run model code without a seccomp filter, knowingly: %w", runtime.GOARCH, EnvNoSeccomp, ErrInfra)
	}
	raw, err := bpf.Assemble(a.instructions())
	if err != nil {
		return nil, fmt.Errorf("assemble the seccomp filter: %v: %w", err, ErrInfra)
	}
	var b bytes.Buffer
	for _, ins := range raw {
		// struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; } in
		// the machine's byte order.
		_ = binary.Write(&b, binary.NativeEndian, ins)
	}
	return b.Bytes(), nil
}

func (a seccompArch) instructions() []bpf.Instruction {
	errno := func(e unix.Errno) bpf.Instruction {
		return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA}
	}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	deny := unix.EPERM
	if testDenyErrno != 0 {
		deny = testDenyErrno
	}
	if a.x32Bit != 0 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: a.x32Bit, SkipTrue: 1},
			errno(unix.EPERM))
	}
	for _, d := range a.denied {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: d.nr, SkipTrue: 1},
			errno(deny))
	}
	// socket or socketpair: allow the families of socketFamilies, deny
	// the rest. Otherwise skip the block, the number still loaded.
	n := len(socketFamilies)
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.socket, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: a.socketpair, SkipTrue: uint8(n + 3)},
		bpf.LoadAbsolute{Off: offArg0, Size: 4})
	for i, f := range socketFamilies {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: f, SkipTrue: uint8(n - i)})
	}
	prog = append(prog, errno(deny), allow)
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: a.clone3, SkipTrue: 1},
		errno(unix.ENOSYS),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.clone, SkipTrue: 1},
		allow,
		bpf.LoadAbsolute{Off: offArg0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaceFlags, SkipTrue: 1},
		allow,
		errno(unix.EPERM),
	)
	return prog
}

// EnvNoSeccomp, set to 1, lets Run start sandboxes without a seccomp
// filter on an architecture that has none (see seccompProgram). Nothing
// else turns the filter off.
const EnvNoSeccomp = "RLPIPE_SANDBOX_NO_SECCOMP"

// testWithoutSeccomp turns the filter off, for the test that shows what
// bwrap's --disable-userns does by itself.
var testWithoutSeccomp = false

// testDenyErrno, when not 0, is the errno the filter returns for the calls
// of the denied list instead of EPERM. The kernel refuses some of those
// calls with EPERM by itself (it checks a capability the sandbox lacks
// before anything else), so EPERM alone cannot show that the filter
// caught them; an errno the kernel never returns for them can. The same
// holds for the socket families refused. The x32 and clone rules keep
// EPERM.
var testDenyErrno unix.Errno

// seccompFile returns a file holding the filter, for bwrap's --seccomp,
// or nil when there is no filter for this architecture and EnvNoSeccomp
// allows that.
func seccompFile() (*os.File, error) {
	if testWithoutSeccomp {
		return nil, nil
	}
	prog, err := seccompProgram()
	if err != nil {
		if os.Getenv(EnvNoSeccomp) == "1" {
			return nil, nil
		}
		return nil, err
	}
	return memFile("rlpipe-seccomp", prog)
}

// memFile returns an unlinked in-memory file holding data, read from the
// start.
func memFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for %s: %v: %w", name, err, ErrInfra)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %v: %w", name, err, ErrInfra)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind %s: %v: %w", name, err, ErrInfra)
	}
	return f, nil
}
