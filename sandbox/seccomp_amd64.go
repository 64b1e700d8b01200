package sandbox

import "golang.org/x/sys/unix"

// archFilter is x86_64's table: what model code never needs. Each call
// here needs a probe in seccompProbes (seccomp_internal_test.go), which
// makes it in a sandbox: the test fails for a call without one.
func archFilter() (seccompArch, bool) {
	return seccompArch{
		audit:  unix.AUDIT_ARCH_X86_64,
		x32Bit: 0x40000000, // __X32_SYSCALL_BIT
		clone:  unix.SYS_CLONE,
		clone3: unix.SYS_CLONE3,
		socket: unix.SYS_SOCKET, socketpair: unix.SYS_SOCKETPAIR,
		denied: []deniedSyscall{
			// Other processes' memory and descriptors.
			{"ptrace", unix.SYS_PTRACE},
			{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
			{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
			{"kcmp", unix.SYS_KCMP},
			{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
			// Namespaces and mounts.
			{"unshare", unix.SYS_UNSHARE},
			{"setns", unix.SYS_SETNS},
			{"mount", unix.SYS_MOUNT},
			{"umount2", unix.SYS_UMOUNT2},
			{"pivot_root", unix.SYS_PIVOT_ROOT},
			{"chroot", unix.SYS_CHROOT},
			{"open_tree", unix.SYS_OPEN_TREE},
			{"move_mount", unix.SYS_MOVE_MOUNT},
			{"fsopen", unix.SYS_FSOPEN},
			{"fsconfig", unix.SYS_FSCONFIG},
			{"fsmount", unix.SYS_FSMOUNT},
			{"fspick", unix.SYS_FSPICK},
			{"mount_setattr", unix.SYS_MOUNT_SETATTR},
			{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
			{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
			// The kernel's keyring.
			{"keyctl", unix.SYS_KEYCTL},
			{"add_key", unix.SYS_ADD_KEY},
			{"request_key", unix.SYS_REQUEST_KEY},
			// Large, often-exploited kernel interfaces.
			{"bpf", unix.SYS_BPF},
			{"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
			{"userfaultfd", unix.SYS_USERFAULTFD},
			{"io_uring_setup", unix.SYS_IO_URING_SETUP},
			{"io_uring_enter", unix.SYS_IO_URING_ENTER},
			{"io_uring_register", unix.SYS_IO_URING_REGISTER},
			{"fanotify_init", unix.SYS_FANOTIFY_INIT},
			{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
			// The machine itself: kernels, modules, swap, clocks, names, ports.
			{"kexec_load", unix.SYS_KEXEC_LOAD},
			{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
			{"init_module", unix.SYS_INIT_MODULE},
			{"finit_module", unix.SYS_FINIT_MODULE},
			{"delete_module", unix.SYS_DELETE_MODULE},
			{"reboot", unix.SYS_REBOOT},
			{"swapon", unix.SYS_SWAPON},
			{"swapoff", unix.SYS_SWAPOFF},
			{"acct", unix.SYS_ACCT},
			{"quotactl", unix.SYS_QUOTACTL},
			{"syslog", unix.SYS_SYSLOG},
			{"settimeofday", unix.SYS_SETTIMEOFDAY},
			{"clock_settime", unix.SYS_CLOCK_SETTIME},
			{"clock_adjtime", unix.SYS_CLOCK_ADJTIME},
			{"adjtimex", unix.SYS_ADJTIMEX},
			{"sethostname", unix.SYS_SETHOSTNAME},
			{"setdomainname", unix.SYS_SETDOMAINNAME},
			{"iopl", unix.SYS_IOPL},
			{"ioperm", unix.SYS_IOPERM},
			{"vhangup", unix.SYS_VHANGUP},
			{"uselib", unix.SYS_USELIB},
			{"_sysctl", unix.SYS__SYSCTL},
			{"nfsservctl", unix.SYS_NFSSERVCTL},
		},
	}, true
}
