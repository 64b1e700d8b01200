// Package exampletest runs an example's pipeline.yaml through the rlpipe
// command line inside a test, in a store of its own, and opens that store
// to read back what the run committed (with the readers of
// pipeline/standin/standintest): the scaffolding the examples' tests share.
//
//	src := exampletest.Config(t, "pipeline.yaml", map[string]string{"iterations: 20": "iterations: 4"})
//	e := exampletest.New(t, srv.LogTail)
//	e.Rlpipe("init-store")
//	e.Rlpipe("run", "-f", e.Write("pipeline.yaml", src), "--no-report")
//	rows := standintest.ReadRows(t, e.Open(), "runs-arith", runs.IterationPath(1, runs.TrajectoriesFile), tables.Trajectories)
package exampletest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli"
	"github.com/rlpipe/rlpipe/internal/configtest"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/vllmserver/vllmtest"
)

// VLLMPython is the Python of the venv with vLLM (vllmtest.Python) for a
// test that runs vLLM, which takes long: with -short, or without the venv,
// it skips the test, saying what it would run with -short.
func VLLMPython(t *testing.T, runs string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(runs)
	}
	return vllmtest.Python(t)
}

// Config reads an example's config file and applies edits: each key is a
// text the file must hold, replaced once by its value. A missing text
// fails the test, naming it, so that a test notices when the example it
// cuts down has changed.
func Config(t testing.TB, path string, edits map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return configtest.Edit(t, path, string(b), edits)
}

// Abs is path made absolute, for a config written to another directory.
func Abs(t testing.TB, path string) string {
	t.Helper()
	return configtest.Abs(t, path)
}

// Env is a temporary directory holding a store, and the rlpipe command
// line pointed at it.
type Env struct {
	t          testing.TB
	Dir, Store string
	// logTail, when set, is shown when a command fails: the log of the
	// server the run samples from.
	logTail func() string
}

// New makes an Env; logTail may be nil.
func New(t testing.TB, logTail func() string) *Env {
	dir := t.TempDir()
	return &Env{t: t, Dir: dir, Store: filepath.Join(dir, "store"), logTail: logTail}
}

// Write writes a file into the Env's directory and returns its path.
func (e *Env) Write(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.Dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// Rlpipe runs the command line on the Env's store and returns its
// standard output; a non-zero exit fails the test with its standard
// error (and the server's log tail).
func (e *Env) Rlpipe(args ...string) string {
	e.t.Helper()
	var out, errb bytes.Buffer
	if code := cli.Main(append([]string{"--store", e.Store}, args...), strings.NewReader(""), &out, &errb); code != 0 {
		msg := errb.String()
		if e.logTail != nil {
			msg += "\nthe server's log ends:\n" + e.logTail()
		}
		e.t.Fatalf("rlpipe %s: exit %d\n%s", strings.Join(args, " "), code, msg)
	}
	return out.String()
}

// JSON runs the command line with -o json and decodes its output into v.
func (e *Env) JSON(v any, args ...string) {
	e.t.Helper()
	if err := json.Unmarshal([]byte(e.Rlpipe(append(args, "-o", "json")...)), v); err != nil {
		e.t.Fatalf("rlpipe %s -o json: %v", strings.Join(args, " "), err)
	}
}

// Eval is one evaluation in `rlpipe status -o json`.
type Eval struct {
	Checkpoint string             `json:"checkpoint"`
	Iteration  int                `json:"iteration"`
	Metrics    map[string]float64 `json:"metrics"`
}

// Evals are the evaluations `rlpipe status RUN` lists, oldest first.
func (e *Env) Evals(run string) []Eval {
	e.t.Helper()
	var st struct {
		Evals []Eval `json:"evals"`
	}
	e.JSON(&st, "status", run)
	return st.Evals
}

// Open opens the Env's store, closed when the test ends.
func (e *Env) Open() artifacts.Store {
	e.t.Helper()
	s, err := artifacts.Open(context.Background(), e.Store, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// Adapter copies iteration it's committed PEFT adapter on ref into a
// temporary directory and returns it.
func Adapter(t testing.TB, s artifacts.Store, ref string, it int) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{runs.AdapterConfigFile, "adapter_model.safetensors"} {
		b := standintest.Read(t, s, ref, runs.IterationPath(it, runs.AdapterDir+"/"+name))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// SampledFromNewAdapters reads iteration it's trajectories on ref and fails
// the test unless every sample is ok, with token ids and a logprob for
// each. With overlap (max_staleness 1) iteration it samples from
// iteration it-2's adapter: from iteration 3 on, the policy version must
// be an adapter of model ("MODEL+adapter-…") that versions, the ones seen
// so far, does not hold; SampledFromNewAdapters adds it. It returns the
// rows.
func SampledFromNewAdapters(t testing.TB, s artifacts.Store, ref string, it int, model string, versions map[string]bool) []tables.Trajectory {
	t.Helper()
	return SampledFromNew(t, s, ref, it, model+"+adapter-", versions)
}

// SampledFromNew is SampledFromNewAdapters for checkpoints whose policy
// versions start with prefix: "MODEL+adapter-", or "MODEL+weights-" for
// full weights (lora: none).
func SampledFromNew(t testing.TB, s artifacts.Store, ref string, it int, prefix string, versions map[string]bool) []tables.Trajectory {
	t.Helper()
	rows := standintest.ReadRows(t, s, ref, runs.IterationPath(it, runs.TrajectoriesFile), tables.Trajectories)
	for _, r := range rows {
		if r.Status != tables.StatusOK || len(r.TokenIDs) == 0 || len(r.Logprobs) != len(r.TokenIDs) {
			t.Fatalf("iteration %d sample %s/%d: status %s, %d token ids, %d logprobs", it, r.PromptID, r.SampleIndex, r.Status, len(r.TokenIDs), len(r.Logprobs))
		}
	}
	v := rows[0].PolicyVersion
	if it > 2 && (!strings.HasPrefix(v, prefix) || versions[v]) {
		t.Errorf("iteration %d sampled from %q: want a new %s… each iteration", it, v, prefix)
	}
	versions[v] = true
	return rows
}
