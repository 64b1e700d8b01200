package external

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rs/zerolog"
)

// Output kept for errors and logged per line.
const (
	tailBytes    = 8 << 10
	tailLines    = 40
	maxLineBytes = 4 << 10
)

// process is one run of the trainer's command.
type process struct {
	argv  []string
	env   []string // additions to os.Environ, later entries winning
	dir   string
	grace time.Duration
	log   zerolog.Logger
}

// run starts the command in its own process group, streams its output to
// the log at Debug level, and waits. When ctx ends it sends SIGTERM to the
// group, SIGKILL to the leader after the grace period, and SIGKILL to the
// whole group once the leader is gone, so no trainer process outlives the
// call (a GPU held by an orphaned worker would fail the next attempt).
func (p process) run(ctx context.Context) error {
	env := append(os.Environ(), p.env...)
	redact := redactor(env)
	stdout := &stream{name: "stdout", log: p.log, redact: redact, ranks: rankTails{}}
	stderr := &stream{name: "stderr", log: p.log, redact: redact, ranks: rankTails{}}
	cmd := exec.CommandContext(ctx, p.argv[0], p.argv[1:]...)
	cmd.Dir, cmd.Env = p.dir, env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = p.grace
	if err := cmd.Start(); err != nil {
		return pipeline.Permanent(fmt.Errorf("start external trainer %s: %w (check the command's first element and Dir)", shellJoin(p.argv[:1]), err))
	}
	err := cmd.Wait()
	// Nothing of the trainer may outlive the call: a worker that ignored
	// SIGTERM, or one its leader left behind on a normal exit.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	stdout.flush()
	stderr.flush()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st := cmd.ProcessState
	if err != nil && errors.Is(err, exec.ErrWaitDelay) && st != nil && st.Success() {
		p.log.Warn().Msg("the external trainer exited 0 but left processes holding its output open; they were killed")
		err = nil
	}
	if err == nil {
		return nil
	}
	if st == nil {
		return fmt.Errorf("run external trainer: %w", err)
	}
	ee := &ExitError{Command: redactAll(p.argv, redact), Code: st.ExitCode()}
	// Under torchrun the status is torchrun's (1 whatever the worker's);
	// its report names the worker that failed first, and how.
	ranks := stderr.ranks
	for r, ls := range stdout.ranks {
		if len(ranks[r]) == 0 {
			ranks[r] = ls
		}
	}
	ee.Rank = parseTorchrun(redact(string(stderr.last)), ranks)
	trim := func(s string) string { return s }
	if ee.Rank != nil {
		trim = trimLauncher
	}
	if ee.Tail = stderr.tail(trim); ee.Tail == "" {
		ee.Tail = stdout.tail(trim)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ee.Signal = ws.Signal().String()
	}
	if ee.Permanent() {
		return pipeline.Permanent(ee)
	}
	return ee
}

// redactAll applies redact to each of args, into a new slice: a secret
// written into the command itself is hidden like one in the environment.
func redactAll(args []string, redact func(string) string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = redact(a)
	}
	return out
}

// redactor replaces the values of secret-looking variables of env.
func redactor(env []string) func(string) string {
	var pairs []string
	seen := map[string]bool{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < 4 || !secretKey(k) || seen[v] {
			continue
		}
		seen[v] = true
		pairs = append(pairs, v)
	}
	if len(pairs) == 0 {
		return func(s string) string { return s }
	}
	// Longest first, so a secret that contains another is hidden whole.
	sort.Slice(pairs, func(i, j int) bool { return len(pairs[i]) > len(pairs[j]) })
	args := make([]string, 0, 2*len(pairs))
	for _, v := range pairs {
		args = append(args, v, "<redacted>")
	}
	r := strings.NewReplacer(args...)
	return r.Replace
}

// stream logs a command's output line by line (a carriage return, as
// progress bars write, ends a line too) and keeps its tail. exec writes
// each stream from one goroutine and Wait waits for it, so stream needs
// no lock.
type stream struct {
	name    string
	log     zerolog.Logger
	redact  func(string) string
	partial []byte
	last    []byte
	// ranks keeps the lines torchrun's workers prefixed with their rank.
	ranks rankTails
}

func (s *stream) Write(p []byte) (int, error) {
	s.last = append(s.last, p...)
	if len(s.last) > 2*tailBytes {
		s.last = append(s.last[:0], s.last[len(s.last)-tailBytes:]...)
	}
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexAny(s.partial, "\n\r")
		if i < 0 {
			break
		}
		s.emit(s.partial[:i])
		s.partial = s.partial[i+1:]
	}
	if len(s.partial) > maxLineBytes {
		s.emit(s.partial)
		s.partial = s.partial[:0]
	}
	// Keep the unfinished line in a buffer of its own.
	s.partial = append([]byte(nil), s.partial...)
	return len(p), nil
}

func (s *stream) emit(line []byte) {
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 {
		return
	}
	if len(line) > maxLineBytes {
		line = line[:maxLineBytes]
	}
	text := s.redact(string(line))
	s.log.Debug().Str("stream", s.name).Msg(text)
	if s.ranks != nil {
		s.ranks.add(text)
	}
}

func (s *stream) flush() {
	if len(s.partial) > 0 {
		s.emit(s.partial)
		s.partial = nil
	}
}

// tail returns the last lines of the output, redacted, after trim.
func (s *stream) tail(trim func(string) string) string {
	b := s.last
	if len(b) > 2*tailBytes {
		b = b[len(b)-2*tailBytes:]
	}
	text := trim(strings.ReplaceAll(s.redact(string(b)), "\r", "\n"))
	if len(text) > tailBytes {
		text = text[len(text)-tailBytes:]
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	kept := lines[:0]
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			kept = append(kept, strings.TrimRight(l, " \t"))
		}
	}
	if len(kept) > tailLines {
		kept = kept[len(kept)-tailLines:]
	}
	return strings.Join(kept, "\n")
}
