package sandbox

import "testing"

// OnInit makes Run call f, until the test ends, with the host pid of each
// sandbox's init while the init waits on --block-fd, in its new
// namespaces, before the command starts; Run holds the init by a pidfd
// then, so the pid names it. f runs in Run's goroutine.
func OnInit(t testing.TB, f func(pid int)) {
	testHookInit = f
	t.Cleanup(func() { testHookInit = nil })
}
