package evaluators

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// MajAtKMetric is maj@k, the registry's metric of MajAtK.
var MajAtKMetric = newMetric(tables.MetricMajAtK, func(s scoredSamples, k int) (float64, error) {
	return MajAtK(s.Answers, s.Correct, k)
})

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
