package driver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/policytest"
)

// pipelineYAML is a stand-in pipeline of two iterations of five task
// calls (sample, generate, reward, train, health).
const pipelineYAML = `run: exp1
iterations: 2
batch_size: 4
dataset: main:data/prompts.parquet
environments:
  train: {retries: {attempts: 1}}
stages:
  sample: {kind: standin}
  generate: {kind: standin, samples_per_prompt: 2}
  reward: {kind: standin}
  train: {kind: standin, env: train}
`

// newStore is an embedded store whose main branch holds 16 prompts at
// the dataset path pipelineYAML names (standintest.DatasetPath).
func newStore(t testing.TB) artifacts.Store {
	t.Helper()
	return standintest.NewStore(t, 16)
}

// parse reads src with the shipped kinds, a policy backend that cannot
// load adapters (samplesonly) and the recorder tracker.
func parse(t testing.TB, src string) *config.Config {
	t.Helper()
	reg := kinds.Registry()
	reg.Policies = append(reg.Policies, policytest.BaseOnly{})
	reg.Trackers = append(reg.Trackers, recorderBackend{})
	cfg, err := config.Parse("pipeline.yaml", []byte(src), reg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func read(t *testing.T, st artifacts.Store, ref, path string) string {
	t.Helper()
	rc, _, err := st.GetObject(context.Background(), ref, path)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func uncommitted(t *testing.T, st artifacts.Store, branch string) []string {
	t.Helper()
	var paths []string
	for c, err := range st.DiffUncommitted(context.Background(), branch) {
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, c.Path)
	}
	return paths
}

// TestRunEndToEnd runs a stand-in pipeline, resumes it with nothing left
// to do, runs it under another name (every call cached), and extends it
// by an iteration with a changed config.
func TestRunEndToEnd(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	cfg := parse(t, pipelineYAML)

	var commits []int
	first, err := driver.Run(ctx, st, cfg, driver.Options{
		OnCommit: func(_ context.Context, branch string, n int) {
			if branch != "runs-exp1" {
				t.Errorf("OnCommit on branch %q", branch)
			}
			commits = append(commits, n)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if first.Run != "exp1" || first.Branch != "runs-exp1" || first.Iterations != 2 || first.NewIterations != 2 || first.Planned != 2 ||
		first.Tasks != 10 || first.Cached != 0 || first.Attempts != 10 || first.Retries != 0 || first.Cursor != 8 ||
		first.Commit == "" || !strings.HasPrefix(first.ConfigHash, "sha256:") {
		t.Errorf("first run: %+v", first)
	}
	if len(commits) != 2 || commits[0] != 1 || commits[1] != 2 {
		t.Errorf("OnCommit saw iterations %v, want [1 2]", commits)
	}
	if _, ok := first.StageSeconds["train"]; !ok {
		t.Errorf("stage seconds lack train: %v", first.StageSeconds)
	}

	// The effective config is committed with its hash, under the run's
	// name and without a store.
	recorded := read(t, st, "runs-exp1", runs.ConfigPath)
	if !strings.HasPrefix(recorded, "# effective pipeline config of run exp1, secrets redacted\n# config-hash: "+first.ConfigHash+"\n") ||
		!strings.Contains(recorded, "run: exp1") || strings.Contains(recorded, "store:") {
		t.Errorf("%s:\n%s", runs.ConfigPath, recorded)
	}

	// Again: nothing left to do, and nothing left staged.
	again, err := driver.Run(ctx, st, cfg, driver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Iterations != 2 || again.NewIterations != 0 || again.Tasks != 0 || again.Attempts != 0 || again.Commit != first.Commit {
		t.Errorf("second run: %+v", again)
	}
	if u := uncommitted(t, st, "runs-exp1"); len(u) != 0 {
		t.Errorf("staged on the run branch after a finished run: %v", u)
	}

	// Under another name every call is a cache hit.
	other, err := driver.Run(ctx, st, cfg, driver.Options{Name: "exp2"})
	if err != nil {
		t.Fatal(err)
	}
	if other.Run != "exp2" || other.Branch != "runs-exp2" || other.Iterations != 2 || other.NewIterations != 2 ||
		other.Tasks != 10 || other.Cached != 10 || other.Attempts != 0 || other.ConfigHash != first.ConfigHash {
		t.Errorf("run exp2: %+v", other)
	}
	if !strings.Contains(read(t, st, "runs-exp2", runs.ConfigPath), "run: exp2") {
		t.Errorf("run exp2 recorded another run's name")
	}

	// A third iteration: the new config is recorded, with a warning.
	var warnings bytes.Buffer
	longer := parse(t, strings.Replace(pipelineYAML, "iterations: 2", "iterations: 3", 1))
	third, err := driver.Run(ctx, st, longer, driver.Options{Logger: zerolog.New(&warnings)})
	if err != nil {
		t.Fatal(err)
	}
	if third.Iterations != 3 || third.NewIterations != 1 || third.Tasks != 5 || third.Cached != 0 || third.Planned != 3 ||
		third.ConfigHash == first.ConfigHash {
		t.Errorf("third iteration: %+v", third)
	}
	if !strings.Contains(warnings.String(), "the pipeline config differs from the run's recorded one") {
		t.Errorf("no warning of the changed config: %q", warnings.String())
	}
	if got := read(t, st, "runs-exp1", runs.ConfigPath); !strings.Contains(got, "iterations: 3") || !strings.Contains(got, third.ConfigHash) {
		t.Errorf("the new config is not recorded:\n%s", got)
	}
}

// TestRunErrors checks what a caller is told when a run cannot go on.
func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	cfg := parse(t, pipelineYAML)

	// A run another process holds.
	held, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "exp1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := driver.Run(ctx, st, cfg, driver.Options{}); !errors.Is(err, pipeline.ErrRunLocked) || !strings.Contains(err.Error(), "run exp1 is held by") {
		t.Errorf("a held run: %v", err)
	}
	held.Close()

	// Interrupted after the first iteration: resumable.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err = driver.Run(cctx, st, cfg, driver.Options{OnCommit: func(context.Context, string, int) { cancel() }})
	if err == nil || err.Error() != "run exp1: interrupted after iteration 1; run the same command again to resume" || !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted: %v", err)
	}
	rest, err := driver.Run(ctx, st, cfg, driver.Options{})
	if err != nil || rest.Iterations != 2 || rest.NewIterations != 1 {
		t.Errorf("resumed: %+v, %v", rest, err)
	}

	// A task that fails stops the run.
	failing := parse(t, strings.Replace(pipelineYAML, "train: {kind: standin, env: train}", "train: {kind: standin, env: train, fail_times: 1}", 1))
	_, err = driver.Run(ctx, st, failing, driver.Options{Name: "failing", NoCache: true})
	if err == nil || !strings.HasPrefix(err.Error(), "run failing: stopped after iteration 0: ") ||
		!strings.HasSuffix(err.Error(), "\nhint: fix the cause and run the same command again: it resumes, and finished tasks are cache hits") {
		t.Errorf("a failing task: %v", err)
	}

	if _, err := driver.Run(ctx, st, cfg, driver.Options{Name: "no spaces"}); err == nil || !strings.HasPrefix(err.Error(), `driver: run name "no spaces": `) {
		t.Errorf("a bad name: %v", err)
	}
}

// TestRunRefusesBatchLargerThanDataset: a dataset of 10 prompts cannot
// give batches of 16 without repeating a prompt. The run is refused at
// its start, at the batch_size key, before anything is written, where
// it once failed every time at the reward stage blaming the data.
func TestRunRefusesBatchLargerThanDataset(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if err := standin.PutDataset(ctx, st, "main", "data/ten.parquet", 10); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(pipelineYAML, "batch_size: 4", "batch_size: 16", 1)
	cfg := parse(t, strings.Replace(src, "main:data/prompts.parquet", "main:data/ten.parquet", 1))
	_, err := driver.Run(ctx, st, cfg, driver.Options{})
	want := "pipeline.yaml:3:1: batch_size 16 is more than the 10 prompts of dataset main:data/ten.parquet, and a batch holds each prompt at most once: lower batch_size to at most 10, or add prompts to the dataset"
	var be *pipeline.BatchError
	if err == nil || err.Error() != want || !errors.Is(err, pipeline.ErrConfig) || !errors.As(err, &be) {
		t.Fatalf("run = %v\nwant %s", err, want)
	}
	if _, err := st.GetBranch(ctx, "runs-exp1"); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("the refused run made its branch: %v", err)
	}
}

// TestPipelineID checks that the queue names do not change with what only
// the driver reads.
func TestPipelineID(t *testing.T) {
	a, err := driver.PipelineID(parse(t, pipelineYAML))
	if err != nil {
		t.Fatal(err)
	}
	b, err := driver.PipelineID(parse(t, strings.Replace(pipelineYAML, "iterations: 2", "iterations: 9", 1)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := driver.PipelineID(parse(t, strings.Replace(pipelineYAML, "batch_size: 4", "batch_size: 2", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 12 || a != b || a == c {
		t.Errorf("pipeline ids %q (2 iterations), %q (9), %q (another batch size)", a, b, c)
	}
}
