package agent_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/sandbox"
)

// heldBytes sums the sizes of the regular files under dir, mounts included:
// what a workspace holds of the host's disk or memory. An overlay's files
// are counted once, in its upper layer.
func heldBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var fs syscall.Statfs_t
		if d.IsDir() && syscall.Statfs(p, &fs) == nil && fs.Type == overlayMagic {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// overlayMagic is an overlay file system's type in statfs(2).
const overlayMagic = 0x794c7630

// A tool call that writes more than the workspace's SizeBytes, in files
// each below the sandbox's file limit, fails with "No space left on
// device" in both modes, and the scratch directory never holds more than
// the limit beyond the world.
func TestWorkspaceDiskLimit(t *testing.T) {
	_, w := newWorld(t)
	const limit = 8 << 20
	world := heldBytes(t, w.Dir)
	for _, mode := range []agent.Mode{agent.ModeOverlay, agent.ModeCopy} {
		t.Run(string(mode), func(t *testing.T) {
			scratch := t.TempDir()
			for _, d := range []string{scratch, filepath.Dir(scratch)} { // reachable by the sandbox's user
				if err := os.Chmod(d, 0o711); err != nil {
					t.Fatal(err)
				}
			}
			ws, err := w.NewWorkspace(context.Background(), &agent.WorkspaceOptions{Mode: mode, ScratchDir: scratch, SizeBytes: limit})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			if ws.Mode() != mode {
				t.Fatalf("mode %s, want %s", ws.Mode(), mode)
			}
			// 12 MiB in 2 MiB files: each below the sandbox's FileBytes.
			r := run(t, ws, "for i in 1 2 3 4 5 6; do head -c 2M /dev/zero > f$i || exit 1; done")
			if r.Status != sandbox.StatusFileLimit || r.ExitCode != 1 || r.Stderr != "head: error writing 'standard output': No space left on device\n" {
				t.Fatalf("status %s, exit %d, stderr %q; want file_limit, 1, head's ENOSPC", r.Status, r.ExitCode, r.Stderr)
			}
			obs := agent.Observation(r, 0)
			if want := "exit status 1 (file_limit: a file grew past the size limit or the disk is full)\nstdout:\n(empty)\nstderr:\nhead: error writing 'standard output': No space left on device"; obs != want {
				t.Fatalf("observation %q, want %q", obs, want)
			}
			if held := heldBytes(t, scratch); held > limit+world {
				t.Fatalf("the scratch directory holds %d bytes, more than the limit %d and the world's %d", held, limit, world)
			} else {
				t.Logf("%s: the scratch directory holds %.1f MiB (limit %d MiB, world %d bytes)", mode, float64(held)/(1<<20), limit>>20, world)
			}
			// What is left is still the workspace's: a file that fits.
			if r := run(t, ws, "rm f1 f2 && echo ok > fits && cat fits"); r.Stdout != "ok\n" {
				t.Fatalf("after removing files: %+v", r)
			}
		})
	}
}
