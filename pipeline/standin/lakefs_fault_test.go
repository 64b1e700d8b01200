package standin_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// An overlapped loop through the lakeFS backend, against a store server
// that answers reads of staged objects with 404 as a real lakeFS does to
// a read racing a commit, finishes without a single task retry, with the
// artifacts of the same loop on the embedded store. Two faults: reads
// during every commit (lakeFS's race, widened to a window), and the
// deterministic worst case, the first read of every staged object.
func TestOverlappedLoopSurvivesReadsRacingCommits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults storeserver.Faults
	}{
		{"during commits", storeserver.Faults{CommitWindow: 30 * time.Millisecond}},
		{"first read of each", storeserver.Faults{MissStagedOnce: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { loopThroughFaults(t, tc.faults) })
	}
}

func loopThroughFaults(t *testing.T, faults storeserver.Faults) {
	ctx := context.Background()
	once := pipeline.Settings{Retry: pipeline.Retry{Attempts: 1}}
	noRetry := map[string]pipeline.Settings{"sample": once, "generate": once, "reward": once, "advantages": once, "train": once}
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 2})

	direct := standintest.NewStore(t, 10)
	standintest.Loop(t, direct, pipeline.RunOptions{Name: "race", Envs: noRetry, Seed: 3}, loopConfig(4, 1), stages)

	served := standintest.NewStore(t, 10)
	remote, srv := throughLakeFS(t, served, &storeserver.Options{Faults: faults})
	var retries, failures atomic.Int32
	r, err := pipeline.Open(ctx, remote, pipeline.RunOptions{Name: "race", Envs: noRetry, Seed: 3, OnEvent: func(e pipeline.Event) {
		switch e.Kind {
		case pipeline.EventRetried:
			retries.Add(1)
		case pipeline.EventFailed:
			failures.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	state, err := r.Loop(ctx, loopConfig(4, 1), stages)
	if err != nil {
		t.Fatalf("the loop stopped on a read racing a commit: %v", err)
	}
	if state.Iteration != 4 || retries.Load() != 0 || failures.Load() != 0 {
		t.Errorf("iteration %d, %d retries, %d failures; want 4, 0, 0", state.Iteration, retries.Load(), failures.Load())
	}
	t.Logf("%d reads missed (%v)", srv.FaultMisses(), faults)
	want, got := standintest.Sums(t, direct, runs.Branch("race")), standintest.Sums(t, served, runs.Branch("race"))
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d artifacts through lakeFS, %d direct", len(got), len(want))
	}
	for p, sum := range want {
		if got[p] != sum && p != "run/state.json" {
			t.Errorf("%s: %s through lakeFS, %s direct", p, got[p], sum)
		}
	}
}
