package advantages_test

import (
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/advantages/estimatortest"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestGAEEstimator runs the gae entry through the suite: its advantage
// through Compute is the reward itself (the trainer makes it per token),
// and a lone sample trains.
func TestGAEEstimator(t *testing.T) {
	estimatortest.Run(t, estimatortest.Suite{Estimator: advantages.GAEEstimator, Hand: []estimatortest.Group{
		{Rewards: []float64{1, 0, 0, 1}, Want: []float64{1, 0, 0, 1}},
		{Rewards: []float64{0.5, -0.25}, Options: advantages.Options{Gamma: 0.9, Lambda: 0.5}, Want: []float64{0.5, -0.25}},
	}})
	if !advantages.NeedsCritic(advantages.GAEEstimator) || advantages.NeedsCritic(advantages.RLOO) || advantages.NeedsCritic(nil) {
		t.Error("NeedsCritic: want true for gae only")
	}
}

// TestGAEVersion: γ and λ enter the version under gae, and read back.
func TestGAEVersion(t *testing.T) {
	o := advantages.TrainOptions{Options: advantages.Options{Estimator: advantages.GAEEstimator, Gamma: 0.99, Lambda: 0.95}}
	const want = "join-2 epsilon=1e-06 no_std=false keep_zero_std=false estimator=gae gamma=0.99 lambda=0.95"
	if v := o.Version(); v != want {
		t.Fatalf("Version() = %q, want %q", v, want)
	}
	back, err := advantages.ParseVersion(want, advantages.GAEEstimator)
	o.Epsilon = 1e-6
	if err != nil || back != o {
		t.Errorf("ParseVersion = %+v, %v; want %+v", back, err, o)
	}
	if _, err := advantages.ParseVersion(want[:len(want)-len(" lambda=0.95")], advantages.GAEEstimator); err == nil {
		t.Error("a gae version without lambda read back")
	}
}

// TestGAEJoinKeepsUniformGroups: under GAE a group whose rewards are all
// equal still trains (its rewards differ from the critic's values).
func TestGAEJoinKeepsUniformGroups(t *testing.T) {
	trajs := []tables.Trajectory{
		{PromptID: "a", SampleIndex: 0, Status: tables.StatusOK, TokenIDs: []int32{4, 5}},
		{PromptID: "a", SampleIndex: 1, Status: tables.StatusOK, TokenIDs: []int32{4, 6}},
	}
	rewards := []tables.Reward{
		{PromptID: "a", SampleIndex: 0, Total: 1, Status: tables.StatusOK},
		{PromptID: "a", SampleIndex: 1, Total: 1, Status: tables.StatusOK},
	}
	for _, tc := range []struct {
		e      advantages.Estimator
		masked bool
	}{{advantages.GRPO, true}, {advantages.GAEEstimator, false}} {
		b, err := advantages.Join(trajs, rewards, advantages.TrainOptions{Options: advantages.Options{Estimator: tc.e}})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range b.Advantages {
			if a.Mask != tc.masked {
				t.Errorf("%s: %+v, want mask %t", tc.e.Name(), a, tc.masked)
			}
		}
	}
}

// TestGAE checks GAE by hand. One sequence of three tokens, reward 1 on
// the last, values 0.5, 0.25, 0.75, γ 0.9, λ 0.8:
//
//	t=2: δ = 1 − 0.75 = 0.25;                A = 0.25
//	t=1: δ = 0.9·0.75 − 0.25 = 0.425;        A = 0.425 + 0.72·0.25 = 0.605
//	t=0: δ = 0.9·0.25 − 0.5 = −0.275;        A = −0.275 + 0.72·0.605 = 0.1606
//
// With token 1 an observation (not trainable), t=0 sees t=2's value and
// advantage across it: δ = 0.9·0.75 − 0.5 = 0.175, A = 0.175 + 0.72·0.25
// = 0.355.
func TestGAE(t *testing.T) {
	r, v := []float64{0, 0, 1}, []float64{0.5, 0.25, 0.75}
	for _, tc := range []struct {
		name      string
		trainable []bool
		adv       []float64
	}{
		{"every token", nil, []float64{0.1606, 0.605, 0.25}},
		{"an observation carried across", []bool{true, false, true}, []float64{0.355, 0.25, 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adv, ret := advantages.GAE(r, v, tc.trainable, 0.9, 0.8)
			for i := range adv {
				if math.Abs(adv[i]-tc.adv[i]) > 1e-12 || math.Abs(ret[i]-(tc.adv[i]+v[i])) > 1e-12 {
					t.Errorf("token %d: advantage %v return %v, want %v and %v", i, adv[i], ret[i], tc.adv[i], tc.adv[i]+v[i])
				}
			}
		})
	}
	// γ = λ = 1 with zero values: every token's advantage is the reward
	// to come, the outcome.
	adv, _ := advantages.GAE([]float64{0, 0, 2}, []float64{0, 0, 0}, nil, 1, 1)
	for i, a := range adv {
		if a != 2 {
			t.Errorf("γ=λ=1, V=0: token %d advantage %v, want 2", i, a)
		}
	}
}

// TestWhiten: mean 0 and unbiased variance 1 over the marked entries,
// an unmarked entry scaled alike, and a single entry only centred.
func TestWhiten(t *testing.T) {
	xs := [][]float64{{1, 2}, {3, 100}}
	advantages.Whiten(xs, [][]bool{nil, {true, false}})
	// Marked 1, 2, 3: mean 2, unbiased variance 1.
	s := 1 / math.Sqrt(1+1e-8)
	want := [][]float64{{-s, 0}, {s, 98 * s}}
	for i := range xs {
		for j := range xs[i] {
			if math.Abs(xs[i][j]-want[i][j]) > 1e-12 {
				t.Errorf("xs[%d][%d] = %v, want %v", i, j, xs[i][j], want[i][j])
			}
		}
	}
	one := [][]float64{{5}}
	advantages.Whiten(one, nil)
	if one[0][0] != 0 {
		t.Errorf("one entry: %v, want 0", one[0][0])
	}
}

// TestExplainedVariance: 1 for perfect values, 0 for their mean, NaN
// when the returns do not vary.
func TestExplainedVariance(t *testing.T) {
	ret := [][]float64{{1, 2}, {3}}
	for _, tc := range []struct {
		name   string
		values [][]float64
		want   float64
	}{
		{"perfect", [][]float64{{1, 2}, {3}}, 1},
		{"the mean", [][]float64{{2, 2}, {2}}, 0},
		{"an offset", [][]float64{{0, 1}, {2}}, 1},
	} {
		if got := advantages.ExplainedVariance(tc.values, ret, nil); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := advantages.ExplainedVariance([][]float64{{0, 1}}, [][]float64{{1, 1}}, nil); !math.IsNaN(got) {
		t.Errorf("constant returns: %v, want NaN", got)
	}
}
