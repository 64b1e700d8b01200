// Package standintest is what the tests of runs share beside the stand-in
// stages: a store holding the stand-in dataset, and readers of a run's
// objects that fail the test on an error instead of returning it. The
// store and the readers are artifactstest's fixtures (NewLocal, Read,
// ReadTable, Sums) under the names the tests of runs use; only what is
// about runs (the dataset, the run's artifact prefixes, Fetch, Loop) is
// written here.
//
// It sits in the unit pipeline/standin, a fixture every test may import
// (internal/layers); only tests import it, so "testing" never links into
// the command.
package standintest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// DatasetPath is where NewStore puts the stand-in prompts on main.
const DatasetPath = "data/prompts.parquet"

// NewStore creates an embedded store (artifactstest.NewLocal) whose main
// branch holds standin.Prompts(n) at DatasetPath (nothing when n is 0).
// The store is closed when the test ends.
func NewStore(t testing.TB, n int) artifacts.Store {
	t.Helper()
	st := artifactstest.NewLocal(t)
	if n > 0 {
		if err := standin.PutDataset(context.Background(), st, "main", DatasetPath, n); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// Read returns the bytes of ref:path; a missing object fails the test.
// It is artifactstest.Read, kept under this name for the tests of runs.
func Read(t testing.TB, st artifacts.Store, ref, path string) []byte {
	t.Helper()
	return artifactstest.Read(t, st, ref, path)
}

// ReadRows reads the table tb stored at ref:path (artifactstest.ReadTable).
func ReadRows[T any](t testing.TB, st artifacts.Store, ref, path string, tb *tables.Table[T]) []T {
	t.Helper()
	return artifactstest.ReadTable(t, st, ref, path, tb)
}

// PutInput writes rows as the table tb at main:path and returns the
// object as a task's input: how a test hands one task the tables an
// earlier stage would have written.
func PutInput[T any](t testing.TB, st artifacts.Store, path string, tb *tables.Table[T], rows []T) pipeline.Artifact {
	t.Helper()
	artifactstest.PutTable(t, st, "main", path, tb, rows)
	return pipeline.StoreArtifact("main", path)
}

// Sums maps every artifact of the run at ref — the paths under
// iterations/, evals/ and run/ — to its checksum, for comparing two runs
// byte for byte; events/ holds timings and is left out.
func Sums(t testing.TB, st artifacts.Store, ref string) map[string]string {
	t.Helper()
	return artifactstest.Sums(t, st, ref, runs.IterationsPrefix, runs.EvalsPrefix, "run/")
}

// Fetch copies every object under ref:prefix/ into a fresh t.TempDir() and
// returns it, as a task's input directory; no object there fails the test.
func Fetch(t testing.TB, st artifacts.Store, ref, prefix string) string {
	t.Helper()
	dir := t.TempDir()
	n := 0
	for e, err := range st.ListObjects(context.Background(), ref, &artifacts.ListOptions{Prefix: prefix + "/"}) {
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, e.Path[len(prefix)+1:])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, Read(t, st, ref, e.Path), 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no objects under %s:%s/", ref, prefix)
	}
	return dir
}

// LogBuffer collects a run's log lines from its goroutines: a log sink
// safe for concurrent writes.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Loop opens the run opts names on st, runs the loop cfg describes with
// stages to its end and closes the run; an error fails the test. It
// returns the closed run (for its Branch) and the loop's last state.
func Loop(t testing.TB, st artifacts.Store, opts pipeline.RunOptions, cfg pipeline.LoopConfig, stages pipeline.Stages) (*pipeline.Run, runs.State) {
	t.Helper()
	var state runs.State
	r := inRun(t, st, opts, func(ctx context.Context, r *pipeline.Run) (err error) {
		state, err = r.Loop(ctx, cfg, stages)
		return err
	})
	return r, state
}

// Evaluate opens the run opts names on st and evaluates the base model on
// the eval set at evalSet as set, as `rlpipe eval` does out of the loop:
// gen and score (an evaluation's two tasks) run in iteration 1 as
// checkpoint 0, writing runs.EvalDir(0, set); it commits the iteration
// and closes the run. An error fails the test. It returns the closed run
// (for its Branch).
func Evaluate(t testing.TB, st artifacts.Store, opts pipeline.RunOptions, gen, score *pipeline.Task, evalSet pipeline.Artifact, set string) *pipeline.Run {
	t.Helper()
	return inRun(t, st, opts, func(ctx context.Context, r *pipeline.Run) error {
		it := r.Iteration(1)
		pipeline.Evaluate(ctx, it, gen, score, evalSet, nil, 0, set, "")
		_, err := it.Commit(ctx, nil, nil)
		return err
	})
}

// inRun opens the run opts names on st, calls f with it and closes it; an
// error of either fails the test. It returns the closed run.
func inRun(t testing.TB, st artifacts.Store, opts pipeline.RunOptions, f func(context.Context, *pipeline.Run) error) *pipeline.Run {
	t.Helper()
	ctx := context.Background()
	r, err := pipeline.Open(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := f(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r
}
