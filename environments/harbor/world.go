package harbor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/internal/scratch"
	"github.com/rlpipe/rlpipe/sandbox"
)

// worldVersion names the code of build below: change it when build
// changes what it writes.
const worldVersion = "rlpipe harbor world v1"

// Worlds builds (or finds in cache) the task's world, the tree the
// agent starts from (its top-level directories, Dockerfile.Tops), and the
// world of its tests, tests/ with test.sh executable. Both are cached by
// the digest of what defines them; a changed Dockerfile, environment/ or
// tests/ is a new world.
func (t *Task) Worlds(ctx context.Context, cache *agent.Cache) (world, tests *agent.World, err error) {
	envDigest, err := agent.TreeDigest(filepath.Join(t.Dir, "environment"))
	if err != nil {
		return nil, nil, fmt.Errorf("import harbor task %s: %v: %w", t.Name, err, ErrTask)
	}
	def, err := json.Marshal(t.Dockerfile)
	if err != nil {
		return nil, nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", worldVersion, envDigest, def)
	world, err = cache.World(ctx, agent.WorldSpec{Name: t.Name, Build: t.build, Version: hex.EncodeToString(h.Sum(nil))})
	if err != nil {
		return nil, nil, fmt.Errorf("import harbor task %s: %w", t.Name, err)
	}
	testsDir := filepath.Join(t.Dir, TestsDir)
	testsDigest, err := agent.TreeDigest(testsDir)
	if err != nil {
		return nil, nil, fmt.Errorf("import harbor task %s: %v: %w", t.Name, err, ErrTask)
	}
	tests, err = cache.World(ctx, agent.WorldSpec{Name: t.Name + " tests", Version: worldVersion + " tests " + testsDigest,
		Build: func(ctx context.Context, dir string) error {
			if err := copyTree(ctx, testsDir, dir); err != nil {
				return err
			}
			return os.Chmod(filepath.Join(dir, "test.sh"), 0o755)
		}})
	if err != nil {
		return nil, nil, fmt.Errorf("import harbor task %s: %w", t.Name, err)
	}
	return world, tests, nil
}

// build makes the world in dir: the Dockerfile's steps done in a staging
// tree the sandbox's user can reach (the cache directory is private),
// RUN in the sandbox with the world's top-level directories writable,
// then the tree copied into dir.
func (t *Task) build(ctx context.Context, dir string) error {
	d := t.Dockerfile
	stage, err := scratch.Mkdir("", "rlpipe-harbor-build-")
	if err != nil {
		return fmt.Errorf("%v: %w", err, ErrInfra)
	}
	defer stage.Remove()
	if err := os.Chmod(stage.Path(), 0o711); err != nil {
		return err
	}
	root := filepath.Join(stage.Path(), "root")
	for _, top := range d.Tops {
		if err := os.MkdirAll(filepath.Join(root, top), 0o755); err != nil {
			return err
		}
	}
	ctxDir := filepath.Join(t.Dir, "environment")
	for _, in := range d.Steps {
		switch in.Op {
		case "WORKDIR":
			if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(in.Dir)), 0o755); err != nil {
				return err
			}
		case "COPY":
			if err := copyInto(ctx, ctxDir, in, root); err != nil {
				return fmt.Errorf("%s:%d: COPY %s: %w", d.Path, in.Line, in.Args, err)
			}
		case "RUN":
			if os.Geteuid() == 0 {
				if err := agent.GiveToSandbox(root); err != nil {
					return err
				}
			}
			m, err := mounts(root, d.Tops)
			if err != nil {
				return err
			}
			r, err := sandbox.Run(ctx, sandbox.Spec{Command: inDir(in.Dir, in.Args), Env: withHome(in.Env, "/root"),
				Mounts: m, Limits: sandbox.Limits{Wall: t.BuildTimeout(), CPUTime: t.BuildTimeout()}})
			if err != nil {
				return fmt.Errorf("%s:%d: RUN: %w", d.Path, in.Line, err)
			}
			if !r.Passed() {
				return fmt.Errorf("%s:%d: RUN %s: %s, exit status %d: %s: %w", d.Path, in.Line, firstLine(in.Args), r.Status, r.ExitCode,
					strings.TrimSpace(clip(r.Stderr+r.Stdout, 400)), ErrUnsupported)
			}
		}
	}
	return copyTree(ctx, root, dir)
}

