// Package rewardstest is what tests that score with a reward spec share:
// the spec's text compiled as the command compiles it (Program), and rows
// scored as the reward stage scores them (ScoreRows, or ScoreFile with
// the test's own score options), failing the test instead of returning
// an error.
//
// It sits in the unit rewards (internal/layers), so a test of a layer at
// or above the loop may import it; only tests do, so "testing" never
// links into the command. The tests of package rewards itself cannot
// (rewardstest imports rewards); they compile with Compile directly.
package rewardstest

import (
	"testing"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/runners"
)

// Program parses text as the spec file name (the name its errors and
// positions carry) and compiles it with its verifiers and judges, as
// runners.Compile does, with the extra options; an error fails t.
func Program(t testing.TB, name, text string, extra ...rewards.Option) *rewards.Program {
	t.Helper()
	spec, err := rewards.ParseSpec(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := runners.Compile(spec, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return prog
}
