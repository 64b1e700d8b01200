package estimatortest

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Group is a group of rewards and the advantages an estimator gives them,
// worked out by hand.
type Group struct {
	Rewards []float64
	// Options are the estimator's (zero: defaults, Epsilon 1e-6).
	Options advantages.Options
	Want    []float64
}

// Suite is an estimator and what it promises.
type Suite struct {
	Estimator advantages.Estimator
	// ZeroMean: every group's advantages sum to 0 (GRPO's, RLOO's).
	ZeroMean bool
	// Hand are groups worked out by hand; at least one.
	Hand []Group
}

// groups are the suite's own reward groups, sizes 2 to 8, with ties, a
// group of equal rewards and negative rewards.
var groups = [][]float64{
	{0, 1},
	{1, 1},
	{0.5, -0.25, 2},
	{1, 0, 0, 1},
	{0.1, 0.2, 0.3, 0.4, 0.5},
	{-1, -1, -1, 0, 0, 3},
	{2, 2, 2, 2, 2, 2, 2},
	{0, 1, 0, 1, 0, 1, 0, 0.75},
}

const tol = 1e-9

// Run runs the suite's scenarios against s.Estimator.
func Run(t *testing.T, s Suite) {
	t.Helper()
	e := s.Estimator
	if e == nil {
		t.Fatal("estimatortest: Suite.Estimator is nil")
	}
	group := func(r []float64, o advantages.Options) []float64 {
		if o.Epsilon == 0 {
			o.Epsilon = 1e-6
		}
		mean, std := advantages.GroupStats(r, o)
		return e.Group(r, mean, std, o)
	}
	t.Run("named", func(t *testing.T) {
		if n := e.Name(); n == "" || strings.ContainsAny(n, " \t\n=") {
			t.Errorf("name %q: want a non-empty word without spaces or =", n)
		}
	})
	t.Run("row per input", func(t *testing.T) {
		for _, g := range groups {
			in := slices.Clone(g)
			if got := group(in, advantages.Options{}); len(got) != len(g) {
				t.Errorf("group %v: %d advantages, want %d", g, len(got), len(g))
			}
			if !slices.Equal(in, g) {
				t.Errorf("group %v: Group changed its input to %v", g, in)
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		for _, g := range groups {
			a, b := group(g, advantages.Options{}), group(g, advantages.Options{})
			if !slices.Equal(a, b) {
				t.Errorf("group %v: %v, then %v", g, a, b)
			}
		}
	})
	t.Run("finite", func(t *testing.T) {
		for _, g := range groups {
			for _, o := range []advantages.Options{{}, {NoStd: true}} {
				for i, a := range group(g, o) {
					if math.IsNaN(a) || math.IsInf(a, 0) {
						t.Errorf("group %v (%+v): advantage %d is %v", g, o, i, a)
					}
				}
			}
		}
	})
	if s.ZeroMean {
		t.Run("zero mean", func(t *testing.T) {
			for _, g := range groups {
				sum := 0.0
				for _, a := range group(g, advantages.Options{}) {
					sum += a
				}
				if math.Abs(sum) > tol {
					t.Errorf("group %v: advantages sum to %g, want 0", g, sum)
				}
			}
		})
	}
	t.Run("hand computed", func(t *testing.T) {
		if len(s.Hand) == 0 {
			t.Fatal("Suite.Hand is empty: give at least one group worked out by hand")
		}
		for _, h := range s.Hand {
			got := group(h.Rewards, h.Options)
			if len(got) != len(h.Want) {
				t.Fatalf("group %v: %v, want %v", h.Rewards, got, h.Want)
			}
			for i := range got {
				if math.Abs(got[i]-h.Want[i]) > tol {
					t.Errorf("group %v (%+v): advantage %d is %v, want %v", h.Rewards, h.Options, i, got[i], h.Want[i])
				}
			}
		}
	})
	t.Run("through Compute", func(t *testing.T) {
		ok := func(p string, i int32, total float64) tables.Reward {
			return tables.Reward{PromptID: p, SampleIndex: i, Total: total, Status: tables.StatusOK}
		}
		rows := []tables.Reward{
			ok("b", 0, 1), ok("a", 0, 0.5), ok("b", 1, 0),
			{PromptID: "a", SampleIndex: 1, Status: "error"},
			ok("a", 2, 2), ok("c", 0, 1), ok("b", 2, 1),
		}
		adv, st := advantages.Compute(rows, advantages.Options{Estimator: e})
		if len(adv) != len(rows) {
			t.Fatalf("%d rows for %d rewards", len(adv), len(rows))
		}
		for i, a := range adv {
			if a.PromptID != rows[i].PromptID || a.SampleIndex != rows[i].SampleIndex {
				t.Errorf("row %d is %s/%d, want %s/%d (input order)", i, a.PromptID, a.SampleIndex, rows[i].PromptID, rows[i].SampleIndex)
			}
		}
		if !adv[3].Mask || !strings.HasPrefix(adv[3].Reason, advantages.ReasonRewardStatus) {
			t.Errorf("unscored sample: %+v, want masked %s…", adv[3], advantages.ReasonRewardStatus)
		}
		critic := advantages.NeedsCritic(e)
		// c's lone sample is no zero-variance group: a group of one has
		// no spread to be zero.
		wantStats := advantages.Stats{Groups: 3, MultiSample: 2, ZeroStd: 0, Masked: 2}
		if critic {
			// A critic's baseline is its value: a lone sample trains.
			wantStats.Masked = 1
			if lone := group([]float64{1}, advantages.Options{}); adv[5].Mask || adv[5].Advantage != lone[0] {
				t.Errorf("lone sample under a critic: %+v, want unmasked with advantage %v", adv[5], lone[0])
			}
		} else if !adv[5].Mask || adv[5].Reason != advantages.ReasonAlone {
			t.Errorf("lone sample: %+v, want masked %s", adv[5], advantages.ReasonAlone)
		}
		if st != wantStats {
			t.Errorf("stats %+v, want %+v", st, wantStats)
		}
		// Group's values of b and a; a BatchEstimator's Batch of them, in
		// row order (b/0, a/0, b/1, a/2, b/2).
		wantB, wantA := group([]float64{1, 0, 1}, advantages.Options{}), group([]float64{0.5, 2}, advantages.Options{})
		unmasked := []int{0, 1, 2, 4, 6}
		want := []float64{wantB[0], wantA[0], wantB[1], wantA[1], wantB[2]}
		if be, ok := e.(advantages.BatchEstimator); ok {
			want = be.Batch(want, advantages.Options{Epsilon: 1e-6})
		}
		for j, i := range unmasked {
			if adv[i].Advantage != want[j] || adv[i].Mask {
				t.Errorf("%s/%d: %+v, want advantage %v unmasked", adv[i].PromptID, adv[i].SampleIndex, adv[i], want[j])
			}
		}
	})
}

// Half is GRPO's advantages halved, named "half": an estimator other than
// the shipped one, for tests that check an estimator reaches the code
// that uses it (the version, rescoring) and that the suite accepts one.
var Half advantages.Estimator = half{}

type half struct{}

func (half) Name() string { return "half" }
func (half) Group(r []float64, mean, std float64, o advantages.Options) []float64 {
	out := advantages.GRPO.Group(r, mean, std, o)
	for i := range out {
		out[i] /= 2
	}
	return out
}
