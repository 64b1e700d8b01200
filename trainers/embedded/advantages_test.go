package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/standin/steptest"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// TestAdvantagesStepTrainsTheSameBytes: a loop whose advantages are
// computed by the advantages step and read back from advantages.parquet
// by the train task ends with the same artifacts, byte for byte, as one
// whose train task computes them itself — adapters, optimizer state,
// metrics and the advantages table included.
func TestAdvantagesStepTrainsTheSameBytes(t *testing.T) {
	m := embeddedModel(t)
	for _, o := range []embedded.Options{{}, {NoStd: true, KeepZeroStd: true}} {
		t.Run(fmt.Sprintf("no_std=%v", o.NoStd), func(t *testing.T) {
			wantSt, want, err := runLoop(t, m, embedded.Task(m, o), 3)
			if err != nil {
				t.Fatal(err)
			}
			st := newStore(t, 64)
			r := openRun(t, st, "f", 5)
			s := stages(t, m, kind.OnAdvantages(embedded.Task(m, o)))
			steps, err := (*embedded.GRPOStage)(&o).Steps(kind.Build{})
			if err != nil {
				t.Fatal(err)
			}
			s.Steps = steps
			if _, err := r.Loop(context.Background(), loopConfig(3, faultBatch), s); err != nil {
				t.Fatal(err)
			}
			w, g := standintest.Sums(t, wantSt, want.Branch()+"@"), standintest.Sums(t, st, r.Branch()+"@")
			if len(adapterSums(w)) == 0 || w["iterations/000003/advantages.parquet"] == "" || fmt.Sprint(w) != fmt.Sprint(g) {
				t.Fatalf("artifacts differ:\ncomputed by train %v\nadvantages step  %v", w, g)
			}
		})
	}
}

// TestUpdateOnGivenAdvantages: Update on the rows Join wrote is Update
// computing them; rows that do not fit the batch are an ErrBatch naming
// the row.
func TestUpdateOnGivenAdvantages(t *testing.T) {
	m := embeddedModel(t)
	b := sampleBatch(t, m, nil, 4, 2)
	b.Rewards[0].Total, b.Rewards[1].Total = 1, 0 // a group with signal
	want, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	j, err := advantages.Join(b.Trajectories, b.Rewards, advantages.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	given := b
	given.Advantages = j.Advantages
	got, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), given)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("update on given advantages\n got %+v\nwant %+v", got.Metrics, want.Metrics)
	}
	bad := b
	bad.Advantages = append([]tables.Advantage(nil), j.Advantages...)
	bad.Advantages[5].SampleIndex = 99
	_, err = newTrainer(t, m, embedded.Options{}).Update(context.Background(), bad)
	if !errors.Is(err, embedded.ErrBatch) || !errors.Is(err, advantages.ErrRows) || !strings.Contains(err.Error(), "row 6 is sample 99 of prompt") {
		t.Fatalf("err %v, want ErrRows naming row 6", err)
	}
}

// TestMismatchedAdvantagesFailTheTrainCall: an advantages file that does
// not fit the iteration's trajectories, or holds a NaN advantage on a row
// it trains (advantages.ErrNonfinite), fails the train call permanently,
// naming the file and the row.
func TestMismatchedAdvantagesFailTheTrainCall(t *testing.T) {
	m := embeddedModel(t)
	for _, tc := range []struct {
		name  string
		alter func(rows []tables.Advantage) ([]tables.Advantage, string) // the rows, the error wanted
		is    error
	}{
		{"rows that do not fit", func(rows []tables.Advantage) ([]tables.Advantage, string) {
			rows[2].PromptID = "nowhere"
			return rows, `train iteration 1: advantages.parquet: inconsistent training batch: the advantages do not fit the trajectories: row 3 is sample 2 of prompt "nowhere", which the trajectories do not hold`
		}, advantages.ErrRows},
		{"a NaN advantage", func(rows []tables.Advantage) ([]tables.Advantage, string) {
			i := slices.IndexFunc(rows, func(a tables.Advantage) bool { return !a.Mask })
			rows[i].Advantage = math.NaN()
			return rows, fmt.Sprintf(`train iteration 1: inconsistent training batch: a value is NaN or infinite: advantages.parquet row %d (prompt %q, sample %d): advantage NaN is not masked; recompute the table (the loop's advantages step writes finite ones)`,
				i+1, rows[i].PromptID, rows[i].SampleIndex)
		}, advantages.ErrNonfinite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t, 64)
			r := openRun(t, st, "f", 5)
			s := stages(t, m, kind.OnAdvantages(embedded.Task(m, embedded.Options{})))
			var want string
			s.Steps = []pipeline.Step{steptest.Altered(advantages.Step(advantages.TrainOptions{}), advantages.OutAdvantages, tables.Advantages,
				func(rows []tables.Advantage) []tables.Advantage { rows, want = tc.alter(rows); return rows })}
			_, err := r.Loop(context.Background(), loopConfig(1, faultBatch), s)
			if !errors.Is(err, pipeline.ErrPermanent) || !errors.Is(err, embedded.ErrBatch) || !errors.Is(err, tc.is) || want == "" || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v\nwant a permanent error saying %s", err, want)
			}
		})
	}
}
