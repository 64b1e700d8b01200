package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/rlpipe/rlpipe/internal/testproc"
)

var asNobody = testproc.Helper{Test: "TestNobodyHelper", Env: "RLPIPE_SANDBOX_TEST_NOBODY",
	Parent: "TestUnprivilegedSandbox"}

// noPIDNSEnv set to 1 in TestUnprivilegedSandbox's environment makes its
// helpers start bwrap the old way, without a PID namespace of its own:
// how the figures before the user and PID namespace were measured.
const noPIDNSEnv = "RLPIPE_SANDBOX_TEST_NO_PIDNS"

// forcedPIDNS applies noPIDNSEnv to this helper process.
func forcedPIDNS() {
	if os.Getenv(noPIDNSEnv) == "1" {
		none := pidNSNone
		testPIDNS = &none
	}
}

// TestNobodyHelper is TestUnprivilegedSandbox's subprocess, running as
// nobody: it checks that the probe chose a user and a PID namespace for
// bwrap, runs sandboxes that end each way on it, and then the number of
// kill-during-setup trials in its role, as superviseSetupKills (with
// noPIDNSEnv, the old way).
func TestNobodyHelper(t *testing.T) {
	trials, err := strconv.Atoi(asNobody.Role(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := pidMode(); got != pidNSUser {
		t.Fatalf("as uid %d bwrap starts with %s (%s), want %s", os.Geteuid(), got, pidNSWhy, pidNSUser)
	}
	forcedPIDNS()
	runEachWay(t)
	superviseSetupKills(t, trials)
}

// As an ordinary user (here nobody, uid 65534) a plain PID namespace is
// refused, and bwrap starts in a user and a PID namespace of its own:
// sandboxes run alike (an echo, an exit code, a self-kill, the wall
// limit), and a kill -9 during a sandbox's setup leaves nothing running,
// counted by a subreaper that sees only what its own killed runs leave
// (RLPIPE_CHAOS_TRIALS trials, default 4). The test binary is copied to a
// temp dir nobody may read, which is also the helper's TMPDIR.
func TestUnprivilegedSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to become nobody; as another user TestKillDuringSetupLeavesNothingRunning takes this path already")
	}
	trials := testproc.ChaosTrials(t, 4)
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("nobody may not reach the temp dir %s: %s is not searchable by others", dir, d)
		}
		if d == "/" {
			break
		}
	}
	bin := filepath.Join(dir, "sandbox.test")
	copyExecutable(t, os.Args[0], bin)
	cmd := asNobody.Command(strconv.Itoa(trials), "TMPDIR="+dir, "HOME="+dir)
	cmd.Path, cmd.Args[0], cmd.Dir = bin, bin, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper as nobody: %v\n%s", err, b)
	}
	checkTrials(t, string(b), trials)
}

// copyExecutable copies the file src to dst, mode 0755.
func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
