package external_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/standin/steptest"
	"github.com/rlpipe/rlpipe/trainers/external"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// TestAdvantagesStepFeedsTheTrainer: with the loop's advantages step, the
// trainer reads the step's advantages.parquet as --advantages, and the
// run ends with the same artifacts, byte for byte, as one whose train
// task computes the advantages itself. The stage's hyperparameters name
// the step's options.
func TestAdvantagesStepFeedsTheTrainer(t *testing.T) {
	wantSt := standintest.NewStore(t, 12)
	want := openRun(t, wantSt, "ext", 1, nil)
	loopOK(t, want, 2, stages(t, trainTask(t, "ok", nil)))
	st := standintest.NewStore(t, 12)
	run := openRun(t, st, "ext", 1, nil)
	s := stages(t, kind.OnAdvantages(trainTask(t, "ok", nil)))
	stage := &external.Stage{Hyperparameters: map[string]any{"keep_zero_std": false}}
	steps, err := stage.Steps(kind.Build{})
	if err != nil {
		t.Fatal(err)
	}
	s.Steps = steps
	loopOK(t, run, 2, s)
	w, g := standintest.Sums(t, wantSt, want.Branch()+"@"), standintest.Sums(t, st, run.Branch()+"@")
	if w["iterations/000002/"+grpo.AdvantagesFile] == "" || fmt.Sprint(w) != fmt.Sprint(g) {
		t.Fatalf("artifacts differ:\ncomputed by train %v\nadvantages step  %v", w, g)
	}
	for _, tc := range []struct {
		hp   map[string]any
		want advantages.TrainOptions
	}{
		{nil, advantages.TrainOptions{}},
		{map[string]any{"no_std": true, "keep_zero_std": true, "lr": 1e-5}, advantages.TrainOptions{Options: advantages.Options{NoStd: true}, KeepZeroStd: true}},
	} {
		steps, err := (&external.Stage{Hyperparameters: tc.hp}).Steps(kind.Build{})
		if err != nil || len(steps) != 1 || steps[0].Name != advantages.StepName || steps[0].Task.Version != tc.want.Version() {
			t.Errorf("hyperparameters %v: steps %+v (%v), want the advantages step of %+v", tc.hp, steps, err, tc.want)
		}
	}
}

// TestMismatchedAdvantagesFailBeforeTheTrainer: an advantages file that
// does not fit the trajectories, or holds an infinite advantage on a row
// it trains (advantages.ErrNonfinite), fails the call permanently, naming
// the file and the row, before the trainer starts.
func TestMismatchedAdvantagesFailBeforeTheTrainer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alter func(rows []tables.Advantage) ([]tables.Advantage, string) // the rows, the error wanted
		is    error
	}{
		{"rows that do not fit", func(rows []tables.Advantage) ([]tables.Advantage, string) {
			return rows[1:], "train iteration 1: advantages.parquet: inconsistent training batch: the advantages do not fit the trajectories: none of the 11 rows is sample 0 of prompt"
		}, advantages.ErrRows},
		{"an infinite advantage", func(rows []tables.Advantage) ([]tables.Advantage, string) {
			i := slices.IndexFunc(rows, func(a tables.Advantage) bool { return !a.Mask })
			rows[i].Advantage = math.Inf(-1)
			return rows, fmt.Sprintf(`train iteration 1: inconsistent training batch: a value is NaN or infinite: advantages.parquet row %d (prompt %q, sample %d): advantage -Inf is not masked; recompute the table (the loop's advantages step writes finite ones)`,
				i+1, rows[i].PromptID, rows[i].SampleIndex)
		}, advantages.ErrNonfinite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := standintest.NewStore(t, 12)
			logs := &standintest.LogBuffer{}
			run := openRun(t, st, "ext", 3, logs)
			s := stages(t, kind.OnAdvantages(trainTask(t, "ok", nil)))
			var want string
			s.Steps = []pipeline.Step{steptest.Altered(advantages.Step(advantages.TrainOptions{}), advantages.OutAdvantages, tables.Advantages,
				func(rows []tables.Advantage) []tables.Advantage { rows, want = tc.alter(rows); return rows })}
			_, err := run.Loop(context.Background(), loopConfig(1), s)
			if !errors.Is(err, pipeline.ErrPermanent) || !errors.Is(err, external.ErrBatch) || !errors.Is(err, tc.is) || want == "" || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v\nwant a permanent error saying %s", err, want)
			}
			if strings.Contains(logs.String(), "stand-in trainer:") {
				t.Error("the trainer ran on advantages it cannot train on")
			}
		})
	}
}
