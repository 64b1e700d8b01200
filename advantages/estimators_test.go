package advantages_test

import (
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/advantages/estimatortest"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestRLOO runs RLOO through the estimators' suite. By hand: in {1, 0,
// 0, 1} a 1's baseline is the mean of {0, 0, 1}, 1/3, so 2/3; a 0's is
// 2/3, so −2/3; {3, 1}: ±2; {0.5, −0.25, 2}: 0.5 − 0.875, −0.25 − 1.25,
// 2 − 0.125. The std options change nothing.
func TestRLOO(t *testing.T) {
	const third = 1.0 / 3
	estimatortest.Run(t, estimatortest.Suite{Estimator: advantages.RLOO, ZeroMean: true, Hand: []estimatortest.Group{
		{Rewards: []float64{1, 0, 0, 1}, Want: []float64{2 * third, -2 * third, -2 * third, 2 * third}},
		{Rewards: []float64{3, 1}, Want: []float64{2, -2}},
		{Rewards: []float64{0.5, -0.25, 2}, Options: advantages.Options{NoStd: true, PopulationStd: true}, Want: []float64{-0.375, -1.5, 1.875}},
	}})
	if got := advantages.MinGroup(advantages.RLOO); got != 2 {
		t.Errorf("MinGroup(RLOO) = %d, want 2", got)
	}
}

// TestDrGRPO runs Dr. GRPO's advantage through the suite: r − mean, with
// or without NoStd.
func TestDrGRPO(t *testing.T) {
	estimatortest.Run(t, estimatortest.Suite{Estimator: advantages.DrGRPO, ZeroMean: true, Hand: []estimatortest.Group{
		{Rewards: []float64{1, 0, 0, 1}, Want: []float64{0.5, -0.5, -0.5, 0.5}},
		{Rewards: []float64{3, 1}, Options: advantages.Options{Epsilon: 1, PopulationStd: true}, Want: []float64{1, -1}},
	}})
	if got := advantages.MinGroup(advantages.DrGRPO); got != 1 {
		t.Errorf("MinGroup(DrGRPO) = %d, want 1 (it declares none)", got)
	}
}

// TestStd: GRPO divides by the sample std by default and by the
// population std with PopulationStd; the version names the sample std
// only, so the population std's versions are those written before the
// default flipped. By hand: {1, 0, 0, 1} has population std 0.5 and
// sample std 0.5·√(4/3) = 1/√3; {2, 2} has both 0 (A = 0); a lone sample
// stays masked with std 0.
func TestStd(t *testing.T) {
	ok := func(p string, i int32, total float64) tables.Reward {
		return tables.Reward{PromptID: p, SampleIndex: i, Total: total, Status: tables.StatusOK}
	}
	rows := []tables.Reward{ok("a", 0, 1), ok("a", 1, 0), ok("a", 2, 0), ok("a", 3, 1), ok("b", 0, 2), ok("b", 1, 2), ok("c", 0, 5)}
	s := 1 / math.Sqrt(3)
	d := 0.5 / (s + 1e-6)
	for _, tc := range []struct {
		name    string
		o       advantages.Options
		adv     []float64
		stdA    float64
		version string
	}{
		{name: "population", o: advantages.Options{PopulationStd: true}, adv: []float64{0.5 / 0.500001, -0.5 / 0.500001, -0.5 / 0.500001, 0.5 / 0.500001, 0, 0, 0}, stdA: 0.5,
			version: "join-2 epsilon=1e-06 no_std=false keep_zero_std=false"},
		{name: "sample (default)", o: advantages.Options{}, adv: []float64{d, -d, -d, d, 0, 0, 0}, stdA: s,
			version: "join-2 epsilon=1e-06 no_std=false keep_zero_std=false std=sample"},
		{name: "sample with rloo", o: advantages.Options{Estimator: advantages.RLOO}, adv: []float64{2.0 / 3, -2.0 / 3, -2.0 / 3, 2.0 / 3, 0, 0, 0}, stdA: s,
			version: "join-2 epsilon=1e-06 no_std=false keep_zero_std=false std=sample estimator=rloo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adv, st := advantages.Compute(rows, tc.o)
			for i, a := range adv {
				if math.Abs(a.Advantage-tc.adv[i]) > 1e-12 {
					t.Errorf("row %d: advantage %v, want %v", i, a.Advantage, tc.adv[i])
				}
			}
			if math.Abs(adv[0].GroupStd-tc.stdA) > 1e-15 || adv[4].GroupStd != 0 || adv[6].GroupStd != 0 || !adv[6].Mask {
				t.Errorf("group std a %v (want %v), b %v, lone c %+v", adv[0].GroupStd, tc.stdA, adv[4].GroupStd, adv[6])
			}
			if want := (advantages.Stats{Groups: 3, MultiSample: 2, ZeroStd: 1, Masked: 1}); st != want {
				t.Errorf("stats %+v, want %+v", st, want)
			}
			o := advantages.TrainOptions{Options: tc.o}
			if v := o.Version(); v != tc.version {
				t.Fatalf("Version() = %q, want %q", v, tc.version)
			}
			back, err := advantages.ParseVersion(tc.version, advantages.GRPO, advantages.RLOO)
			o.Epsilon = 1e-6
			if err != nil || back != o {
				t.Errorf("ParseVersion = %+v, %v; want %+v", back, err, o)
			}
			if pop, ok := advantages.VersionStd(tc.version); !ok || pop != tc.o.PopulationStd {
				t.Errorf("VersionStd(%q) = %t, %t; want %t, true", tc.version, pop, ok, tc.o.PopulationStd)
			}
		})
	}
}

