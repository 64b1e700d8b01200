package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/internal/scratch"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Mode says how a workspace copies its world.
type Mode string

const (
	// ModeAuto tries ModeOverlay and falls back to ModeCopy.
	ModeAuto Mode = ""
	// ModeOverlay mounts an overlay file system: the world is the read-only
	// lower layer, the episode's writes go to an upper layer on a tmpfs of
	// its own. Setup takes the same time whatever the world's size. It
	// needs the right to mount (root, or CAP_SYS_ADMIN).
	ModeOverlay Mode = "overlay"
	// ModeCopy copies the world with `cp -a` onto a tmpfs of its own, as
	// big as the world and SizeBytes: the episode's writes are bounded as
	// in ModeOverlay, and the copy is in memory. Without the right to
	// mount, the copy goes to ScratchDir (`cp --reflink=auto`, instant on
	// file systems that share blocks), bounded per file only, and
	// Fallback says so.
	ModeCopy Mode = "copy"
)

// WorkspaceOptions tune workspaces. A nil *WorkspaceOptions means the
// defaults.
type WorkspaceOptions struct {
	Mode Mode
	// ScratchDir holds the workspaces; "" means os.TempDir(). Every
	// directory down to it must be searchable by the sandbox's user
	// (o+x when running as root).
	ScratchDir string
	// SizeBytes bounds what an episode may write: the size of the tmpfs
	// holding an overlay's upper layer, or of a copy beyond the world's
	// own files; 0 means sandbox.DefaultFileBytes. A write past it fails
	// with ENOSPC ("No space left on device"), a tool call's status
	// file_limit.
	SizeBytes int64
}

// Workspace is an episode's private copy of a world: a directory that
// starts as the world and takes the episode's writes, bound as /work in
// each sandboxed command. Close deletes it.
type Workspace struct {
	world    *World
	base     string       // the workspace's directory under ScratchDir
	dir      *scratch.Dir // base, locked while the episode lives
	root     string       // what the sandbox sees as /work
	mode     Mode
	fallback string
	mounts   []string // mount points to unmount, innermost first
	setup    time.Duration

	closeOnce sync.Once
	closeErr  error
}

// NewWorkspace makes a private copy-on-write copy of w.
func (w *World) NewWorkspace(ctx context.Context, opts *WorkspaceOptions) (*Workspace, error) {
	var o WorkspaceOptions
	if opts != nil {
		o = *opts
	}
	if o.Mode != ModeAuto && o.Mode != ModeOverlay && o.Mode != ModeCopy {
		return nil, fmt.Errorf("workspace: unknown mode %q (want overlay or copy): %w", o.Mode, ErrInvalid)
	}
	if o.SizeBytes < 0 {
		return nil, fmt.Errorf("workspace: negative SizeBytes %d: %w", o.SizeBytes, ErrInvalid)
	}
	if o.SizeBytes == 0 {
		o.SizeBytes = sandbox.DefaultFileBytes
	}
	if o.ScratchDir == "" {
		o.ScratchDir = os.TempDir()
	}
	if err := reachable(o.ScratchDir); err != nil {
		return nil, err
	}
	start := time.Now()
	sweepEpisodes(o.ScratchDir)
	dir, err := scratch.Mkdir(o.ScratchDir, episodePrefix)
	if err != nil {
		return nil, fmt.Errorf("workspace of world %q: %v: %w", w.Name, err, ErrInfra)
	}
	base := dir.Path()
	ws := &Workspace{world: w, base: base, dir: dir}
	if err := os.Chmod(base, 0o711); err != nil {
		ws.Close()
		return nil, fmt.Errorf("workspace of world %q: %v: %w", w.Name, err, ErrInfra)
	}
	if o.Mode != ModeCopy {
		err := ws.overlay(o.SizeBytes)
		if err == nil {
			ws.setup = time.Since(start)
			return ws, nil
		}
		if o.Mode == ModeOverlay {
			ws.Close()
			return nil, fmt.Errorf("workspace of world %q: overlay: %v: %w", w.Name, err, ErrInfra)
		}
		ws.fallback = err.Error()
		ws.unmount()
	}
	if err := ws.copy(ctx, o.SizeBytes); err != nil {
		ws.Close()
		return nil, fmt.Errorf("workspace of world %q: copy: %v: %w", w.Name, err, ErrInfra)
	}
	ws.setup = time.Since(start)
	return ws, nil
}

