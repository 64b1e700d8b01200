package vllmserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/internal/bounded"
	"github.com/rlpipe/rlpipe/internal/loopback"
)

// Defaults of the knobs a zero Options leaves unset.
const (
	DefaultName         = "base" // --served-model-name
	DefaultMaxLoRARank  = 8
	DefaultStartTimeout = 5 * time.Minute
	DefaultGrace        = 10 * time.Second
)

// Options say which model to serve and how. Python and Model are required;
// a zero field otherwise means its default.
type Options struct {
	// Python is the interpreter of a venv with vLLM (see Python).
	Python string
	// Model is a Hugging Face model directory (config.json,
	// model.safetensors, tokenizer.json, tokenizer_config.json).
	Model string
	// Name is the served model name, what requests put in "model"
	// (default "base").
	Name string
	// MaxLoRARank is --max-lora-rank, the largest adapter rank the server
	// accepts: one of 1, 8, 16, 32, 64, 128, 256, 320, 512 (default 8).
	MaxLoRARank int
	// MaxModelLen is --max-model-len; 0 leaves it to the model's
	// max_position_embeddings.
	MaxModelLen int
	// Args are further flags, appended (a flag given again, such as
	// --logprobs-mode raw_logprobs, overrides the default's).
	Args []string
	// Env are further variables (KEY=VALUE), added to this process's.
	Env []string
	// StartTimeout bounds the wait for GET /health (default 5m).
	StartTimeout time.Duration
	// Grace is how long Stop waits after SIGTERM before SIGKILL
	// (default 10s).
	Grace time.Duration
	// Output, when set, receives the server's log as it comes (stdout and
	// stderr); the last lines are kept for errors either way.
	Output io.Writer
}

// Server is a running vLLM server.
type Server struct {
	name  string
	url   string
	argv  []string
	grace time.Duration
	cmd   *exec.Cmd
	log   *bounded.Tail
	done  chan struct{} // closed when the leader has exited
	err   error         // the leader's exit, valid after done

	stopOnce sync.Once
	stopErr  error
}

// Start runs the server and waits until it answers GET /health, or fails
// with the tail of its log. ctx bounds the start only; the server runs
// until Stop or Kill.
func Start(ctx context.Context, o *Options) (*Server, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Python == "" || opts.Model == "" {
		return nil, errors.New("vllmserver: Options.Python and Options.Model are required (see vllmserver.Python)")
	}
	if _, err := os.Stat(opts.Model + "/config.json"); err != nil {
		return nil, fmt.Errorf("vllmserver: model directory %s: %w (write one with `rlpipe policy export DIR`)", opts.Model, err)
	}
	opts.Name = cmp.Or(opts.Name, DefaultName)
	opts.MaxLoRARank = cmp.Or(opts.MaxLoRARank, DefaultMaxLoRARank)
	opts.StartTimeout = cmp.Or(opts.StartTimeout, DefaultStartTimeout)
	opts.Grace = cmp.Or(opts.Grace, DefaultGrace)
	port, err := loopback.FreePort()
	if err != nil {
		return nil, fmt.Errorf("vllmserver: pick a port on 127.0.0.1: %w", err)
	}
	argv := []string{opts.Python, "-m", "vllm.entrypoints.openai.api_server",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--model", opts.Model, "--served-model-name", opts.Name, "--dtype", "float32",
		"--enable-lora", "--max-lora-rank", strconv.Itoa(opts.MaxLoRARank),
		// Logprobs of the distribution sampled, softmax(z/T), which the
		// trainers train (vLLM's default, raw_logprobs, is softmax(z)).
		"--logprobs-mode", "processed_logprobs"}
	if opts.MaxModelLen > 0 {
		argv = append(argv, "--max-model-len", strconv.Itoa(opts.MaxModelLen))
	}
	argv = append(argv, opts.Args...)

	s := &Server{name: opts.Name, url: "http://127.0.0.1:" + strconv.Itoa(port), argv: argv,
		grace: opts.Grace, log: &bounded.Tail{Max: tailBytes}, done: make(chan struct{})}
	var out io.Writer = s.log
	if opts.Output != nil {
		out = io.MultiWriter(s.log, opts.Output)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True", "VLLM_CPU_KVCACHE_SPACE=1",
		// The development endpoints, /collective_rpc among them, through
		// which the openai policy reloads full weights (LoadWeights).
		"VLLM_SERVER_DEV_MODE=1")
	cmd.Env = append(cmd.Env, opts.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("vllmserver: start %s: %w (is Options.Python a venv's python?)", opts.Python, err)
	}
	s.cmd = cmd
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitHealthy(ctx, opts.StartTimeout); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.url }

// Name is the served model name.
func (s *Server) Name() string { return s.name }

// Command is the command line the server runs.
func (s *Server) Command() []string { return append([]string(nil), s.argv...) }

// LogTail returns the last lines of the server's log.
func (s *Server) LogTail() string { return strings.Join(s.log.Lines(tailLines), "\n") }

// PID is the server's process id, which is also its process group's.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Done is closed when the server's process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch err := loopback.WaitHealthy(ctx, s.url+"/health", s.done); {
	case errors.Is(err, loopback.ErrExited):
		return fmt.Errorf("vllmserver: %s exited before answering /health (%v); its log ends:\n%s\ncommand: %s",
			s.url, s.err, s.LogTail(), strings.Join(s.argv, " "))
	case err != nil:
		return fmt.Errorf("vllmserver: %s did not answer /health within %v (%w); its log ends:\n%s\ncommand: %s",
			s.url, timeout, err, s.LogTail(), strings.Join(s.argv, " "))
	}
	return nil
}

// Stop ends the server: SIGTERM to its process group, SIGKILL after the
// grace period, and waits for it. It returns nil for a server that exited
// because it was told to; calling it again returns the same.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(syscall.SIGTERM) })
	return s.stopErr
}

// Kill sends SIGKILL to the server's whole process group at once, as a
// crash or the OOM killer would, and waits for the leader.
func (s *Server) Kill() {
	s.stopOnce.Do(func() { s.stopErr = s.stop(syscall.SIGKILL) })
}

func (s *Server) stop(sig syscall.Signal) error {
	pg := -s.cmd.Process.Pid
	_ = syscall.Kill(pg, sig) // a group whose leader exited may have children left
	t := time.NewTimer(s.grace)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		_ = syscall.Kill(pg, syscall.SIGKILL)
		<-s.done
	}
	_ = syscall.Kill(pg, syscall.SIGKILL)
	// The leader's children die asynchronously: wait until the group is
	// empty (ESRCH), so a test that follows has the memory and the cores.
	for i := 0; i < 100 && syscall.Kill(pg, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Log kept for errors.
const (
	tailBytes = 16 << 10
	tailLines = 40
)
