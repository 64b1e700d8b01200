package rollouts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rollouts"
)

// sampleLoop runs iterations of the stand-in loop on a dataset of n
// prompts with sample as its sample stage (retried up to 3 times), and
// returns the prompt ids of each committed iteration's batch.
func sampleLoop(t *testing.T, sample *pipeline.Task, n, batch, iterations int) ([][]string, error) {
	t.Helper()
	ctx := context.Background()
	st := standintest.NewStore(t, n)
	retry := pipeline.Settings{Retry: pipeline.Retry{Attempts: 3, Backoff: time.Millisecond}}
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "s",
		Envs: map[string]pipeline.Settings{"sample": retry, "generate": retry, "reward": retry, "train": retry}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	stages := standin.Stages(standin.Options{})
	stages.Sample = sample
	state, err := run.Loop(ctx, pipeline.LoopConfig{Iterations: iterations, BatchSize: batch,
		Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}, stages)
	var batches [][]string
	for i := 1; i <= state.Iteration; i++ {
		var ids []string
		for _, p := range standintest.ReadRows(t, st, run.Branch(), fmt.Sprintf("iterations/%06d/prompts.parquet", i), tables.Prompts) {
			ids = append(ids, p.PromptID)
		}
		batches = append(batches, ids)
	}
	return batches, err
}

// TestSampleBatches runs both sample stages (kind: dataset and the
// stand-in) over the epoch boundary and past the dataset's size: a batch
// that spans two epochs holds no prompt twice, and a batch larger than
// the dataset fails the sample task on its first attempt, not retried.
func TestSampleBatches(t *testing.T) {
	samplers := []struct {
		name string
		task func() *pipeline.Task
	}{
		{name: "dataset kind", task: func() *pipeline.Task { t := rollouts.SampleTask(); t.Env = "sample"; return t }},
		{name: "stand-in", task: func() *pipeline.Task { return standin.Stages(standin.Options{}).Sample }},
	}
	for _, s := range samplers {
		t.Run(s.name+"/batch spans the end of an epoch", func(t *testing.T) {
			got, err := sampleLoop(t, s.task(), 10, 4, 3)
			if err != nil {
				t.Fatal(err)
			}
			want := "[[p000 p001 p002 p003] [p004 p005 p006 p007] [p008 p009 p000 p001]]"
			if fmt.Sprint(got) != want {
				t.Errorf("batches %v, want %s", got, want)
			}
		})
		t.Run(s.name+"/batch larger than the dataset", func(t *testing.T) {
			got, err := sampleLoop(t, s.task(), 10, 16, 1)
			var te *pipeline.TaskError
			if !errors.As(err, &te) || te.Task != "sample" || te.Attempts != 1 || len(got) != 0 {
				t.Fatalf("loop = %v, %v; want the sample task to fail on its only attempt", got, err)
			}
			want := "batch_size 16 is more than the 10 prompts of the dataset, and a batch holds each prompt at most once: lower batch_size to at most 10, or add prompts to the dataset"
			if !strings.HasSuffix(err.Error(), want) || !errors.Is(err, pipeline.ErrBatchTooLarge) || !errors.Is(err, pipeline.ErrPermanent) {
				t.Errorf("error %q\nwant one ending %q, an ErrBatchTooLarge and ErrPermanent", err, want)
			}
		})
	}
}
