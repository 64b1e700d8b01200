package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RunIn runs s.Command like Run, with one difference: the program's /work,
// its working directory, is dir, a directory of the host, instead of a
// private tmpfs. What the program writes there stays when it exits, for the
// next run in the same directory: the agent environments
// (environments/agent) give each episode such a directory, a copy-on-write
// view of a prepared world, and run every tool call of the episode in it.
//
// Everything else is Run's: the read-only root, the private /tmp and
// /dev/shm, the namespaces (no network), the limits and the Result. And:
//
//   - s.Files must be empty: put the files in dir first.
//   - s.ReadOnlyFiles and s.Verdict work as in Run: a checker judging
//     what a program left in dir gets its tests and answers read-only
//     outside /work (never in dir, which the program could rewrite) and
//     its own verdict channel. Run the judged program in an earlier RunIn
//     without Verdict, never in the checker's: see docs/REWARDS.md.
//   - Limits.FileBytes bounds each file the program writes (RLIMIT_FSIZE)
//     and /tmp, not dir as a whole. To bound dir, give it a file system of
//     its own size (the agent environments mount a tmpfs for it).
//   - Only dir is writable: the program cannot reach any other host path,
//     whatever it does with "..", symlinks or mounts.
//   - The program runs as SandboxUID on the host; it can change only what
//     that user may change in dir. bwrap, running as that user too, must
//     be able to reach dir: every directory above it must be searchable
//     by that user (mode o+x when the caller is root).
//
// The error cases are Run's, plus ErrInvalid when dir is not an absolute
// path to a directory.
func RunIn(ctx context.Context, dir string, s Spec) (Result, error) {
	if err := s.validate(); err != nil {
		return Result{}, err
	}
	if len(s.Files) > 0 {
		return Result{}, fmt.Errorf("RunIn takes no Files (%d given): write them into %s first: %w", len(s.Files), dir, ErrInvalid)
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.IndexByte(dir, 0) >= 0 {
		return Result{}, fmt.Errorf("work directory %q: want a clean absolute path: %w", dir, ErrInvalid)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Result{}, fmt.Errorf("work directory %q is not a directory: %w", dir, ErrInvalid)
	}
	lim := s.Limits.withDefaults()
	t, err := findTools(s)
	if err != nil {
		return Result{}, err
	}
	return launch(ctx, s, lim, t, []string{"/dev/shm", "/tmp"}, []string{"--bind", dir, "/work"}, &fdSet{})
}

// SandboxUID returns the host user and group that sandboxed programs run
// as: the caller's, or nobody (65534) when the caller is root (see the
// package documentation). A directory given to RunIn must belong to them
// for the program to change it.
func SandboxUID() (uid, gid int) {
	if os.Geteuid() == 0 {
		return nobody, nobody
	}
	return os.Geteuid(), os.Getegid()
}