// copyInto does COPY: each source from the build context to the
// destination, a directory's contents into it, a file to it (or into it
// when it ends with / or there are several sources).
func copyInto(ctx context.Context, ctxDir string, in Instruction, root string) error {
	dst := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(in.Dst, "/")))
	intoDir := strings.HasSuffix(in.Dst, "/") || len(in.Src) > 1
	for _, src := range in.Src {
		if err := copySource(ctx, ctxDir, src, dst, intoDir); err != nil {
			return err
		}
	}
	return nil
}

// copySource copies one COPY source, src (clean, local) in ctxDir, to
// dst. The import refused a source with a symlink on its way
// (symlinkOn), but the files may change between the import and the
// build: the source is opened here with no symlink followed on the way
// or at its end (openat2 RESOLVE_NO_SYMLINKS, beneath ctxDir), and cp
// reads that open file or directory, not its path, so a link planted
// after the import cannot pull the host's files into the world. Inside a
// copied directory, cp -a copies links as links, never their targets.
func copySource(ctx context.Context, ctxDir, src, dst string, intoDir bool) error {
	dir, err := os.Open(ctxDir)
	if err != nil {
		return err
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), filepath.FromSlash(src), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH})
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			link, to := symlinkOn(ctxDir, src)
			return fmt.Errorf("%s goes through environment/%s, now a symlink to %s (it was not when the task was imported): the build follows no symlink; put the files themselves in environment/ and import the task again: %w",
				src, link, to, ErrUnsupported)
		}
		return fmt.Errorf("open environment/%s: %w", src, err)
	}
	f := os.NewFile(uintptr(fd), src)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// cp gets the open source as its fd 3; /proc/self/fd/3 is that file
	// or directory, whatever its path has become since.
	held := "/proc/self/fd/3"
	cp := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "cp", args...)
		cmd.ExtraFiles = []*os.File{f}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("cp: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	target := dst
	switch {
	case fi.IsDir():
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		return cp("-a", "--", held+"/.", dst)
	case intoDir:
		target = filepath.Join(dst, path.Base(src))
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	// -H: follow the one link on the command line, /proc/self/fd/3.
	return cp("-a", "-H", "--", held, target)
}

// copyTree copies src's contents into dst, modes and links as they are.
func copyTree(ctx context.Context, src, dst string) error {
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--", src+"/.", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s: %v: %s", src, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inDir is the command that runs script with bash in the directory dir.
func inDir(dir, script string) []string {
	return []string{"bash", "-c", `cd -- "$1" && eval "$2"`, "bash", dir, script}
}

// mounts binds each top-level directory of the tree at root at /NAME.
// Each must be a directory, not a link: bwrap follows a link in a bind's
// source, and a link would put another host path at /NAME. (No sandbox
// sees root itself, only these directories at their mount points, so no
// sandboxed program can replace one.)
func mounts(root string, tops []string) (map[string]string, error) {
	m := make(map[string]string, len(tops))
	for _, top := range tops {
		p := filepath.Join(root, top)
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("world directory /%s is not a directory at %s: %w", top, p, ErrInfra)
		}
		m["/"+top] = p
	}
	return m, nil
}

func withHome(env map[string]string, home string) map[string]string {
	out := cloneEnv(env)
	if _, ok := out["HOME"]; !ok {
		out["HOME"] = home
	}
	return out
}

func firstLine(s string) string {
	line, _, cut := strings.Cut(s, "\n")
	if cut {
		return line + " …"
	}
	return line
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