// TestReinforcePPBaseline runs REINFORCE++'s baseline variant through
// the suite (Group: r − mean), then checks Compute's batch whitening by
// hand: groups {1, 0} and {3, 1, 2} give s = {0.5, −0.5, 1, −1, 0}, mean
// 0, sample variance 2.5/4 = 0.625, so A = s / √(0.625 + 1e-8); the lone
// sample stays masked and out of the batch.
func TestReinforcePPBaseline(t *testing.T) {
	e := advantages.ReinforcePPBaseline
	estimatortest.Run(t, estimatortest.Suite{Estimator: e, ZeroMean: true, Hand: []estimatortest.Group{
		{Rewards: []float64{1, 0, 0, 1}, Want: []float64{0.5, -0.5, -0.5, 0.5}},
	}})
	ok := func(p string, i int32, total float64) tables.Reward {
		return tables.Reward{PromptID: p, SampleIndex: i, Total: total, Status: tables.StatusOK}
	}
	rows := []tables.Reward{ok("a", 0, 1), ok("a", 1, 0), ok("b", 0, 3), ok("b", 1, 1), ok("b", 2, 2), ok("c", 0, 7)}
	adv, _ := advantages.Compute(rows, advantages.Options{Estimator: e})
	d := math.Sqrt(0.625 + 1e-8)
	for i, want := range []float64{0.5 / d, -0.5 / d, 1 / d, -1 / d, 0, 0} {
		if math.Abs(adv[i].Advantage-want) > 1e-12 {
			t.Errorf("row %d: advantage %v, want %v", i, adv[i].Advantage, want)
		}
	}
	if !adv[5].Mask || adv[5].Reason != advantages.ReasonAlone {
		t.Errorf("lone sample %+v, want masked %s", adv[5], advantages.ReasonAlone)
	}
	for _, tc := range []struct {
		name string
		in   []float64
		want []float64
	}{
		{name: "empty batch", in: nil, want: []float64{}},
		{name: "one sample", in: []float64{3}, want: []float64{0}},
		{name: "all equal", in: []float64{2, 2, 2}, want: []float64{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.(advantages.BatchEstimator).Batch(tc.in, advantages.Options{})
			if len(got) != len(tc.want) {
				t.Fatalf("Batch(%v) = %v, want %v", tc.in, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("Batch(%v) = %v, want %v", tc.in, got, tc.want)
				}
			}
		})
	}
}
