package grpo_test

import (
	"errors"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// TestValueLossBadInput: a clip range that is not above 0, mismatched
// lengths and a non-finite value are errors.
func TestValueLossBadInput(t *testing.T) {
	one := []grpo.ValueSequence{{Values: []float64{1}, OldValues: []float64{0}, Returns: []float64{1}}}
	for _, tc := range []struct {
		name string
		seqs []grpo.ValueSequence
		o    grpo.ValueLossOptions
		want string
	}{
		{"clip 0", one, grpo.ValueLossOptions{}, "grpo: value clip range 0 must be a number above 0"},
		{"clip NaN", one, grpo.ValueLossOptions{ClipRange: math.NaN()}, "grpo: value clip range NaN must be a number above 0"},
		{"aggregation", one, grpo.ValueLossOptions{ClipRange: 0.2, Aggregation: "median"}, `grpo: unknown aggregation "median"`},
		{"lengths", []grpo.ValueSequence{{Values: []float64{1, 2}, OldValues: []float64{0}, Returns: []float64{1, 1}}}, grpo.ValueLossOptions{ClipRange: 0.2},
			"grpo: sequence 0 has 2 values, 1 old values, 2 returns and 0 mask entries"},
		{"NaN return", []grpo.ValueSequence{{Values: []float64{1}, OldValues: []float64{1}, Returns: []float64{math.NaN()}}}, grpo.ValueLossOptions{ClipRange: 0.2},
			"grpo: value loss NaN over 1 tokens: non-finite loss; the step is not applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grpo.ValueLoss(tc.seqs, tc.o)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.name == "NaN return" && !errors.Is(err, grpo.ErrNonFinite) {
				t.Errorf("%v is not an ErrNonFinite", err)
			}
		})
	}
}
