package reports

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

// mismatch-kl-high fires at the iterations whose mismatch_kl reaches the
// threshold, folding consecutive ones into one alarm, and ignores
// iterations without the figure.
func TestMismatchKLAlarm(t *testing.T) {
	series := func(kl ...float64) []Health {
		return planted(len(kl), func(i int, h *Health) {
			h.MismatchKL, h.RatioMax, h.StalenessMean = kl[i], 1+10*kl[i], 1
		})
	}
	nan := math.NaN()
	cases := []struct {
		name   string
		health []Health
		opts   *AlarmOptions
		want   []Alarm
	}{
		{"below the default", series(0.055, 0.0074, 0.099), nil, nil},
		{"at and past the default, twice", series(0.01, 0.1, 0.3, 0.02, nan, 0.2), nil, []Alarm{
			{Rule: RuleMismatchKLHigh, Iteration: 2, LastIteration: 3,
				Message:  "train/inference mismatch 0.1000 ≥ 0.1 (largest ratio 2, mean staleness 1): the trainer's policy is far from the one that sampled; lower overlap.max_staleness or the learning rate, or check the sampler's logprobs",
				Evidence: []Evidence{{"mismatch_kl", 0.1}, {"ratio_max", 2}, {"staleness_mean", 1}, {"threshold", 0.1}}},
			{Rule: RuleMismatchKLHigh, Iteration: 6, LastIteration: 6,
				Message:  "train/inference mismatch 0.2000 ≥ 0.1 (largest ratio 3, mean staleness 1): the trainer's policy is far from the one that sampled; lower overlap.max_staleness or the learning rate, or check the sampler's logprobs",
				Evidence: []Evidence{{"mismatch_kl", 0.2}, {"ratio_max", 3}, {"staleness_mean", 1}, {"threshold", 0.1}}},
		}},
		{"a lower threshold", series(0.055, 0.0074), &AlarmOptions{MismatchKLMax: 0.05}, []Alarm{
			{Rule: RuleMismatchKLHigh, Iteration: 1, LastIteration: 1,
				Message:  "train/inference mismatch 0.0550 ≥ 0.05 (largest ratio 1.55, mean staleness 1): the trainer's policy is far from the one that sampled; lower overlap.max_staleness or the learning rate, or check the sampler's logprobs",
				Evidence: []Evidence{{"mismatch_kl", 0.055}, {"ratio_max", 1.55}, {"staleness_mean", 1}, {"threshold", 0.05}}},
		}},
		{"no figure: a trainer that does not write it", series(nan, nan), &AlarmOptions{MismatchKLMax: 1e-9}, nil},
		{"disabled", series(0.5), &AlarmOptions{Disable: []string{RuleMismatchKLHigh}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.health, nil, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var mine []Alarm
			for _, a := range got {
				if a.Rule == RuleMismatchKLHigh {
					mine = append(mine, a)
				}
			}
			if !reflect.DeepEqual(mine, tc.want) {
				t.Errorf("alarms\n%+v\nwant\n%+v", mine, tc.want)
			}
		})
	}
	if _, err := Detect(nil, nil, &AlarmOptions{MismatchKLMax: -1}); !errors.Is(err, ErrInvalidOptions) || err.Error() != "invalid report options: invalid argument: mismatch kl max -1: use a positive threshold" {
		t.Errorf("a negative threshold: %v", err)
	}
}

// The health row takes mismatch_kl and ratio_max from the train metrics
// file; NaN (null in the table) when the file lacks them.
func TestHealthTakesMismatch(t *testing.T) {
	for _, tc := range []struct {
		name            string
		metrics         string
		wantKL, wantMax float64
	}{
		{"both trainers' fields", `{"loss": 0.1, "mismatch_kl": 0.0552, "ratio_max": 3.243}`, 0.0552, 3.243},
		{"an older trainer", `{"loss": 0.1}`, math.NaN(), math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm, err := ParseTrainMetrics([]byte(tc.metrics))
			if err != nil {
				t.Fatal(err)
			}
			h := ComputeHealth(1, nil, nil, tm, nil)
			same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
			if !same(h.MismatchKL, tc.wantKL) || !same(h.RatioMax, tc.wantMax) {
				t.Errorf("mismatch_kl %v ratio_max %v, want %v %v", h.MismatchKL, h.RatioMax, tc.wantKL, tc.wantMax)
			}
		})
	}
}