// overlay mounts a tmpfs on base/m holding upper and work, and the
// overlay of the world and upper on base/m/merged. (Not on base itself:
// base stays the directory whose lock tells a sweep its owner lives.)
func (ws *Workspace) overlay(size int64) error {
	if strings.ContainsAny(ws.world.Dir+ws.base, ",:\\") {
		return errors.New("a path holds ',', ':' or '\\', which overlay options cannot carry")
	}
	m := filepath.Join(ws.base, "m")
	if err := os.Mkdir(m, 0o711); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", m, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV,
		"size="+strconv.FormatInt(size, 10)+",mode=0711"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	ws.mounts = append(ws.mounts, m)
	upper, work, merged := filepath.Join(m, "upper"), filepath.Join(m, "work"), filepath.Join(m, "merged")
	fi, err := os.Stat(ws.world.Dir)
	if err != nil {
		return err
	}
	for _, d := range []string{upper, work, merged} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	// The overlay's root takes its owner and mode from upper's.
	uid, gid := sandbox.SandboxUID()
	if err := os.Chown(upper, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(upper, fi.Mode().Perm()); err != nil {
		return err
	}
	opts := "lowerdir=" + ws.world.Dir + ",upperdir=" + upper + ",workdir=" + work
	if err := syscall.Mount("overlay", merged, "overlay", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	ws.mounts = append([]string{merged}, ws.mounts...)
	ws.root, ws.mode = merged, ModeOverlay
	return nil
}

// copy copies the world to base/m/root, on a tmpfs of the world's size
// and size more mounted on base/m, or, where mounting is refused, to
// base/root, unbounded.
func (ws *Workspace) copy(ctx context.Context, size int64) error {
	root := filepath.Join(ws.base, "root")
	if err := ws.copyTmpfs(size); err != nil {
		ws.unmount()
		if ws.fallback != "" {
			ws.fallback += "; "
		}
		ws.fallback += "the copy is bounded per file only, not to SizeBytes: " + err.Error()
	} else {
		root = filepath.Join(ws.base, "m", "root")
	}
	out, err := exec.CommandContext(ctx, "cp", "--reflink=auto", "-a", "--", ws.world.Dir, root).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp: %v: %s", err, strings.TrimSpace(string(out)))
	}
	ws.root, ws.mode = root, ModeCopy
	return nil
}

// copyTmpfs mounts on base/m a tmpfs for a copy of the world and size
// bytes of the episode's writes.
func (ws *Workspace) copyTmpfs(size int64) error {
	held, err := tmpfsBytes(ws.world.Dir)
	if err != nil {
		return fmt.Errorf("measure the world: %w", err)
	}
	m := filepath.Join(ws.base, "m")
	if err := os.Mkdir(m, 0o711); err != nil && !os.IsExist(err) {
		return err
	}
	if err := syscall.Mount("tmpfs", m, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV,
		"size="+strconv.FormatInt(held+size, 10)+",mode=0711"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	ws.mounts = append(ws.mounts, m)
	return nil
}

// tmpfsBytes bounds what a copy of dir takes of a tmpfs: each regular
// file's and long symlink's size rounded up to whole pages.
func tmpfsBytes(dir string) (int64, error) {
	page := int64(os.Getpagesize())
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			n += (fi.Size() + page - 1) / page * page
		}
		return nil
	})
	return n, err
}

// Mode returns how the world was copied: ModeOverlay or ModeCopy.
func (ws *Workspace) Mode() Mode { return ws.mode }

// Fallback says why ModeAuto did not use an overlay; "" when it did.
func (ws *Workspace) Fallback() string { return ws.fallback }

// Root returns the host directory the sandbox sees as /work.
func (ws *Workspace) Root() string { return ws.root }

// SetupTime returns how long NewWorkspace took.
func (ws *Workspace) SetupTime() time.Duration { return ws.setup }

// Run runs a bash script in the workspace, in the sandbox with limits:
// /work is the workspace, there is no network, and nothing else of the
// host is writable. The error is sandbox.RunIn's: a failing script is a
// Result, an error means no verdict.
func (ws *Workspace) Run(ctx context.Context, script string, limits sandbox.Limits) (sandbox.Result, error) {
	if ws.root == "" {
		return sandbox.Result{}, fmt.Errorf("workspace is closed: %w", ErrInvalid)
	}
	return ws.run(ctx, sandbox.Spec{Command: []string{"bash", "-c", script}, Limits: limits})
}

// run runs s with the workspace as /work.
func (ws *Workspace) run(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
	if ws.root == "" {
		return sandbox.Result{}, fmt.Errorf("workspace is closed: %w", ErrInvalid)
	}
	return sandbox.RunIn(ctx, ws.root, s)
}

// Close deletes the workspace and every write of its episode. The world
// is untouched. Close is idempotent.
func (ws *Workspace) Close() error {
	ws.closeOnce.Do(func() {
		ws.root = ""
		err := ws.unmount()
		if rerr := ws.dir.Remove(); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			ws.closeErr = fmt.Errorf("close workspace %s: %w", ws.base, err)
		}
	})
	return ws.closeErr
}

// episodePrefix starts the names of episode workspaces under ScratchDir.
const episodePrefix = "rlpipe-episode-"

var swept sync.Map // scratch directories already swept by this process

// sweepEpisodes removes, once per scratch directory and process, the
// workspaces of killed processes: their mounts are detached, their
// directories removed (internal/scratch). Workspaces of live processes
// are kept. A sweep that fails leaves them for the next start.
func sweepEpisodes(dir string) {
	if _, done := swept.LoadOrStore(dir, true); done {
		return
	}
	_, _ = scratch.Sweep(dir, episodePrefix)
}

// unmount unmounts what the workspace mounted, lazily when a mount is
// still busy (a sandbox being torn down).
func (ws *Workspace) unmount() error {
	var errs []error
	for _, m := range ws.mounts {
		if err := syscall.Unmount(m, 0); err != nil {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	ws.mounts = nil
	return errors.Join(errs...)
}

// reachable checks that the sandbox's user can reach dir: bwrap runs as
// that user and must find the workspace by its path.
func reachable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil // the sandbox runs as the caller, who made dir
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("workspace scratch directory %s: %w", dir, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("workspace scratch directory %s: %s has mode %v; the sandbox's user (nobody) needs o+x on every directory down to it: "+
				"pick another ScratchDir or chmod o+x %s: %w", dir, d, fi.Mode().Perm(), d, ErrInvalid)
		}
		if d == "/" {
			return nil
		}
	}
}
