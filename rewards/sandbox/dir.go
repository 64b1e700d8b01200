package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
	bwrap, err := lookBwrap(s.Bwrap)
	if err != nil {
		return Result{}, err
	}
	prlimit, err := lookPrlimit()
	if err != nil {
		return Result{}, err
	}
	binds, err := bindArgs(s.ReadOnlyBinds)
	if err != nil {
		return Result{}, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("create status pipe: %v: %w", err, ErrInfra)
	}
	defer statusR.Close()

	// fd 3 is bwrap's status.
	args := []string{"--unshare-all", "--die-with-parent", "--new-session"}
	args = append(args, binds...)
	args = append(args, "--proc", "/proc", "--dev", "/dev")
	size := strconv.FormatInt(lim.FileBytes, 10)
	for _, d := range []string{"/dev/shm", "/tmp"} {
		args = append(args, "--size", size, "--tmpfs", d)
	}
	args = append(args, "--bind", dir, "/work")
	args = append(args, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work", "--clearenv")
	for _, kv := range environ(s.Env) {
		args = append(args, "--setenv", kv[0], kv[1])
	}
	args = append(args, "--json-status-fd", "3", "--",
		prlimit,
		"--cpu="+strconv.FormatInt(lim.cpuSeconds(), 10)+":"+strconv.FormatInt(lim.cpuSeconds()+1, 10),
		"--as="+strconv.FormatInt(lim.MemoryBytes, 10),
		"--nproc="+strconv.Itoa(lim.Procs),
		"--fsize="+size,
		"--core=0",
		"--")
	args = append(args, s.Command...)

	wallCtx, cancel := context.WithTimeout(ctx, lim.Wall)
	defer cancel()
	var killedWall atomic.Bool
	cmd := exec.CommandContext(wallCtx, bwrap, args...)
	cmd.Env = []string{"PATH=" + sandboxPath}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{statusW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	kill := func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Cancel = func() error {
		killedWall.Store(true)
		return kill()
	}
	cmd.WaitDelay = 5 * time.Second
	if len(s.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(s.Stdin)
	}
	overflow := make(chan struct{})
	var once sync.Once
	full := func() { once.Do(func() { close(overflow) }) }
	stdout := &capWriter{limit: lim.OutputBytes, full: full}
	stderr := &capWriter{limit: lim.OutputBytes, full: full}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	start := time.Now()
	if err := cmd.Start(); err != nil {
		statusW.Close()
		return Result{}, fmt.Errorf("start %s: %v: %w", bwrap, err, ErrInfra)
	}
	statusW.Close()
	status := make(chan bwrapStatus, 1)
	go func() { status <- readStatus(statusR) }()
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the outcome is read from bwrap's status and ProcessState
		close(waited)
	}()
	killedOutput := false
	select {
	case <-waited:
	case <-overflow:
		killedOutput = true
		_ = kill()
		<-waited
	}
	elapsed := time.Since(start)
	st := <-status

	if ctx.Err() != nil {
		return Result{Status: StatusCanceled, ExitCode: -1, Duration: elapsed,
			Stdout: stdout.String(), Stderr: stderr.String()}, fmt.Errorf("sandbox run: %w", ctx.Err())
	}
	if !st.started {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = cmd.ProcessState.String()
		}
		return Result{}, fmt.Errorf("bwrap: %s: %w", msg, ErrInfra)
	}
	r := classify(outcome{
		exitCode:     st.exitCode,
		killedOutput: killedOutput,
		killedWall:   killedWall.Load() && !killedOutput,
		stdout:       stdout.String(),
		stderr:       stderr.String(),
	})
	r.Duration = elapsed
	return r, nil
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
