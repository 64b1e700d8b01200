package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/ui"
)

// testRun names the run the fixture makes.
const testRun = "demo"

// newRunStore creates a store whose run "demo" has committed iterations
// 1..n, made by the real engine with the stand-in stages and an evaluation
// of the start and every second checkpoint (evalStages). main also holds
// data/wide.parquet: 25 rows in row groups of 10, one a NaN.
func newRunStore(t testing.TB, n int) artifacts.Store {
	t.Helper()
	st := buildRunStore(t, t.TempDir(), n)
	t.Cleanup(func() { st.Close() })
	return st
}

// shared is a fixture store with 4 iterations for the tests that only
// read, built once (TestMain removes it).
var shared struct {
	once sync.Once
	dir  string
	st   artifacts.Store
}

func sharedRunStore(t testing.TB) artifacts.Store {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "rlpipe-ui-test")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
		shared.st = buildRunStore(t, dir, 4)
	})
	if shared.st == nil {
		t.Fatal("the shared fixture could not be built; see the first test that failed")
	}
	return shared.st
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.st != nil {
		shared.st.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func buildRunStore(t testing.TB, dir string, n int) artifacts.Store {
	t.Helper()
	ctx := context.Background()
	st, err := local.Create(ctx, filepath.Join(dir, "store"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := standin.PutDataset(ctx, st, "main", "data/prompts.parquet", 12); err != nil {
		t.Fatal(err)
	}
	if err := standin.PutDataset(ctx, st, "main", "data/heldout.parquet", 4); err != nil {
		t.Fatal(err)
	}
	putWideTable(t, st)
	extendRun(t, st, n)
	return st
}

// extendRun runs (or resumes) the fixture's run up to iteration n.
func extendRun(t testing.TB, st artifacts.Store, n int) { runFixture(t, st, testRun, 1, n) }

// runFixture runs (or resumes) a run of the fixture's stages, named name
// with seed seed, up to iteration n.
func runFixture(t testing.TB, st artifacts.Store, name string, seed uint64, n int) {
	t.Helper()
	ctx := context.Background()
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}}
	envs := map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "train": quick, "eval": quick}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: name, Envs: envs, Seed: seed, ConfigHash: "sha256:test", Config: []byte(fixtureConfig)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 2})
	gen, score := evalStages()
	stages.Steps = pipeline.EvalSteps(pipeline.EvalConfig{Every: 2, Set: pipeline.StoreArtifact("main", "data/heldout.parquet"), Name: "heldout"}, gen, score)
	cfg := pipeline.LoopConfig{Iterations: n, BatchSize: 3, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}
	if _, err := r.Loop(ctx, cfg, stages); err != nil {
		t.Fatal(err)
	}
}

// fixtureConfig is the config the fixture's runs record: a pipeline file
// of the shipped kinds (the UI shows its effective config; the stages
// that run are stand-ins). It leaves the trainer's LoRA rank out.
const fixtureConfig = `run: demo
seed: 1
iterations: 4
batch_size: 3
dataset: main:data/prompts.parquet
policy: {kind: embedded, model: tiny-arith}
trainer: {lr: 1.0e-3}
stages:
  sample: {kind: standin}
  generate: {kind: rollout, sampling: {n: 2, max_tokens: 5}}
  reward: {kind: standin}
  train: {kind: grpo}
`

// effectiveKeys is what the command passes as Options.EffectiveConfig:
// the recorded config parsed with the shipped kinds, defaults filled in.
func effectiveKeys(recorded []byte) (map[string]string, error) {
	cfg, err := config.Parse(runs.ConfigPath, recorded, kinds.Registry())
	if err != nil {
		return nil, err
	}
	return cfg.EffectiveKeys()
}

// evalPass1 is the pass@1 the fixture's evaluation reports for a
// checkpoint: 0.25 for the start, rising by 0.125 per evaluation.
func evalPass1(checkpoint int) float64 { return 0.25 + 0.0625*float64(checkpoint) }

