package sandbox

import "context"

// A group bounds a sandbox as a whole (a cgroup): every process the
// sandbox starts is in it.
type group interface {
	// enter moves the process pid, the sandbox's init, into the group.
	enter(pid int) error
	// memoryExceeded reports whether the group killed a process at its
	// memory limit.
	memoryExceeded() bool
	// remove deletes the group once the sandbox is gone.
	remove()
}

func newGroup(ctx context.Context, lim Limits) (group, error) { return nil, nil }
