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

// PassAtK is the unbiased estimator of pass@k from n samples of which c
// are correct: 1 − C(n−c, k)/C(n, k), the probability that k samples
// drawn without replacement include a correct one. It is computed as the
// product 1 − Π_{i=n−c+1..n} (1 − k/i), which stays exact where the
// binomials overflow; it is 1 when n − c < k.
func PassAtK(n, c, k int) (float64, error) {
	if err := checkK(n, c, k); err != nil {
		return 0, err
	}
	if n-c < k {
		return 1, nil
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod, nil
}

// PassHatK is pass^k: the probability that k samples drawn without
// replacement are all correct, C(c, k)/C(n, k) = Π_{i<k} (c−i)/(n−i).
func PassHatK(n, c, k int) (float64, error) {
	if err := checkK(n, c, k); err != nil {
		return 0, err
	}
	if c < k {
		return 0, nil
	}
	prod := 1.0
	for i := 0; i < k; i++ {
		prod *= float64(c-i) / float64(n-i)
	}
	return prod, nil
}

// majExactLimit bounds the k-subsets MajAtK enumerates; beyond it the
// estimate is a seeded Monte Carlo average over that many subsets.
const majExactLimit = 20000

// MajAtK is the expected accuracy of majority voting over k of the n
// samples, drawn without replacement: over every k-subset, the vote's
// most frequent answer is right (a tie among the most frequent answers
// counts as the right answers' share of the tie; an empty answer never
// votes; an answer is right when a correct sample gives it). answers[i]
// is sample i's extracted answer and correct[i] whether it is right.
// Exact when the ways to split k votes among the g distinct answers (one
// more group for empty answers), C(k+g−1, g−1), are at most 20,000;
// otherwise averaged over 20,000 subsets drawn with a fixed seed
// (deterministic).
func MajAtK(answers []string, correct []bool, k int) (float64, error) {
	n := len(answers)
	if len(correct) != n {
		return 0, fmt.Errorf("maj@k: %d answers but %d correctness flags", n, len(correct))
	}
	c := 0
	for _, ok := range correct {
		if ok {
			c++
		}
	}
	if err := checkK(n, c, k); err != nil {
		return 0, err
	}
	// Intern answers; an answer is right when a correct sample gives it.
	ids := map[string]int{}
	var right []bool
	anyRight := false
	votes := make([]int, n)
	for i, a := range answers {
		if a == "" {
			votes[i] = -1
			continue
		}
		id, ok := ids[a]
		if !ok {
			id = len(ids)
			ids[a] = id
			right = append(right, false)
		}
		votes[i] = id
		if correct[i] {
			right[id], anyRight = true, true
		}
	}
	if !anyRight {
		return 0, nil
	}
	// Group the samples by answer (empties in one group that never votes):
	// a k-subset matters only through how many samples it takes from each
	// group, so the expectation is a sum over count vectors x (Σx = k,
	// x_g ≤ count_g) weighted by Π C(count_g, x_g) — far fewer terms than
	// subsets when answers repeat.
	type group struct {
		count int
		right bool
		votes bool
	}
	groups := make([]group, len(ids))
	empty := 0
	for _, v := range votes {
		if v < 0 {
			empty++
			continue
		}
		groups[v].count++
		groups[v].votes = true
		groups[v].right = right[v]
	}
	if empty > 0 {
		groups = append(groups, group{count: empty})
	}
	score := func(x []int) float64 {
		top, ties, good := 0, 0, 0
		for g, c := range x {
			if !groups[g].votes || c == 0 {
				continue
			}
			switch {
			case c > top:
				top, ties, good = c, 1, 0
			case c == top:
				ties++
			default:
				continue
			}
			if groups[g].right {
				good++
			}
		}
		if top == 0 {
			return 0
		}
		return float64(good) / float64(ties)
	}
	if binomial(k+len(groups)-1, len(groups)-1) <= majExactLimit {
		x := make([]int, len(groups))
		sum := 0.0
		var rec func(g, left int, w float64)
		rec = func(g, left int, w float64) {
			if g == len(groups)-1 {
				if left > groups[g].count {
					return
				}
				x[g] = left
				sum += w * binomial(groups[g].count, left) * score(x)
				return
			}
			for c := 0; c <= min(left, groups[g].count); c++ {
				x[g] = c
				rec(g+1, left-c, w*binomial(groups[g].count, c))
			}
		}
		rec(0, k, 1)
		return sum / binomial(n, k), nil
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(k)))
	perm := make([]int, n)
	x := make([]int, len(groups))
	member := make([]int, n) // sample → group
	for i, v := range votes {
		if v < 0 {
			member[i] = len(groups) - 1
		} else {
			member[i] = v
		}
	}
	sum := 0.0
	for range majExactLimit {
		for i := range perm {
			perm[i] = i
		}
		clear(x)
		for i := 0; i < k; i++ { // partial Fisher–Yates
			j := i + rng.IntN(n-i)
			perm[i], perm[j] = perm[j], perm[i]
			x[member[perm[i]]]++
		}
		sum += score(x)
	}
	return sum / majExactLimit, nil
}

// forSubsets calls fn with subset set to each k-subset of 0..n-1 in
// lexicographic order.
func forSubsets(n, k int, subset []int, fn func()) {
	var rec func(start, depth int)
	rec = func(start, depth int) {
		if depth == k {
			fn()
			return
		}
		for i := start; i <= n-(k-depth); i++ {
			subset[depth] = i
			rec(i+1, depth+1)
		}
	}
	rec(0, 0)
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