// evalStages are an evaluation's two tasks, writing a fixed summary per
// checkpoint (evalSummary) so that tests know the exact figures.
func evalStages() (gen, score *pipeline.Task) {
	gen = &pipeline.Task{Name: "eval-generate", Version: "test-1", Env: "eval", Deterministic: true,
		Outputs: []pipeline.Output{{Name: pipeline.OutTrajectories, File: "trajectories.parquet"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			return writeTableFile(tc.OutputPath(pipeline.OutTrajectories), tables.Trajectories, nil)
		}}
	score = &pipeline.Task{Name: "eval", Version: "test-1", Env: "eval", Deterministic: true,
		Outputs: []pipeline.Output{{Name: "samples", File: "samples.parquet"}, {Name: "summary", File: "summary.parquet"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			var p struct {
				Checkpoint int `json:"checkpoint"`
			}
			if err := tc.Params(&p); err != nil {
				return err
			}
			name := "base"
			if p.Checkpoint > 0 {
				name = fmt.Sprintf("iteration-%06d", p.Checkpoint)
			}
			rows := evalSummary(name, evalPass1(p.Checkpoint))
			if err := writeTableFile(tc.OutputPath("summary"), tables.EvalSummary, rows); err != nil {
				return err
			}
			return writeTableFile(tc.OutputPath("samples"), tables.EvalSamples, []tables.EvalSample{{Checkpoint: name, Evalset: "heldout", ProblemID: "p000", Completion: "0", Answer: "0", Correct: true, Reward: 1, Status: "ok"}})
		}}
	return gen, score
}

// evalSummary is a checkpoint's summary as the real evaluator writes it:
// avg@k, pass@k, pass^k and maj@k at k = 1, 2, 4 (n = 4), and the exact
// pass@1. Some series are equal by construction, as in real runs: avg@k
// does not depend on k, and the exact pass@1 here equals pass@1. pass@1 is
// v with the interval v ± 0.1, and pass@4 is v + 0.2.
func evalSummary(checkpoint string, v float64) []tables.EvalSummaryRow {
	var rows []tables.EvalSummaryRow
	row := func(metric string, k int32, value, lo, hi float64) {
		rows = append(rows, tables.EvalSummaryRow{Checkpoint: checkpoint, Evalset: "heldout", K: k, N: 4, Metric: metric, Value: value, CILow: lo, CIHigh: hi, NumProblems: 4})
	}
	for i, k := range []int32{1, 2, 4} {
		step := float64(i) // log2 k
		row(tables.MetricAvgAtK, k, v, v-0.1, v+0.1)
		row(tables.MetricPassAtK, k, v+0.1*step, v+0.05*step-0.1, v+0.15*step+0.1)
		row(tables.MetricPassHatK, k, v-0.05*step, v-0.05*step-0.1, v-0.05*step+0.1)
		row(tables.MetricMajAtK, k, v+0.05*step, v+0.05*step-0.1, v+0.05*step+0.1)
	}
	row("exact_pass@1", 1, v, v-0.1, v+0.1)
	return rows
}

// writeTableFile writes rows as the table t in Parquet at path, as a
// task writes its outputs.
func writeTableFile[T any](path string, t *tables.Table[T], rows []T) error {
	var buf bytes.Buffer
	if err := tables.Write(&buf, t, rows, nil); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// putWideTable commits main:data/wide.parquet: 25 eval_summary rows in row
// groups of 10; row i has k = i and value i/100, except row 7's NaN.
func putWideTable(t testing.TB, st artifacts.Store) {
	t.Helper()
	rows := make([]tables.EvalSummaryRow, 25)
	for i := range rows {
		rows[i] = tables.EvalSummaryRow{Checkpoint: fmt.Sprintf("c%02d", i), Evalset: "wide", K: int32(i), N: 25, Metric: "pass@k", Value: float64(i) / 100, NumProblems: 25}
	}
	rows[7].Value = math.NaN()
	commitTable(t, st, "data/wide.parquet", tables.EvalSummary, rows, &tables.WriteOptions{RowGroupRows: 10, BatchRows: 10}, "a table of three row groups")
}

// commitTable writes rows as the table tb (with opts) at main:path and
// commits it with message.
func commitTable[T any](t testing.TB, st artifacts.Store, path string, tb *tables.Table[T], rows []T, opts *tables.WriteOptions, message string) {
	t.Helper()
	var buf bytes.Buffer
	if err := tables.Write(&buf, tb, rows, opts); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.PutObject(ctx, "main", path, &buf, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, "main", message, nil); err != nil {
		t.Fatal(err)
	}
}

// newHandler returns a Server over st for handler tests.
func newHandler(t testing.TB, st artifacts.Store, opts *ui.Options) *ui.Server {
	t.Helper()
	s, err := ui.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// get sends GET path to h and decodes the JSON answer into out (when not
// nil); it returns the status.
func get(t testing.TB, h http.Handler, path string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, newRequest(http.MethodGet, path))
	body, _ := io.ReadAll(rec.Body)
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK && ct != "application/json; charset=utf-8" {
		t.Fatalf("GET %s: %d with content type %q, want JSON: %s", path, rec.Code, ct, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %d: decode %s: %v", path, rec.Code, body, err)
		}
	}
	return rec.Code
}

// getOK is get that fails the test unless the answer is 200 OK.
func getOK(t testing.TB, h http.Handler, path string, out any) {
	t.Helper()
	if code := get(t, h, path, out); code != http.StatusOK {
		t.Fatalf("GET %s: %d, want 200", path, code)
	}
}

// newRequest is a request as a browser on this machine sends it (the
// server refuses other Host names without a token).
func newRequest(method, path string) *http.Request {
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:8080"
	return req
}
