package standin_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// The engine's loop records the run's config and state on the branch by
// itself: a library user who drives pipeline.Loop (no CLI, no driver)
// leaves a run that every reader of runs can read.
func TestLoopRecordsConfigAndState(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	cfg := []byte("# the effective config\niterations: 3\n")
	_, state := standintest.Loop(t, st, pipeline.RunOptions{Name: "lib", Envs: envs(), Seed: 5, Config: cfg}, loopConfig(3, 0), standin.Stages(standin.Options{SamplesPerPrompt: 2}))
	got, err := runs.ReadState(ctx, st, runs.Branch("lib"))
	if err != nil {
		t.Fatal(err)
	}
	want := runs.State{Iteration: 3, Cursor: 9, Seed: 5, Adapters: map[string]string{"2": runs.AdapterPath(2), "3": runs.AdapterPath(3)}}
	if got == nil || !reflect.DeepEqual(*got, want) || !reflect.DeepEqual(state, want) {
		t.Fatalf("%s = %+v, Loop returned %+v; want %+v", runs.StatePath, got, state, want)
	}
	b, err := artifacts.ReadObject(ctx, st, runs.Branch("lib"), runs.ConfigPath)
	if err != nil || string(b) != string(cfg) {
		t.Fatalf("%s = %q (%v), want %q", runs.ConfigPath, b, err, cfg)
	}
}
