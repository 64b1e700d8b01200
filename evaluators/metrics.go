package evaluators

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// ErrKTooLarge is returned when k exceeds the samples drawn per problem:
// pass@k of n samples is only defined for k ≤ n.
var ErrKTooLarge = errors.New("k exceeds the samples per problem")

func checkK(n, c, k int) error {
	switch {
	case k < 1:
		return fmt.Errorf("k is %d; it must be at least 1", k)
	case n < 0 || c < 0 || c > n:
		return fmt.Errorf("%d correct of %d samples is not a count", c, n)
	case k > n:
		return fmt.Errorf("k=%d but only n=%d samples per problem: %w (sample at least k, ideally 2k)", k, n, ErrKTooLarge)
	}
	return nil
}

// binomial is C(n, k) as a float (exact for the sizes evaluation uses).
func binomial(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return math.Round(r)
}

// Wilson is the 95% Wilson score interval of a proportion of successes
// in trials (0, 0 for no trials).
func Wilson(successes, trials float64) (lo, hi float64) {
	if trials <= 0 {
		return 0, 0
	}
	const z = 1.959963984540054
	p := successes / trials
	den := 1 + z*z/trials
	mid := (p + z*z/(2*trials)) / den
	half := z * math.Sqrt(p*(1-p)/trials+z*z/(4*trials*trials)) / den
	return math.Max(0, mid-half), math.Min(1, mid+half)
}

// BootstrapSeed fixes the resampling of Bootstrap so that intervals are
// reproducible.
const BootstrapSeed = 0x65766c

// normalLimit is the number of problems from which Bootstrap uses the
// normal interval, the bootstrap's own limit at that size, instead of
// resampling (which would cost resamples × n draws).
const normalLimit = 5000

// Bootstrap is the 95% percentile bootstrap interval of the mean of
// values (per-problem scores), from resamples resamplings drawn with a
// fixed seed; resamples ≤ 0 means 2,000. From 5,000 values on it is the
// normal interval mean ± 1.96·s/√n, which the bootstrap converges to.
func Bootstrap(values []float64, resamples int) (lo, hi float64) {
	n := len(values)
	if n == 0 {
		return 0, 0
	}
	if n >= normalLimit {
		mean, sq := 0.0, 0.0
		for _, v := range values {
			mean += v
		}
		mean /= float64(n)
		for _, v := range values {
			sq += (v - mean) * (v - mean)
		}
		half := 1.959963984540054 * math.Sqrt(sq/float64(n-1)/float64(n))
		return mean - half, mean + half
	}
	if resamples <= 0 {
		resamples = 2000
	}
	rng := rand.New(rand.NewPCG(BootstrapSeed, uint64(n)))
	means := make([]float64, resamples)
	for r := range means {
		s := 0.0
		for range n {
			s += values[rng.IntN(n)]
		}
		means[r] = s / float64(n)
	}
	sort.Float64s(means)
	at := func(q float64) float64 {
		i := int(math.Floor(q * float64(resamples-1)))
		return means[i]
	}
	return at(0.025), at(0.975)
}
