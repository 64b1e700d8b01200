package sandbox

import (
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Status says how a run ended. Only StatusOK passes.
type Status string

const (
	StatusOK          Status = "ok"           // exited 0
	StatusFailed      Status = "failed"       // exited non-zero
	StatusTimeout     Status = "timeout"      // CPU time or wall-clock limit
	StatusMemory      Status = "memory"       // ran out of its address-space limit
	StatusOutputLimit Status = "output_limit" // printed more than OutputBytes; killed
	StatusFileLimit   Status = "file_limit"   // wrote past FileBytes (one file or the workspace)
	StatusSignal      Status = "signal"       // died of a signal no limit sent (crash, abort, kill -9 $$, …); Result.Signal names it
	StatusCanceled    Status = "canceled"     // the caller's context ended; Run also returns its error
)

// StatusKilled is the old name of StatusSignal.
//
// Deprecated: use StatusSignal.
const StatusKilled = StatusSignal

// Result is the verdict on one run. Its fields become typed inputs of
// reward expressions through Vars.
type Result struct {
	// ExitCode is the program's exit code; 128+n when signal n killed it
	// (the shell convention), -1 when Run killed the sandbox itself.
	ExitCode int
	// Stdout and Stderr hold at most Limits.OutputBytes each.
	Stdout, Stderr string
	// TimedOut: the CPU time or wall-clock limit was reached.
	TimedOut bool
	// OutputTruncated: stdout or stderr passed OutputBytes and the program
	// was killed.
	OutputTruncated bool
	// MemoryExceeded: the program ran out of its memory limit.
	MemoryExceeded bool
	// Signal names the signal that ended the program ("SIGKILL"), or "".
	// bwrap reports it as exit code 128+n, so a program that exits 130
	// itself reads as SIGINT.
	Signal string
	// Duration is the wall-clock time of the sandbox, setup included.
	Duration time.Duration
	// Status sums up the above; see the Status constants.
	Status Status
	// Verdict is what the program wrote to its verdict channel
	// (Spec.Verdict), at most VerdictBytes; "" when it wrote nothing.
	Verdict string
}

// Passed reports whether the program exited 0 within its limits.
func (r Result) Passed() bool { return r.Status == StatusOK }

// Vars returns the result as named values for a reward expression:
// passed (bool), exit_code (int), stdout and stderr (string), timed_out,
// output_truncated and memory_exceeded (bool), signal and status (string),
// duration_seconds (float).
func (r Result) Vars() map[string]any {
	return map[string]any{
		"passed":           r.Passed(),
		"exit_code":        r.ExitCode,
		"stdout":           r.Stdout,
		"stderr":           r.Stderr,
		"timed_out":        r.TimedOut,
		"output_truncated": r.OutputTruncated,
		"memory_exceeded":  r.MemoryExceeded,
		"signal":           r.Signal,
		"status":           string(r.Status),
		"duration_seconds": r.Duration.Seconds(),
	}
}

// Messages that runtimes print when an allocation fails, lower case.
// RLIMIT_AS makes allocations fail rather than killing the program, so
// this is how a run is told apart as StatusMemory.
var memoryMarkers = []string{
	"memoryerror",              // Python
	"cannot allocate",          // ENOMEM from libc; bash's xmalloc
	"memory exhausted",         // coreutils, bison, gawk
	"out of memory",            // Go, Node, many C programs
	"std::bad_alloc",           // C++
	"memory allocation failed", // libc malloc failures reported by tools
}

// Messages for a write refused by RLIMIT_FSIZE (programs that ignore
// SIGXFSZ, as Python does) or by a full tmpfs.
var fileMarkers = []string{
	"file too large",          // EFBIG
	"no space left on device", // ENOSPC
}

func hasMarker(s string, markers []string) bool {
	s = strings.ToLower(s)
	for _, m := range markers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// signalNames are the names of the signals a sandboxed program may die of.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGSTKFLT: "SIGSTKFLT", syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT",
	syscall.SIGSTOP: "SIGSTOP", syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN",
	syscall.SIGTTOU: "SIGTTOU", syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF",
	syscall.SIGWINCH: "SIGWINCH", syscall.SIGIO: "SIGIO", syscall.SIGPWR: "SIGPWR",
	syscall.SIGSYS: "SIGSYS",
}

// outcome is what Run observed, before classification.
type outcome struct {
	exitCode     int  // from bwrap's status; -1 when unknown
	killedOutput bool // Run killed the sandbox for too much output
	killedWall   bool // Run killed the sandbox at the wall-clock limit
	// cpuLimitReachable: a process of the sandbox may have used its CPU
	// rlimit, so a SIGXCPU or SIGKILL may be the kernel's (see
	// cpuLimitReachable).
	cpuLimitReachable bool
	oomKilled         bool // the sandbox's cgroup killed a process at its memory limit
	stdout, stderr    string
}

// classify turns what Run observed into a Result (Duration aside).
func classify(o outcome) Result {
	r := Result{ExitCode: o.exitCode, Stdout: o.stdout, Stderr: o.stderr}
	var sig syscall.Signal
	if o.exitCode > 128 && o.exitCode < 128+65 {
		sig = syscall.Signal(o.exitCode - 128)
		r.Signal = signalNames[sig]
	}
	if o.killedOutput || o.killedWall {
		r.ExitCode, r.Signal = -1, "SIGKILL"
	}
	switch {
	case o.killedOutput:
		r.OutputTruncated, r.Status = true, StatusOutputLimit
	case o.oomKilled:
		// Before the SIGKILL case (the kernel's OOM killer sends SIGKILL) and
		// the wall clock (a program may wait forever for a killed child).
		r.MemoryExceeded, r.Status = true, StatusMemory
	case o.killedWall:
		r.TimedOut, r.Status = true, StatusTimeout
	case (sig == syscall.SIGXCPU || sig == syscall.SIGKILL) && o.cpuLimitReachable:
		// Run did not send this SIGKILL; the kernel sends SIGXCPU at the CPU
		// limit, and SIGKILL a second later to a program that ignores it. A
		// program that could not have used that much CPU sent it itself,
		// and falls to StatusSignal below.
		r.TimedOut, r.Status = true, StatusTimeout
	case sig == syscall.SIGXFSZ:
		r.Status = StatusFileLimit
	case o.exitCode != 0 && hasMarker(o.stderr, memoryMarkers):
		r.MemoryExceeded, r.Status = true, StatusMemory
	case o.exitCode != 0 && hasMarker(o.stderr, fileMarkers):
		r.Status = StatusFileLimit
	case r.Signal != "":
		r.Status = StatusSignal
	case o.exitCode == 0:
		r.Status = StatusOK
	default:
		r.Status = StatusFailed
	}
	return r
}

// cpuLimitReachable reports whether a process of a sandbox with limits lim
// may have reached its CPU rlimit (lim.cpuSeconds(), where the kernel
// sends SIGXCPU), given that the sandbox ran for elapsed and its group
// counted used CPU time (counted is false without a group that counts
// it). It cannot have when the group counted less than half the limit
// (the group's count lags the kernel's per-process one: 0.94 s was read
// for a process sent SIGXCPU at 1 s), nor when the machine's cores could
// not have spent the limit in elapsed. Either answer errs toward true: a
// self-inflicted SIGKILL after a long, busy run still reads as
// StatusTimeout.
func cpuLimitReachable(lim Limits, elapsed, used time.Duration, counted bool) bool {
	limit := time.Duration(lim.cpuSeconds()) * time.Second
	if counted && used < limit/2 {
		return false
	}
	return elapsed*time.Duration(runtime.NumCPU()) >= limit
}
