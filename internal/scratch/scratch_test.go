package scratch_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/internal/scratch"
	"github.com/rlpipe/rlpipe/internal/testproc"
)

var owner = testproc.Helper{Test: "TestHelperProcess", Env: "RLPIPE_SCRATCH_TEST_HELPER", Parent: "the sweep tests"}

// TestHelperProcess is the process whose directories the tests sweep: it
// makes two directories in $RLPIPE_SCRATCH_TEST_HELPER, prints their
// paths and waits to be killed (or for stdin to close).
func TestHelperProcess(t *testing.T) {
	parent := owner.Role(t)
	for range 2 {
		d, err := scratch.Mkdir(parent, "rlpipe-test-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.Path(), "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(d.Path() + "\n")
	}
	os.Stdout.WriteString("ready\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// startOwner starts a helper that makes its directories in parent, and
// returns it with their paths once they exist.
func startOwner(t *testing.T, parent string) (*exec.Cmd, []string) {
	t.Helper()
	cmd := owner.Command(parent)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	var dirs []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		dirs = append(dirs, sc.Text())
	}
	if len(dirs) != 2 {
		t.Fatalf("helper made %v", dirs)
	}
	return cmd, dirs
}

func TestSweepRemovesOnlyDeadOwners(t *testing.T) {
	parent := t.TempDir()
	dead, deadDirs := startOwner(t, parent)
	_, liveDirs := startOwner(t, parent)
	if err := dead.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dead.Wait()
	// A directory of this process, and one not made by Mkdir at all.
	mine, err := scratch.Mkdir(parent, "rlpipe-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Remove()
	// Directories not made by Mkdir: no lock says their owner is dead.
	other := filepath.Join(parent, "other-dir")
	older := filepath.Join(parent, "rlpipe-test-1234abcd")
	for _, d := range []string{other, older} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}

	removed, err := scratch.Sweep(parent, "rlpipe-test-")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(deadDirs)
	if !slices.Equal(removed, deadDirs) {
		t.Fatalf("removed %v, want the killed owner's %v", removed, deadDirs)
	}
	for _, d := range deadDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s of the killed owner is still there (%v)", d, err)
		}
	}
	for _, d := range append(liveDirs, mine.Path(), other, older) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s of a live owner was removed: %v", d, err)
		}
	}
	for _, d := range deadDirs {
		if !strings.Contains(filepath.Base(d), "-p") {
			t.Errorf("%s does not name its owner's pid", d)
		}
	}
}

func TestRemove(t *testing.T) {
	parent := t.TempDir()
	d, err := scratch.Mkdir(parent, "rlpipe-test-")
	if err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(d.Path(), "ro")
	if err := os.MkdirAll(filepath.Join(ro, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ro, 0o500) // as a sandboxed program may leave it
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	if _, err := os.Stat(d.Path()); !os.IsNotExist(err) {
		t.Fatalf("%s is still there", d.Path())
	}
}

// TestMkdirWhileSweeping: a Sweep running while Mkdir makes a directory
// must not take it for a dead owner's — the window between making it
// and locking it once lost a live run its task directory.
func TestMkdirWhileSweeping(t *testing.T) {
	parent := t.TempDir()
	stop := make(chan struct{})
	swept := make(chan error, 1)
	go func() {
		var err error
		for {
			select {
			case <-stop:
				swept <- err
				return
			default:
			}
			if removed, e := scratch.Sweep(parent, "rlpipe-test-"); e != nil || len(removed) > 0 {
				err = fmt.Errorf("sweep removed %v of a live owner (%v)", removed, e)
			}
		}
	}()
	for i := range 3000 {
		d, err := scratch.Mkdir(parent, "rlpipe-test-")
		if err != nil {
			close(stop)
			t.Fatalf("Mkdir %d: %v", i, err)
		}
		if err := d.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
}

// A process killed inside Mkdir, between making its directory under a
// hidden name and renaming it into place, leaves an empty, unlocked
// ".PREFIXpPID-…" behind. Sweep removes such a directory once it is old
// enough that no live Mkdir can be about to lock it, and nothing else.
func TestSweepHiddenDirs(t *testing.T) {
	old := time.Now().Add(-2 * time.Minute)
	for _, c := range []struct {
		name    string
		dir     string
		mtime   time.Time
		locked  bool
		file    bool
		removed bool
	}{
		{"a killed Mkdir's", ".rlpipe-test-p4242-123", old, false, false, true},
		{"a fresh one, maybe a live Mkdir's", ".rlpipe-test-p4242-123", time.Now(), false, false, false},
		{"an old one locked", ".rlpipe-test-p4242-123", old, true, false, false},
		{"an old one with a file in it", ".rlpipe-test-p4242-123", old, false, true, false},
		{"an old one not named by Mkdir", ".rlpipe-test-123", old, false, false, false},
		{"an old one of another prefix", ".rlpipe-other-p4242-123", old, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			p := filepath.Join(parent, c.dir)
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			if c.file {
				if err := os.WriteFile(filepath.Join(p, "f"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if c.locked {
				f, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chtimes(p, c.mtime, c.mtime); err != nil {
				t.Fatal(err)
			}
			removed, err := scratch.Sweep(parent, "rlpipe-test-")
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(p)
			if c.removed && (!slices.Equal(removed, []string{p}) || !os.IsNotExist(statErr)) {
				t.Fatalf("Sweep removed %v (stat: %v), want %s removed", removed, statErr, p)
			}
			if !c.removed && (len(removed) > 0 || statErr != nil) {
				t.Fatalf("Sweep removed %v (stat: %v), want %s kept", removed, statErr, p)
			}
		})
	}
}

// An owner stalled between making its hidden directory and locking it
// for longer than HiddenGrace loses it to a Sweep, and Mkdir makes
// another: it still returns a locked directory, never one that is gone.
// Three losses in a row are an error that says what happened.
func TestMkdirAfterItsHiddenDirWasSwept(t *testing.T) {
	for _, c := range []struct {
		name   string
		losses int
		err    string
	}{
		{"swept once", 1, ""},
		{"swept twice", 2, ""},
		{"swept three times", 3, "removed by a sweep before it was locked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			var swept []string
			scratch.BeforeLock(t, func(staged string) {
				if len(swept) == c.losses {
					return
				}
				old := time.Now().Add(-2 * scratch.HiddenGrace)
				if err := os.Chtimes(staged, old, old); err != nil {
					t.Fatal(err)
				}
				removed, err := scratch.Sweep(parent, "rlpipe-test-")
				if err != nil || !slices.Equal(removed, []string{staged}) {
					t.Fatalf("Sweep removed %v (%v), want the stalled %s", removed, err, staged)
				}
				swept = append(swept, staged)
			})
			d, err := scratch.Mkdir(parent, "rlpipe-test-")
			if c.err != "" {
				if !errors.Is(err, scratch.ErrSwept) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Mkdir = %v, want an error saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Remove()
			if len(swept) != c.losses {
				t.Fatalf("swept %d hidden directories, want %d", len(swept), c.losses)
			}
			f, err := os.Open(d.Path())
			if err != nil {
				t.Fatalf("Mkdir returned %s, which is not there: %v", d.Path(), err)
			}
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != syscall.EWOULDBLOCK {
				t.Fatalf("%s is not locked (flock: %v)", d.Path(), err)
			}
			if left, _ := filepath.Glob(filepath.Join(parent, ".*")); len(left) > 0 {
				t.Fatalf("hidden directories left: %v", left)
			}
		})
	}
}
