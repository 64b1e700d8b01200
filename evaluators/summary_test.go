package evaluators

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func samples(answers string, right byte) []tables.EvalSample {
	var out []tables.EvalSample
	for i := 0; i < len(answers); i++ {
		s := tables.EvalSample{SampleIndex: int32(i), Answer: string(answers[i]), Status: tables.StatusOK}
		if answers[i] == 'x' {
			s.Status, s.Answer = tables.StatusInfraError, ""
		}
		if answers[i] == right {
			s.Correct, s.Reward = true, 1
		}
		out = append(out, s)
	}
	return out
}

func TestSummarize(t *testing.T) {
	problems := []Problem{
		{ID: "a", Samples: samples("1122", '1')}, // c=2 of 4
		{ID: "b", Samples: samples("333x", '4')}, // c=0 of 3 (one infra error left out)
	}
	rows, per, err := Summarize("ckpt", "heldout", problems, []int{2, 1}, shipped)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range rows {
		got[r.Metric+"/"+string(rune('0'+r.K))] = r.Value
		if r.NumProblems != 2 || r.Checkpoint != "ckpt" || r.Evalset != "heldout" || r.N != 3 || r.CILow > r.Value || r.CIHigh < r.Value {
			t.Errorf("row %+v", r)
		}
	}
	want := map[string]float64{
		"pass@k/1": (0.5 + 0) / 2, "pass@k/2": (1 - 1.0/6 + 0) / 2,
		"pass^k/1": 0.25, "pass^k/2": (1.0 / 6) / 2,
		"avg@k/1": 0.25, "avg@k/2": 0.25,
		"maj@k/1": 0.25, "maj@k/2": (3.0 / 6) / 2, // pairs of "1122": 11 → 1, 22 → 0, four 12 ties → ½
	}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-12 {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	if len(rows) != 8 || len(per) != 16 {
		t.Errorf("%d rows, %d per-problem values", len(rows), len(per))
	}
	if rows[0].Metric != tables.MetricAvgAtK || rows[0].K != 1 {
		t.Errorf("rows not sorted: first %+v", rows[0])
	}
}

func TestSummarizeKTooLargeNamesProblem(t *testing.T) {
	_, _, err := Summarize("ckpt", "heldout", []Problem{{ID: "p7", Samples: samples("12", '1')}}, []int{4}, shipped)
	if !errors.Is(err, ErrKTooLarge) || !strings.Contains(err.Error(), "problem p7") {
		t.Fatalf("err = %v", err)
	}
}
