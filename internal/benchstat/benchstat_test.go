package benchstat

import (
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{2}, 2},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1.38, 1.51, 1.36}, 1.38},
	} {
		in := slices.Clone(c.xs)
		if got := Median(in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median reordered its input: %v, was %v", in, c.xs)
		}
	}
	if got := Median([]time.Duration{3 * time.Second, time.Second, 2 * time.Second, 4 * time.Second}); got != 2500*time.Millisecond {
		t.Errorf("median of 1..4 s = %v, want 2.5s", got)
	}
}
