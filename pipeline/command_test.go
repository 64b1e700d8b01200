package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

func TestCommandTaskTemplates(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	if _, err := st.PutObject(ctx, "main", "data/in.txt", strings.NewReader("hello"), nil); err != nil {
		t.Fatal(err)
	}
	r := openRun(t, st, pipeline.RunOptions{Seed: 5})
	task := &pipeline.Task{Name: "shout", Version: "1",
		Command: []string{"sh", "-c", `tr a-z A-Z < "$1" > "$2" && mkdir -p "$3" && echo "{{params.tag}} attempt {{attempt}} it {{iteration}}" > "$3/meta.txt"`,
			"sh", "{{inputs.src}}", "{{outputs.upper}}", "{{outputs.dir}}"},
		Outputs: []pipeline.Output{{Name: "upper", File: "upper.txt"}, {Name: "dir", File: "extra", Dir: true}}}
	n := r.Iteration(4).Go(ctx, task, pipeline.Call{Inputs: map[string]pipeline.Artifact{"src": pipeline.StoreArtifact("main", "data/in.txt")}, Params: map[string]string{"tag": "v"}})
	if err := n.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, st, r.Branch(), "iterations/000004/upper.txt"); got != "HELLO" {
		t.Fatalf("upper.txt = %q", got)
	}
	if got := readAll(t, st, r.Branch(), "iterations/000004/extra/meta.txt"); got != "v attempt 1 it 4\n" {
		t.Fatalf("extra/meta.txt = %q", got)
	}
	// Provenance travels with the output.
	info, err := st.StatObject(ctx, r.Branch(), "iterations/000004/upper.txt")
	if err != nil {
		t.Fatal(err)
	}
	if info.Metadata["rlpipe-task"] != "shout" || !strings.Contains(info.Metadata["rlpipe-inputs"], `"src"`) {
		t.Fatalf("provenance = %v", info.Metadata)
	}
}

func TestCommandUnknownPlaceholder(t *testing.T) {
	ctx := context.Background()
	r := openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{Envs: map[string]pipeline.Settings{"e": {Retry: pipeline.Retry{Attempts: 3}}}})
	task := &pipeline.Task{Name: "typo", Env: "e", Command: []string{"cat", "{{inputs.trajectoreis}}"}}
	err := r.Iteration(1).Go(ctx, task, pipeline.Call{}).Wait(ctx)
	var te *pipeline.TaskError
	if !errors.As(err, &te) || te.Attempts != 1 || !strings.Contains(err.Error(), "{{inputs.trajectoreis}}") {
		t.Fatalf("unknown placeholder: %v; want one attempt naming the placeholder", err)
	}
}

// A failing command's error ends with the last 4 KiB of its stderr,
// trimmed: what it said last, not what it said first.
func TestCommandFailureQuotesStderrTail(t *testing.T) {
	ctx := context.Background()
	r := openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{})
	// 5000 bytes of x then the reason: only the last 4096 bytes are kept.
	task := &pipeline.Task{Name: "dies", Command: []string{"sh", "-c", `printf '%5000s' '' | tr ' ' x >&2; printf '\nout of memory\n' >&2; exit 3`}}
	err := r.Iteration(1).Go(ctx, task, pipeline.Call{}).Wait(ctx)
	if err == nil {
		t.Fatal("a command that exits 3 succeeded")
	}
	want := "command sh: exit status 3: " + strings.Repeat("x", 4096-len("\nout of memory\n")) + "\nout of memory"
	if !strings.HasSuffix(err.Error(), want) {
		msg := err.Error()
		t.Fatalf("error ends %q (%d bytes)\nwant it to end with the %d bytes: 4081 x, a newline, out of memory", msg[max(0, len(msg)-40):], len(msg), len(want))
	}
}

func TestCancelKillsCommand(t *testing.T) {
	st := standintest.NewStore(t, 0)
	r := openRun(t, st, pipeline.RunOptions{})
	marker := filepath.Join(t.TempDir(), "started")
	task := &pipeline.Task{Name: "long", Command: []string{"sh", "-c", "touch " + marker + "; sleep 60"}}
	ctx, cancel := context.WithCancel(context.Background())
	n := r.Iteration(1).Go(ctx, task, pipeline.Call{})
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	cancel()
	err := n.Wait(context.Background())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled command: %v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("cancellation took %s: the command was not killed", time.Since(start))
	}
}

func TestSettingsResolveEnvTaskCall(t *testing.T) {
	ctx := context.Background()
	reuse := true
	r := openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{Envs: map[string]pipeline.Settings{
		"gen": {Timeout: time.Hour, Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}, Reuse: &reuse},
	}})
	var attempts int
	task := &pipeline.Task{Name: "t", Env: "gen",
		Settings: pipeline.Settings{Retry: pipeline.Retry{Attempts: 4}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			attempts = tc.Attempt
			return errors.New("always")
		}}
	// Call override beats task beats env: 3 attempts.
	err := r.Iteration(1).Go(ctx, task, pipeline.Call{Override: pipeline.Settings{Retry: pipeline.Retry{Attempts: 3}}}).Wait(ctx)
	if err == nil || attempts != 3 {
		t.Fatalf("attempts = %d (%v), want 3 from the call override", attempts, err)
	}
	// Task beats env: 4 attempts.
	err = r.Iteration(2).Go(ctx, task, pipeline.Call{}).Wait(ctx)
	if err == nil || attempts != 4 {
		t.Fatalf("attempts = %d (%v), want 4 from the task", attempts, err)
	}
}

func TestWarmStateIsReused(t *testing.T) {
	ctx := context.Background()
	reuse := true
	r := openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{Envs: map[string]pipeline.Settings{
		"gpu": {Reuse: &reuse, Concurrency: 1, Cache: pipeline.Cache{Mode: pipeline.CacheDisable}},
	}})
	loads := 0
	task := &pipeline.Task{Name: "gen", Env: "gpu", Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
		_, err := tc.Warm(func() (any, error) { loads++; return "model", nil })
		return err
	}}
	it := r.Iteration(1)
	for _, name := range []string{"a", "b", "c"} {
		if err := it.Go(ctx, task, pipeline.Call{Name: name}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 1 {
		t.Fatalf("model loaded %d times, want once (warm worker reused)", loads)
	}
}
