package metrictest

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// Monotone is how a metric moves as k grows.
type Monotone int

const (
	// Free: no promise (avg@k is flat, maj@k may go either way).
	Free Monotone = iota
	// Rising: never falls as k grows (pass@k).
	Rising
	// Falling: never rises as k grows (pass^k).
	Falling
)

// Case is a problem worked out by hand. Correct has a character per
// sample: '1' correct (answer "42", reward 1), '0' wrong (answer "7",
// reward 0), '-' wrong without an answer; Answers, when set, replaces
// the answers.
type Case struct {
	Correct string
	Answers []string
	K       int
	Want    float64
}

// Suite is a metric and what it promises.
type Suite struct {
	Metric   kind.Metric
	Monotone Monotone
	// Hand are problems worked out by hand; at least one.
	Hand []Case
}

// Samples are the samples a Correct pattern of Case describes.
func Samples(pattern string) kind.MetricSamples {
	var s kind.MetricSamples
	for _, c := range pattern {
		s.Correct = append(s.Correct, c == '1')
		switch c {
		case '1':
			s.Answers, s.Rewards = append(s.Answers, "42"), append(s.Rewards, 1)
		case '0':
			s.Answers, s.Rewards = append(s.Answers, "7"), append(s.Rewards, 0)
		default:
			s.Answers, s.Rewards = append(s.Answers, ""), append(s.Rewards, 0)
		}
	}
	return s
}

// patterns are the suite's problems.
var patterns = []string{"1", "0", "10", "01", "111", "000", "1-0", "1100", "0-0-1", "101010", "0000001", "11111110", "1-1-0-00"}

// Run runs the suite's scenarios against s.Metric; values agree within
// 1e-12.
func Run(t *testing.T, s Suite) {
	t.Helper()
	const tol = 1e-12
	m := s.Metric
	if m == nil || len(s.Hand) == 0 {
		t.Fatal("metrictest: Suite.Metric and a Suite.Hand case are required")
	}
	value := func(t *testing.T, p string, k int) float64 {
		t.Helper()
		v, err := m.Value(Samples(p), k)
		if err != nil {
			t.Fatalf("%s at k=%d: %v", p, k, err)
		}
		return v
	}
	t.Run("named", func(t *testing.T) {
		if n := m.Name(); n == "" || strings.ContainsAny(n, " \t\n") {
			t.Errorf("name %q: want a non-empty word without spaces", n)
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		for _, p := range patterns {
			for k := 1; k <= len(p); k++ {
				in := Samples(p)
				a, errA := m.Value(in, k)
				b, errB := m.Value(in, k)
				if math.Float64bits(a) != math.Float64bits(b) || (errA == nil) != (errB == nil) {
					t.Errorf("%s at k=%d: %v (%v), then %v (%v)", p, k, a, errA, b, errB)
				}
				if want := Samples(p); !slices.Equal(in.Correct, want.Correct) || !slices.Equal(in.Answers, want.Answers) || !slices.Equal(in.Rewards, want.Rewards) {
					t.Errorf("%s at k=%d: Value changed its samples", p, k)
				}
			}
		}
	})
	t.Run("in range", func(t *testing.T) {
		for _, p := range patterns {
			for k := 1; k <= len(p); k++ {
				v := value(t, p, k)
				switch {
				case v < 0 || v > 1 || math.IsNaN(v):
					t.Errorf("%s at k=%d: %v, want a value in [0, 1]", p, k, v)
				case !strings.ContainsAny(p, "0-") && v != 1:
					t.Errorf("%s at k=%d: %v with every sample correct, want 1", p, k, v)
				case !strings.Contains(p, "1") && v != 0:
					t.Errorf("%s at k=%d: %v with no sample correct, want 0", p, k, v)
				}
			}
		}
	})
	t.Run("k too large", func(t *testing.T) {
		for _, p := range patterns {
			if _, err := m.Value(Samples(p), len(p)+1); !errors.Is(err, evaluators.ErrKTooLarge) {
				t.Errorf("%s at k=%d: %v, want evaluators.ErrKTooLarge", p, len(p)+1, err)
			}
		}
	})
	if s.Monotone != Free {
		t.Run("monotone in k", func(t *testing.T) {
			for _, p := range patterns {
				prev := value(t, p, 1)
				for k := 2; k <= len(p); k++ {
					v := value(t, p, k)
					if (s.Monotone == Rising && v < prev-tol) || (s.Monotone == Falling && v > prev+tol) {
						t.Errorf("%s: %v at k=%d after %v at k=%d", p, v, k, prev, k-1)
					}
					prev = v
				}
			}
		})
	}
	t.Run("hand computed", func(t *testing.T) {
		for _, h := range s.Hand {
			in := Samples(h.Correct)
			if h.Answers != nil {
				in.Answers = h.Answers
			}
			v, err := m.Value(in, h.K)
			if err != nil || math.Abs(v-h.Want) > tol {
				t.Errorf("%s (answers %q) at k=%d: %v, %v; want %v", h.Correct, in.Answers, h.K, v, err, h.Want)
			}
		}
	})
}
