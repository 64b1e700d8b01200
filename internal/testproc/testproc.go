// Package testproc runs one test of a test binary as a helper process of
// another: the process a test kills, or the next process that must clean
// up after it. The helper is a test function that reads its role from an
// environment variable and skips when it is unset (the ordinary test run):
//
//	func TestSweepHelper(t *testing.T) {
//		dir := testproc.Role(t, sweepEnv, "TestKilledRunsAreSwept")
//		…
//	}
//
//	cmd := testproc.Command("TestSweepHelper", sweepEnv+"="+dir)
//
// A Helper value names the three once, for a test file that starts its
// helper in several places:
//
//	var sweeper = testproc.Helper{Test: "TestSweepHelper", Env: "RLPIPE_X_SWEEP", Parent: "TestKilledRunsAreSwept"}
//
//	func TestSweepHelper(t *testing.T) { dir := sweeper.Role(t); … }
//
//	cmd := sweeper.Command(dir)
package testproc

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Role returns the environment variable env of a helper process. Unset or
// empty, it skips t: the test runs only as a subprocess of the test
// parent.
func Role(t *testing.T, env, parent string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skip("a subprocess of " + parent)
	}
	return v
}

// Command is this test binary running only the test named test, once,
// with env ("KEY=value" pairs) added to this process's environment.
func Command(test string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// Helper is one helper process: the test function that is the helper,
// the environment variable that carries its role, and the test (or the
// tests) that start it, named when the helper skips.
type Helper struct {
	Test   string
	Env    string
	Parent string
}

// Role is Role(t, h.Env, h.Parent): the helper's role, or a skip.
func (h Helper) Role(t *testing.T) string {
	t.Helper()
	return Role(t, h.Env, h.Parent)
}

// Command is Command(h.Test, …): the helper with role in h.Env and env
// ("KEY=value" pairs) added.
func (h Helper) Command(role string, env ...string) *exec.Cmd {
	return Command(h.Test, append([]string{h.Env + "=" + role}, env...)...)
}

// ChaosEnv is the variable by which `make chaos` sets how many trials the
// kill tests run.
const ChaosEnv = "RLPIPE_CHAOS_TRIALS"

// ChaosTrials is how many times a kill test kills its helper: def, or
// $RLPIPE_CHAOS_TRIALS when set. Another value than a number ≥ 1 fails t.
func ChaosTrials(t testing.TB, def int) int {
	t.Helper()
	return IntEnv(t, ChaosEnv, def, 1)
}

// IntEnv is the number in the environment variable name, or def when it
// is unset or empty. Another value than a number ≥ least fails t, naming
// the variable.
func IntEnv(t testing.TB, name string, def, least int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want a number ≥ %d", name, v, least)
	}
	return n
}
