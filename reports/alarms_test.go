package reports

import (
	"errors"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// planted is a run of n iterations, healthy unless set changes it: reward
// 0.5 (with a little alternating noise), length 10, entropy 1, KL 0.01,
// top share 0.05.
// from sets what set sets on the iterations from index at on (iteration
// at+1): a change planted at one iteration.
func from(at int, set func(h *Health)) func(int, *Health) {
	return func(i int, h *Health) {
		if i >= at {
			set(h)
		}
	}
}

func planted(n int, set func(i int, h *Health)) []Health {
	out := make([]Health, n)
	for i := range out {
		h := ComputeHealth(i+1, nil, nil, nil, nil)
		noise := 0.01 * float64(i%2*2-1)
		h.Reward = Stat{Count: 64, Mean: 0.5 + noise, Std: 0.3, Min: 0, Max: 1}
		h.LengthMean, h.CharsMean, h.FracLength = 10, 40, 0
		h.Entropy, h.KL, h.TopShare, h.TopPrompts = 1, 0.01, 0.05, 1
		if set != nil {
			set(i, &h)
		}
		out[i] = h
	}
	return out
}

func evalsAt(set string, metric string, values map[int]float64) []Eval {
	var out []Eval
	for _, it := range []int{0, 5, 10, 15, 20, 25, 30} {
		if v, ok := values[it]; ok {
			out = append(out, Eval{Iteration: it, Set: set, Metrics: map[string]float64{metric: v}})
		}
	}
	return out
}

func TestAlarmRules(t *testing.T) {
	for _, c := range []struct {
		name   string
		health []Health
		evals  []Eval
		want   []Alarm // rule, iteration, last iteration
	}{
		{
			name:   "healthy run",
			health: planted(30, nil),
			evals:  evalsAt("heldout", "pass@1", map[int]float64{0: 0.4, 10: 0.45, 20: 0.5, 30: 0.52}),
		},
		{
			name:   "reward up, held-out flat",
			health: planted(30, func(i int, h *Health) { h.Reward.Mean += 0.02 * float64(i) }),
			evals:  evalsAt("heldout", MetricExact, map[int]float64{0: 0.40, 10: 0.40, 20: 0.398, 30: 0.45}),
			want:   []Alarm{{Rule: RuleRewardUpHeldoutFlat, Iteration: 10, LastIteration: 20}},
		},
		{
			name:   "reward up with held-out up",
			health: planted(30, func(i int, h *Health) { h.Reward.Mean += 0.02 * float64(i) }),
			evals:  evalsAt("heldout", "pass@1", map[int]float64{0: 0.40, 10: 0.45, 20: 0.5, 30: 0.55}),
		},
		{
			name:   "length drifts up",
			health: planted(20, from(10, func(h *Health) { h.LengthMean = 30 })),
			// Window 11-15 has mean (10+10+10+30+30)/5 = 18 = 1.8 × 10.
			want: []Alarm{{Rule: RuleLengthDriftUp, Iteration: 12, LastIteration: 20}},
		},
		{
			name:   "length collapses",
			health: planted(20, from(10, func(h *Health) { h.LengthMean = 2 })),
			// Window 10-14: (10+2+2+2+2)/5 = 3.6 ≤ 5.
			want: []Alarm{{Rule: RuleLengthCollapse, Iteration: 14, LastIteration: 20}},
		},
		{
			name: "format without correctness",
			health: planted(20, func(i int, h *Health) {
				h.FormatMean, h.CorrectMean, h.FormatWithoutCorrect = 0.2+0.04*float64(i), 0.3, 0.04*float64(i)
			}),
			// Checked from iteration 10 on, where the window's format mean is
			// 0.48 against a baseline of 0.28, correctness flat at 0.3.
			want: []Alarm{{Rule: RuleFormatWithoutCorrectness, Iteration: 10, LastIteration: 20}},
		},
		{
			name: "format rises with correctness",
			health: planted(20, func(i int, h *Health) {
				h.FormatMean, h.CorrectMean = 0.2+0.04*float64(i), 0.3+0.04*float64(i)
			}),
		},
		{
			name: "judge and verifier disagree",
			health: planted(20, func(i int, h *Health) {
				h.Disagreement = 0.05
				if i >= 12 {
					h.Disagreement = 0.5
				}
			}),
			// Window 10-14: (0.05·3+0.5·2)/5 = 0.23; window 9-13 has 0.14.
			want: []Alarm{{Rule: RuleJudgeVerifierDisagreement, Iteration: 14, LastIteration: 20}},
		},
		{
			name:   "entropy collapses",
			health: planted(20, from(10, func(h *Health) { h.Entropy = 0.05 })),
			// Window 10-14 has mean (1+0.05·4)/5 = 0.24 ≤ 0.3 (9-13: 0.43).
			want: []Alarm{{Rule: RuleEntropyCollapse, Iteration: 14, LastIteration: 20}},
		},
		{
			name: "KL accelerates",
			health: planted(20, func(i int, h *Health) {
				h.KL = 0.01 + 0.0001*float64(i)
				if i >= 10 {
					h.KL += 0.002 * float64((i-9)*(i-9))
				}
			}),
			want: []Alarm{{Rule: RuleKLAccelerating, Iteration: 12, LastIteration: 20}},
		},
		{
			name: "KL grows steadily",
			health: planted(20, func(i int, h *Health) {
				h.KL = 0.01 + 0.005*float64(i)
			}),
		},
		{
			name:   "a completion dominates",
			health: planted(12, from(6, func(h *Health) { h.TopShare, h.TopPrompts, h.TopCompletion = 0.9, 12, "I cannot answer." })),
			// Window 4-8: (0.05·2+0.9·3)/5 = 0.56.
			want: []Alarm{{Rule: RuleCompletionsDominate, Iteration: 9, LastIteration: 12}},
		},
		{
			name: "one prompt answered the same way is not domination",
			health: planted(12, func(i int, h *Health) {
				h.TopShare, h.TopPrompts = 0.9, 1
			}),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Detect(c.health, c.evals, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("alarms = %+v, want %+v", got, c.want)
			}
			for i, w := range c.want {
				g := got[i]
				if g.Rule != w.Rule || g.Iteration != w.Iteration || g.LastIteration != w.LastIteration {
					t.Errorf("alarm %d = %s at %d-%d, want %s at %d-%d (%s)", i, g.Rule, g.Iteration, g.LastIteration, w.Rule, w.Iteration, w.LastIteration, g.Message)
				}
				if g.Message == "" || len(g.Evidence) == 0 {
					t.Errorf("alarm %d has no message or evidence: %+v", i, g)
				}
				for _, e := range g.Evidence {
					if math.IsNaN(e.Value) {
						t.Errorf("alarm %d evidence %s is NaN", i, e.Name)
					}
				}
			}
		})
	}
}

