package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// socketFamilyCases are the families TestSeccompSocketFamilies opens
// sockets of in a sandbox: the three the filter allows and a dozen it
// refuses, with a socket type the family takes when allowed.
var socketFamilyCases = []struct {
	name    string
	family  int
	typ     int
	allowed bool
}{
	{"AF_UNIX", unix.AF_UNIX, unix.SOCK_STREAM, true},
	{"AF_INET", unix.AF_INET, unix.SOCK_STREAM, true},
	{"AF_INET6", unix.AF_INET6, unix.SOCK_STREAM, true},
	{"AF_NETLINK", unix.AF_NETLINK, unix.SOCK_RAW, false},
	{"AF_VSOCK", unix.AF_VSOCK, unix.SOCK_STREAM, false},
	{"AF_PACKET", unix.AF_PACKET, unix.SOCK_RAW, false},
	{"AF_ALG", unix.AF_ALG, unix.SOCK_SEQPACKET, false},
	{"AF_KEY", unix.AF_KEY, unix.SOCK_RAW, false},
	{"AF_BLUETOOTH", unix.AF_BLUETOOTH, unix.SOCK_RAW, false},
	{"AF_CAN", unix.AF_CAN, unix.SOCK_RAW, false},
	{"AF_TIPC", unix.AF_TIPC, unix.SOCK_RDM, false},
	{"AF_RDS", unix.AF_RDS, unix.SOCK_SEQPACKET, false},
	{"AF_XDP", unix.AF_XDP, unix.SOCK_RAW, false},
	{"AF_APPLETALK", unix.AF_APPLETALK, unix.SOCK_DGRAM, false},
	{"AF_X25", unix.AF_X25, unix.SOCK_SEQPACKET, false},
	{"AF_LLC", unix.AF_LLC, unix.SOCK_DGRAM, false},
	{"family 99", 99, unix.SOCK_STREAM, false},
}

// TestSeccompSocketFamilies calls socket() and socketpair() for each
// family of socketFamilyCases in a real sandbox, from python3 through
// ctypes (the errno of the call itself, not of a library's fallback):
//
//   - an allowed family never fails with EPERM (socket: it succeeds;
//     socketpair: it succeeds for AF_UNIX, the kernel answers EOPNOTSUPP
//     for the others);
//   - a refused family fails with EPERM, and with the marker errno when
//     the filter returns that instead: the filter refused it, not the
//     kernel (which refuses AF_PACKET and AF_NETLINK's raw kinds to the
//     sandbox's user by itself, and has no AF_BLUETOOTH here).
//
// TestSeccompDeniesEachListedCall shows io_uring_setup refused, so
// io_uring's socket operation is no way around this rule.
func TestSeccompSocketFamilies(t *testing.T) {
	needSeccompPython(t)
	var b strings.Builder
	b.WriteString(`import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    ctypes.set_errno(0)
    fds = (ctypes.c_int * 2)()
    r = libc.socket(*args) if name == "socket" else libc.socketpair(*args, fds)
    print(ctypes.get_errno() if r == -1 else 0, end=" ", flush=True)
`)
	for _, c := range socketFamilyCases {
		fmt.Fprintf(&b, "call(\"socket\", %d, %d, 0); call(\"socketpair\", %d, %d, 0); print()\n", c.family, c.typ, c.family, c.typ)
	}
	script := b.String()
	results := func() [][2]unix.Errno {
		t.Helper()
		r := runPython(t, script)
		lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
		if !r.Passed() || len(lines) != len(socketFamilyCases) {
			t.Fatalf("the probes: got %+v, want %d lines of two errnos", r, len(socketFamilyCases))
		}
		out := make([][2]unix.Errno, len(lines))
		for i, l := range lines {
			if _, err := fmt.Sscan(l, &out[i][0], &out[i][1]); err != nil {
				t.Fatalf("line %d %q: %v", i+1, l, err)
			}
		}
		return out
	}
	filtered := results()
	var marked [][2]unix.Errno
	withFilter(&testDenyErrno, seccompMarker, func() { marked = results() })

	for i, c := range socketFamilyCases {
		t.Run(c.name, func(t *testing.T) {
			for j, call := range []string{"socket", "socketpair"} {
				got, mark := filtered[i][j], marked[i][j]
				switch {
				case c.allowed && (got == unix.EPERM || mark == seccompMarker):
					t.Errorf("%s(%s) refused (%s, marker run %s): the family is allowed", call, c.name, errnoName(got), errnoName(mark))
				case c.allowed && call == "socket" && got != 0:
					t.Errorf("socket(%s) failed with %s, want a socket", c.name, errnoName(got))
				case c.allowed && call == "socketpair" && c.family == unix.AF_UNIX && got != 0:
					t.Errorf("socketpair(AF_UNIX) failed with %s, want a pair", errnoName(got))
				case !c.allowed && got != unix.EPERM:
					t.Errorf("%s(%s) gave %s, want EPERM", call, c.name, errnoName(got))
				case !c.allowed && mark != seccompMarker:
					t.Errorf("%s(%s) with the marker filter gave %s, want %s: the filter did not catch it",
						call, c.name, errnoName(mark), errnoName(seccompMarker))
				}
			}
		})
	}
}

// TestSeccompVsock shows why AF_VSOCK is refused and that it is: on a VM
// with virtio-vsock the sandbox's network namespace does not cover vsock,
// whose ports are the VM's. The test binds a vsock port on the host;
// unfiltered, a sandboxed bind of the same port fails with EADDRINUSE
// (the sandbox shares the host's port space); filtered, socket(AF_VSOCK)
// itself fails with EPERM. It skips where the host has no vsock.
func TestSeccompVsock(t *testing.T) {
	needSeccompPython(t)
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.ENODEV) {
		t.Skipf("no vsock on this host (%v)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: unix.VMADDR_PORT_ANY}); err != nil {
		t.Skipf("cannot bind a vsock port on this host: %v", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrVM).Port
	code := fmt.Sprintf(`import errno, socket
try:
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
except OSError as e:
    print("socket", errno.errorcode[e.errno])
    raise SystemExit
try:
    s.bind((socket.VMADDR_CID_ANY, %d))
    print("bind ok")
except OSError as e:
    print("bind", errno.errorcode[e.errno])
`, port)
	var r Result
	withFilter(&testWithoutSeccomp, true, func() { r = runPython(t, code) })
	if r.Stdout != "bind EADDRINUSE\n" {
		t.Fatalf("unfiltered: got %+v, want the host's port %d taken in the sandbox too", r, port)
	}
	if r = runPython(t, code); r.Stdout != "socket EPERM\n" {
		t.Fatalf("filtered: got %+v, want socket(AF_VSOCK) refused with EPERM", r)
	}
}
