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
// is sample i's extracted answer and correct[i] whether it is right. Exact when C(n, k) ≤ 20,000, otherwise averaged
// over 20,000 subsets drawn with a fixed seed (deterministic).
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
	counts := make([]int, len(ids))
	score := func(subset []int) float64 {
		clear(counts)
		for _, i := range subset {
			if v := votes[i]; v >= 0 {
				counts[v]++
			}
		}
		top, ties, good := 0, 0, 0
		for id, x := range counts {
			switch {
			case x > top:
				top, ties, good = x, 1, 0
			case x == top && x > 0:
				ties++
			default:
				continue
			}
			if right[id] {
				good++
			}
		}
		if top == 0 {
			return 0
		}
		return float64(good) / float64(ties)
	}
	if binomial(n, k) <= majExactLimit {
		sum, count := 0.0, 0
		subset := make([]int, k)
		forSubsets(n, k, subset, func() { sum += score(subset); count++ })
		return sum / float64(count), nil
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(k)))
	perm := make([]int, n)
	sum := 0.0
	for range majExactLimit {
		for i := range perm {
			perm[i] = i
		}
		for i := 0; i < k; i++ { // partial Fisher–Yates
			j := i + rng.IntN(n-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		sum += score(perm[:k])
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

// Bootstrap is the 95% percentile bootstrap interval of the mean of
// values (per-problem scores), from resamples resamplings drawn with a
// fixed seed; resamples ≤ 0 means 2,000.
func Bootstrap(values []float64, resamples int) (lo, hi float64) {
	n := len(values)
	if n == 0 {
		return 0, 0
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