func TestAlarmEvidence(t *testing.T) {
	h := planted(30, func(i int, h *Health) { h.Reward.Mean = 0.2 + 0.02*float64(i) })
	got, err := Detect(h, evalsAt("heldout", "pass@1", map[int]float64{0: 0.4, 10: 0.39}), nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("alarms = %+v, %v", got, err)
	}
	ev := map[string]float64{}
	for _, e := range got[0].Evidence {
		ev[e.Name] = e.Value
	}
	// Iterations 1-5 (the starting policy's window) have reward 0.2-0.28,
	// iterations 6-10 0.3-0.38: a gain of exactly 0.1.
	if math.Abs(ev["reward_gain"]-0.1) > 1e-9 || math.Abs(ev["heldout_gain"]+0.01) > 1e-9 || ev["from_checkpoint"] != 0 {
		t.Fatalf("evidence = %v", ev)
	}
	want := "training reward rose +0.100 (0.240 → 0.340) between checkpoints 0 and 10 while held-out pass@1 on heldout moved -0.0100 (0.4000 → 0.3900)"
	if got[0].Message != want {
		t.Fatalf("message:\n%s\nwant\n%s", got[0].Message, want)
	}
}

func TestAlarmOptions(t *testing.T) {
	h := planted(20, from(10, func(h *Health) { h.LengthMean, h.Entropy = 30, 0.05 }))
	all, err := Detect(h, nil, nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("alarms = %+v, %v", all, err)
	}
	some, err := Detect(h, nil, &AlarmOptions{Disable: []string{RuleEntropyCollapse}})
	if err != nil || len(some) != 1 || some[0].Rule != RuleLengthDriftUp {
		t.Fatalf("with entropy disabled: %+v, %v", some, err)
	}
	// A stricter growth threshold (4×) lets a 3× drift pass.
	if got, _ := Detect(h, nil, &AlarmOptions{LengthGrowth: 4, Disable: []string{RuleEntropyCollapse}}); len(got) != 0 {
		t.Fatalf("with growth 4: %+v", got)
	}
	for name, o := range map[string]AlarmOptions{
		"window":   {Window: -1},
		"growth":   {LengthGrowth: 0.5},
		"collapse": {LengthCollapse: 2},
		"share":    {TopShare: 1.5},
		"rule":     {Disable: []string{"nope"}},
		"entropy":  {EntropyCollapse: 1},
		"eval lag": {EvalLag: -2},
	} {
		if _, err := Detect(h, nil, &o); !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, artifacts.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions", name, err)
		}
	}
}

func TestDetectDeterministic(t *testing.T) {
	h := planted(30, func(i int, h *Health) {
		h.Reward.Mean += 0.02 * float64(i)
		if i >= 10 {
			h.LengthMean, h.Entropy = 30, 0.05
		}
	})
	ev := evalsAt("heldout", "pass@1", map[int]float64{0: 0.4, 10: 0.4, 20: 0.4})
	a, _ := Detect(h, ev, nil)
	// Reversed input order gives the same alarms.
	r := make([]Health, len(h))
	for i := range h {
		r[len(h)-1-i] = h[i]
	}
	b, _ := Detect(r, ev, nil)
	if len(a) != 3 || len(a) != len(b) {
		t.Fatalf("alarms %d and %d: %+v", len(a), len(b), a)
	}
	for i := range a {
		if a[i].Rule != b[i].Rule || a[i].Iteration != b[i].Iteration || a[i].Message != b[i].Message {
			t.Fatalf("alarm %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}
