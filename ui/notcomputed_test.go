package ui_test

import (
	"context"
	"net/http"
	"os"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/ui"
)

// A train metric written as null (kl at β = 0) reaches the page as not
// computed, never as a 0 among the numbers; and the page is given the
// iteration's directory and the config's path rather than spelling them.
func TestNotComputedMetrics(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "beta0", Envs: map[string]pipeline.Settings{"train": {}}})
	if err != nil {
		t.Fatal(err)
	}
	train := &pipeline.Task{Name: "train", Version: "1", Env: "train", Outputs: []pipeline.Output{{Name: pipeline.OutMetrics, File: runs.TrainMetricsFile}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			return os.WriteFile(tc.OutputPath(pipeline.OutMetrics), []byte(`{"loss": 0.01, "policy_loss": 0.01, "kl": null, "entropy": 1.5}`), 0o644)
		}}
	it := r.Iteration(1)
	it.Go(ctx, train, pipeline.Call{})
	if _, err := it.Commit(ctx, runs.State{Iteration: 1, Adapters: map[string]string{}}, nil); err != nil {
		t.Fatal(err)
	}
	r.Close()

	h := newHandler(t, st, nil)
	wantTrain := map[string]float64{"loss": 0.01, "policy_loss": 0.01, "entropy": 1.5}
	var d ui.RunDetail
	if code := get(t, h, "/api/runs/beta0", &d); code != http.StatusOK {
		t.Fatalf("GET /api/runs/beta0: %d", code)
	}
	if d.ConfigPath != "run/config.yaml" || len(d.Iterations) != 1 {
		t.Fatalf("config path %q, %d iterations; want run/config.yaml and 1", d.ConfigPath, len(d.Iterations))
	}
	s := d.Iterations[0]
	if s.Dir != "iterations/000001" || !reflect.DeepEqual(s.NotComputed, []string{"kl"}) || !reflect.DeepEqual(s.Train, wantTrain) {
		t.Errorf("iteration 1: dir %q, not computed %v, train %v; want iterations/000001, [kl], %v", s.Dir, s.NotComputed, s.Train, wantTrain)
	}
	var it1 ui.IterationDetail
	if code := get(t, h, "/api/runs/beta0/iterations/1", &it1); code != http.StatusOK {
		t.Fatalf("GET /api/runs/beta0/iterations/1: %d", code)
	}
	if it1.Dir != "iterations/000001" || !reflect.DeepEqual(it1.NotComputed, []string{"kl"}) || !reflect.DeepEqual(it1.Train, wantTrain) {
		t.Errorf("iteration detail: dir %q, not computed %v, train %v; want iterations/000001, [kl], %v", it1.Dir, it1.NotComputed, it1.Train, wantTrain)
	}
}
