package sandbox

import (
	"cmp"
	"fmt"
	"time"
)

// Default limits, used for each zero field of Limits.
const (
	DefaultCPUTime     = 10 * time.Second
	DefaultWall        = 30 * time.Second
	DefaultMemoryBytes = 512 << 20
	DefaultOutputBytes = 1 << 20
	DefaultFileBytes   = 64 << 20
	DefaultProcs       = 64
)

// Limits bound one run. A zero field means its default (DefaultCPUTime, …).
//
// How each limit is enforced (Enforcement says whether a cgroup is in
// force here; see cgroup.go):
//
//   - CPUTime: with a cgroup, the CPU time of all the sandbox's processes
//     together; Run kills the sandbox past it. Always RLIMIT_CPU too,
//     rounded up to whole seconds, counted per process.
//     SIGXCPU at the limit, SIGKILL one second later if the program ignores
//     it; the result reads StatusTimeout either way (bwrap does not report
//     the CPU time, so a SIGKILL that Run did not send is read as this one).
//   - Wall: a timer in Run that kills the sandbox's process group; the
//     sandbox's PID namespace dies with it.
//   - MemoryBytes: with a cgroup, the memory (and swap) of all the
//     sandbox's processes together; the kernel kills one past it. Always
//     RLIMIT_AS (address space) per process too: allocations past it
//     fail, so the program usually dies with its runtime's out-of-memory
//     error. Without a cgroup a sandbox may hold MemoryBytes × Procs.
//   - Procs: RLIMIT_NPROC, counted per user inside the sandbox's own user
//     namespace, so a fork bomb stops at Procs tasks (threads count; the
//     sandbox's init is one); with a cgroup, its pids limit too.
//   - OutputBytes: stdout and stderr each; Run kills the program at the
//     first byte past the limit.
//   - FileBytes: RLIMIT_FSIZE for each file, and the size of each writable
//     tmpfs (/work, /tmp, /dev/shm), so many files cannot fill memory either.
type Limits struct {
	CPUTime     time.Duration
	Wall        time.Duration
	MemoryBytes int64
	OutputBytes int64
	FileBytes   int64
	Procs       int
}

// withDefaults returns l with each zero field set to its default.
func (l Limits) withDefaults() Limits {
	l.CPUTime = cmp.Or(l.CPUTime, DefaultCPUTime)
	l.Wall = cmp.Or(l.Wall, DefaultWall)
	l.MemoryBytes = cmp.Or(l.MemoryBytes, DefaultMemoryBytes)
	l.OutputBytes = cmp.Or(l.OutputBytes, DefaultOutputBytes)
	l.FileBytes = cmp.Or(l.FileBytes, DefaultFileBytes)
	l.Procs = cmp.Or(l.Procs, DefaultProcs)
	return l
}

func (l Limits) validate() error {
	for _, f := range []struct {
		name     string
		negative bool
		value    any // a time.Duration prints as one
	}{
		{"CPUTime", l.CPUTime < 0, l.CPUTime},
		{"Wall", l.Wall < 0, l.Wall},
		{"MemoryBytes", l.MemoryBytes < 0, l.MemoryBytes},
		{"OutputBytes", l.OutputBytes < 0, l.OutputBytes},
		{"FileBytes", l.FileBytes < 0, l.FileBytes},
		{"Procs", l.Procs < 0, l.Procs},
	} {
		if f.negative {
			return fmt.Errorf("limits: negative %s %v: %w", f.name, f.value, ErrInvalid)
		}
	}
	return nil
}

// cpuSeconds is CPUTime rounded up to whole seconds, at least 1.
func (l Limits) cpuSeconds() int64 {
	s := int64((l.CPUTime + time.Second - 1) / time.Second)
	return max(s, 1)
}
