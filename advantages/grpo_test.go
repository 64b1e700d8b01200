package advantages_test

import (
	"errors"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/advantages/estimatortest"
)

// TestGRPO runs the shipped estimator through the estimators' suite. By
// hand: {1, 0, 0, 1} has mean 0.5, sample std 1/√3 (the default) and
// population std 0.5, so (r − 0.5) / (std + ε); with NoStd, r − 0.5;
// {3, 1} has mean 2, sample std √2 and population std 1.
func TestGRPO(t *testing.T) {
	const eps = 1e-6
	d := 0.5 / (1/math.Sqrt(3) + eps)
	dp := 0.5 / (0.5 + eps)
	e := 1 / (math.Sqrt2 + 1)
	estimatortest.Run(t, estimatortest.Suite{Estimator: advantages.GRPO, ZeroMean: true, Hand: []estimatortest.Group{
		{Rewards: []float64{1, 0, 0, 1}, Want: []float64{d, -d, -d, d}},
		{Rewards: []float64{1, 0, 0, 1}, Options: advantages.Options{PopulationStd: true}, Want: []float64{dp, -dp, -dp, dp}},
		{Rewards: []float64{1, 0, 0, 1}, Options: advantages.Options{NoStd: true}, Want: []float64{0.5, -0.5, -0.5, 0.5}},
		{Rewards: []float64{3, 1}, Options: advantages.Options{Epsilon: 1}, Want: []float64{e, -e}},
		{Rewards: []float64{3, 1}, Options: advantages.Options{Epsilon: 1, PopulationStd: true}, Want: []float64{0.5, -0.5}},
	}})
}

// TestEstimatorsLookup: a name the registry lacks lists the known ones.
func TestEstimatorsLookup(t *testing.T) {
	es := advantages.Estimators{advantages.GRPO}
	if e, err := es.Lookup("grpo"); err != nil || e != advantages.GRPO {
		t.Fatalf("Lookup(grpo) = %v, %v", e, err)
	}
	_, err := es.Lookup("rloo")
	const want = `unknown advantage estimator "rloo": use grpo`
	if err == nil || err.Error() != want || !errors.Is(err, advantages.ErrUnknownEstimator) {
		t.Fatalf("Lookup(rloo) = %v, want %s", err, want)
	}
}

// TestParseVersionEstimator: a version that names an estimator reads
// back with it when it is known, and fails naming the known ones when
// not; GRPO's versions name none.
func TestParseVersionEstimator(t *testing.T) {
	half := estimatortest.Half
	o := advantages.TrainOptions{Options: advantages.Options{Epsilon: 1e-6, Estimator: half}, KeepZeroStd: true}
	const v = "join-2 epsilon=1e-06 no_std=false keep_zero_std=true std=sample estimator=half"
	if got := o.Version(); got != v {
		t.Fatalf("Version() = %q, want %q", got, v)
	}
	got, err := advantages.ParseVersion(v, advantages.GRPO, half)
	if err != nil || got != o {
		t.Fatalf("ParseVersion = %+v, %v; want %+v", got, err, o)
	}
	_, err = advantages.ParseVersion(v, advantages.GRPO)
	const want = `advantages task version "join-2 epsilon=1e-06 no_std=false keep_zero_std=true std=sample estimator=half": unknown advantage estimator "half": use grpo`
	if err == nil || err.Error() != want {
		t.Fatalf("ParseVersion without it: %v, want %s", err, want)
	}
	if got := (advantages.TrainOptions{Options: advantages.Options{Estimator: advantages.GRPO}}).Version(); got != "join-2 epsilon=1e-06 no_std=false keep_zero_std=false std=sample" {
		t.Errorf("GRPO's version %q names an estimator", got)
	}
}
