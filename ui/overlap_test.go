package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/ui"
)

// With overlap, the next iteration writes its prompts and trajectories
// before the current one commits; the iteration view still lists, as
// what each iteration wrote, exactly its own files and no other
// iteration's.
func TestIterationArtifactsWithOverlap(t *testing.T) {
	const iterations = 3
	st := standintest.NewStore(t, 10)
	p := standintest.NewPacing(true, iterations)
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2}}
	envs := map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "train": quick}
	r, err := pipeline.Open(context.Background(), st, pipeline.RunOptions{Name: "overlap", Envs: envs, Seed: 2, OnEvent: p.Event,
		Machine: &pipeline.Machine{CPU: 8, MemoryMB: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.LoopConfig{Iterations: iterations, BatchSize: 3, MaxStaleness: 1, Dataset: pipeline.StoreArtifact("main", standintest.DatasetPath)}
	_, err = r.Loop(context.Background(), cfg, p.Stages(standin.Stages(standin.Options{SamplesPerPrompt: 2})))
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	h := newHandler(t, st, nil)
	for n := 2; n <= iterations; n++ {
		var d ui.IterationDetail
		if code := get(t, h, fmt.Sprintf("/api/runs/overlap/iterations/%d", n), &d); code != http.StatusOK {
			t.Fatalf("GET iteration %d: %d", n, code)
		}
		var got []string
		for _, a := range d.Artifacts {
			got = append(got, a.Change+" "+a.Path)
		}
		want := strings.ReplaceAll(`added events/N.jsonl
added events/N.metrics.json
added iterations/N/adapter/adapter_config.json
added iterations/N/adapter/adapter_model.json
added iterations/N/prompts.parquet
added iterations/N/rewards.parquet
added iterations/N/train_metrics.json
added iterations/N/trajectories.parquet
changed run/state.json`, "N", fmt.Sprintf("%06d", n))
		if strings.Join(got, "\n") != want {
			t.Errorf("iteration %d wrote\n%s\nwant\n%s", n, strings.Join(got, "\n"), want)
		}
	}
}
