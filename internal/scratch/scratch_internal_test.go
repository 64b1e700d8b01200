package scratch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// An owner stalled between making its hidden directory and locking it
// for longer than hiddenGrace loses it to a Sweep, and Mkdir makes
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
			testBeforeLock = func(staged string) {
				if len(swept) == c.losses {
					return
				}
				old := time.Now().Add(-2 * hiddenGrace)
				if err := os.Chtimes(staged, old, old); err != nil {
					t.Fatal(err)
				}
				removed, err := Sweep(parent, "rlpipe-test-")
				if err != nil || !slices.Equal(removed, []string{staged}) {
					t.Fatalf("Sweep removed %v (%v), want the stalled %s", removed, err, staged)
				}
				swept = append(swept, staged)
			}
			defer func() { testBeforeLock = nil }()

			d, err := Mkdir(parent, "rlpipe-test-")
			if c.err != "" {
				if !errors.Is(err, errSwept) || !strings.Contains(err.Error(), c.err) {
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
			if fi, err := os.Stat(d.Path()); err != nil || !fi.IsDir() {
				t.Fatalf("Mkdir returned %s, which is not there: %v", d.Path(), err)
			}
			if dead, err := ownerDead(d.Path()); dead || err != nil {
				t.Fatalf("%s is not locked (dead %v, %v)", d.Path(), dead, err)
			}
			if left, _ := filepath.Glob(filepath.Join(parent, ".*")); len(left) > 0 {
				t.Fatalf("hidden directories left: %v", left)
			}
		})
	}
}
