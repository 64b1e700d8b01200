package scratch

import "testing"

// BeforeLock makes Mkdir call f, until the test ends, with each hidden
// directory it has made and not yet locked.
func BeforeLock(t testing.TB, f func(staged string)) {
	testBeforeLock = f
	t.Cleanup(func() { testBeforeLock = nil })
}

// ErrSwept and HiddenGrace are errSwept and hiddenGrace, for the tests.
var ErrSwept = errSwept

const HiddenGrace = hiddenGrace
