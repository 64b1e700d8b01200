package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// The engine records the run's config, whoever drives it: a library user
// with pipeline.Open and Commit gets run/config.yaml with the first
// iteration it commits, nothing before, and no new version of it while
// the config is unchanged.
func TestEngineRecordsTheConfig(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	cfg := []byte("# effective config\niterations: 2\n")
	r := openRun(t, st, pipeline.RunOptions{Name: "lib", Config: cfg})
	var n atomic.Int32
	it := r.Iteration(1)
	it.Go(ctx, writeTask("gen", &n), pipeline.Call{Params: map[string]string{"text": "a"}})
	if _, _, err := st.GetObject(ctx, runs.Branch("lib"), runs.ConfigPath); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("the config is staged before any commit: %v", err)
	}
	c1, err := it.Commit(ctx, map[string]int{"iteration": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, st, c1.ID, runs.ConfigPath); got != string(cfg) {
		t.Fatalf("%s at iteration 1: %q", runs.ConfigPath, got)
	}
	it = r.Iteration(2)
	it.Go(ctx, writeTask("gen", &n), pipeline.Call{Params: map[string]string{"text": "b"}})
	c2, err := it.Commit(ctx, map[string]int{"iteration": 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ch, err := range st.Diff(ctx, c1.ID, c2.ID, &artifacts.DiffOptions{TwoDot: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Path == runs.ConfigPath {
			t.Errorf("iteration 2 rewrote the unchanged config: %+v", ch)
		}
	}
}
