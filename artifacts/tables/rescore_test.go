package tables

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func rw(pid string, idx int32, total float64, comps map[string]float64) Reward {
	return Reward{PromptID: pid, SampleIndex: idx, Total: total, Components: comps, Status: StatusOK}
}

func TestCompare(t *testing.T) {
	old := []IterationRewards{{Iteration: 1, Rows: []Reward{
		rw("a", 0, 1, map[string]float64{"correct": 1}), rw("a", 1, 1, map[string]float64{"correct": 1}), // zero variance
		rw("b", 0, 0, map[string]float64{"correct": 0}), rw("b", 1, 1, map[string]float64{"correct": 1}), // non-zero
		{PromptID: "c", SampleIndex: 0, Status: "skipped: timeout", Total: math.NaN()},
	}}}
	newer := []IterationRewards{{Iteration: 1, Rows: []Reward{
		rw("a", 0, 1.2, map[string]float64{"correct": 1, "format": 1}), rw("a", 1, 1, map[string]float64{"correct": 1, "format": 0}),
		rw("b", 0, 0, map[string]float64{"correct": 0, "format": 0}), rw("b", 1, 1, map[string]float64{"correct": 1, "format": 0}),
		{PromptID: "c", SampleIndex: 0, Status: "skipped: timeout", Total: math.NaN()},
	}}}
	c := CompareRewards(old, newer, 10)
	if c.Samples != 5 || c.Scored != 4 || c.Changed != 1 || c.Groups != 2 || c.ZeroToNonzeroGroups != 1 || c.NonzeroToZeroGroups != 0 {
		t.Fatalf("comparison = %+v", c)
	}
	if len(c.Top) != 1 || c.Top[0].PromptID != "a" || c.Top[0].SampleIndex != 0 || math.Abs(c.Top[0].Delta-0.2) > 1e-12 {
		t.Fatalf("top changes = %+v", c.Top)
	}
	if len(c.Components) != 3 || c.Components[0].Name != "correct" || c.Components[1].Name != "format" || c.Components[1].Old != nil || c.Components[2].Name != "total" {
		t.Fatalf("components = %+v", c.Components)
	}
	if f := c.Components[1].New; f.N != 4 || f.Mean != 0.25 || f.Max != 1 {
		t.Fatalf("format stats = %+v", f)
	}
	// Old totals 1,1,0,1 and new 1.2,1,0,1: ranks (3,3,1,3) and (4,2.5,1,2.5).
	if math.Abs(c.Spearman-0.8164965809) > 1e-9 {
		t.Fatalf("spearman = %v", c.Spearman)
	}
}

func TestSpearmanEdgeCases(t *testing.T) {
	if !math.IsNaN(spearman([]float64{1, 1}, []float64{0, 1})) {
		t.Fatal("constant side should give NaN")
	}
	if s := spearman([]float64{1, 2, 3}, []float64{30, 20, 10}); s != -1 {
		t.Fatalf("reversed ranks = %v, want -1", s)
	}
}

// TestRewardScored: a row counts when it says ok and its total is a
// finite number; one that says ok over a NaN or infinite total (a
// command's table) reads as nonfinite.
func TestRewardScored(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       Reward
		want    bool
		outcome string
	}{
		{"ok", Reward{Status: StatusOK, Total: 0}, true, StatusOK},
		{"ok but NaN", Reward{Status: StatusOK, Total: math.NaN()}, false, RewardNonfinite},
		{"ok but +Inf", Reward{Status: StatusOK, Total: math.Inf(1)}, false, RewardNonfinite},
		{"ok but -Inf", Reward{Status: StatusOK, Total: math.Inf(-1)}, false, RewardNonfinite},
		{"nonfinite", Reward{Status: RewardNonfinite, Total: math.NaN()}, false, RewardNonfinite},
		{"error", Reward{Status: "error", Total: 1}, false, "error"},
		{"skipped", Reward{Status: "skipped: timeout", Total: math.NaN()}, false, "skipped: timeout"},
	} {
		if got := tc.r.Scored(); got != tc.want {
			t.Errorf("%s: Scored() = %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.r.Outcome(); got != tc.outcome {
			t.Errorf("%s: Outcome() = %q, want %q", tc.name, got, tc.outcome)
		}
	}
	rows := []Reward{{Status: StatusOK, Total: 1}, {Status: StatusOK, Total: math.Inf(1)}, {Status: StatusOK, Total: 2}}
	if mean, n := MeanTotal(rows); mean != 1.5 || n != 2 {
		t.Errorf("MeanTotal = %v over %d, want 1.5 over the 2 finite rows", mean, n)
	}
}

// A constant side has no rank correlation: the report says null, and
// reads back as NaN, rather than failing to encode (JSON has no NaN).
func TestRewardComparisonJSONWithoutSpearman(t *testing.T) {
	for _, rho := range []float64{math.NaN(), 0.75} {
		c := RewardComparison{Samples: 3, Scored: 3, Spearman: rho, Components: []ComponentShift{}, Top: []RewardChange{}}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("spearman %v: %v", rho, err)
		}
		want := `"spearman":0.75`
		if math.IsNaN(rho) {
			want = `"spearman":null`
		}
		if !strings.Contains(string(b), want) || strings.Count(string(b), `"spearman"`) != 1 {
			t.Errorf("spearman %v: %s, want %s once", rho, b, want)
		}
		var back RewardComparison
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Samples != 3 || (math.IsNaN(rho) != math.IsNaN(back.Spearman)) || (!math.IsNaN(rho) && back.Spearman != rho) {
			t.Errorf("read back %+v from %s", back, b)
		}
	}
}
