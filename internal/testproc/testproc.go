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
package testproc

import (
	"os"
	"os/exec"
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
