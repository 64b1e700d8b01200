package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/internal/bounded"
)

var rePlaceholder = regexp.MustCompile(`\{\{\s*([a-z_]+)(?:\.([A-Za-z0-9_-]+))?\s*\}\}`)

// expand fills an argv template. Unknown placeholders are errors that
// name the argument, so a typo never reaches the command.
func expand(argv []string, tc *TaskContext) ([]string, error) {
	dir, err := tc.WorkDir()
	if err != nil {
		return nil, err
	}
	var params map[string]any
	_ = tc.Params(&params)
	out := make([]string, len(argv))
	for i, a := range argv {
		var bad error
		out[i] = rePlaceholder.ReplaceAllStringFunc(a, func(m string) string {
			sub := rePlaceholder.FindStringSubmatch(m)
			kind, name := sub[1], sub[2]
			switch {
			case kind == "inputs" && tc.inputs[name] != "":
				return tc.inputs[name]
			case kind == "outputs" && tc.outputs[name] != "":
				return tc.outputs[name]
			case kind == "params" && params[name] != nil:
				return fmt.Sprint(params[name])
			case kind == "attempt" && name == "":
				return strconv.Itoa(tc.Attempt)
			case kind == "seed" && name == "":
				return strconv.FormatUint(tc.Seed, 10)
			case kind == "iteration" && name == "":
				return strconv.Itoa(tc.Iteration)
			case kind == "workdir" && name == "":
				return dir
			}
			if bad == nil {
				bad = Permanent(fmt.Errorf("%w: task %s: argument %d (%q): unknown placeholder %s (known: inputs.NAME, outputs.NAME, params.NAME, attempt, seed, iteration, workdir)", ErrConfig, tc.Task, i, a, m))
			}
			return m
		})
		if bad != nil {
			return nil, bad
		}
	}
	return out, nil
}

// runCommand runs a task's command in its own process group, so that on
// timeout or cancellation the whole tree is killed, not just its leader.
// Memory is capped with prlimit when the environment sets memory_mb.
func runCommand(ctx context.Context, argv []string, tc *TaskContext, s Settings) error {
	args, err := expand(argv, tc)
	if err != nil {
		return err
	}
	if s.Resources.MemoryMB > 0 {
		if p, err := exec.LookPath("prlimit"); err == nil {
			args = append([]string{p, fmt.Sprintf("--as=%d", int64(s.Resources.MemoryMB)<<20), "--"}, args...)
		}
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	if cmd.Dir, err = tc.WorkDir(); err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	threads := strconv.Itoa(max(1, int(s.Resources.CPU)))
	cmd.Env = append(os.Environ(),
		"RLPIPE_TASK="+tc.Task, "RLPIPE_ATTEMPT="+strconv.Itoa(tc.Attempt),
		"RLPIPE_ITERATION="+strconv.Itoa(tc.Iteration), "RLPIPE_SEED="+strconv.FormatUint(tc.Seed, 10),
		"OMP_NUM_THREADS="+threads, "GOMAXPROCS="+threads)
	stderr := &bounded.Tail{Max: 4096}
	cmd.Stdout = &logWriter{tc: tc}
	cmd.Stderr = stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.Text())
		return fmt.Errorf("command %s: %w: %s", args[0], err, msg)
	}
	return nil
}

// logWriter sends a command's stdout to the task's debug log.
type logWriter struct{ tc *TaskContext }

func (w *logWriter) Write(p []byte) (int, error) {
	w.tc.log.Debug().Str("stream", "stdout").Msg(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
