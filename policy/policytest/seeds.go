package policytest

import (
	"fmt"
	"slices"

	"github.com/rlpipe/rlpipe/policy"
)

// testDeterministic: the same requests, seeds and sampling give the same
// samples, byte for byte, call after call.
func testDeterministic(f *fixture) {
	s := policy.Sampling{N: 3, Temperature: 1, TopP: 0.9, MaxTokens: f.b.MaxTokens, Logprobs: true}
	first := f.generateOK("first call", f.requests(7), s)
	same(f.t, "second call, same seeds", f.generateOK("second call", f.requests(7), s), first)
}

// testBatching: sample j of a request seeded s is the same alone or in a
// batch, and with N 2 or N 4 (it draws from policy.SampleSeed(s, j)).
func testBatching(f *fixture) {
	t := f.t
	s := policy.Sampling{N: 4, Temperature: 1, MaxTokens: f.b.MaxTokens, Logprobs: true}
	batch := f.generateOK("batch", f.requests(11), s)
	last := len(f.b.Prompts) - 1
	s.N = 2
	alone := f.generateOK("alone", f.requests(11)[last:], s)[0]
	for j := range alone {
		if d := Diff(alone[j], batch[last][j]); d != "" {
			t.Fatalf("request %d sample %d alone with n 2, against in a batch with n 4: %s", last, j, d)
		}
	}
}

// testSeedsDiffer: at temperature 1, other seeds give other samples, and
// the samples of one request differ from each other.
func testSeedsDiffer(f *fixture) {
	t := f.t
	s := policy.Sampling{N: 4, Temperature: 1, MaxTokens: f.b.MaxTokens}
	bySeed := map[string]bool{}
	byIndex := map[string]bool{}
	for seed := int64(1); seed <= 8; seed++ {
		out := f.generateOK(fmt.Sprintf("seed %d", seed), f.requests(seed*100), s)
		for i, ss := range out {
			bySeed[fmt.Sprint(i, ss[0].Text, ss[0].TokenIDs)] = true
			if seed == 1 {
				for _, smp := range ss {
					byIndex[fmt.Sprint(i, smp.Text, smp.TokenIDs)] = true
				}
			}
		}
	}
	if n := len(f.b.Prompts); len(bySeed) == n {
		t.Fatalf("8 seeds give each of %d prompts one sample at temperature 1; want samples that vary with the seed", n)
	}
	if n := len(f.b.Prompts); len(byIndex) == n {
		t.Fatalf("the 4 samples of each of %d prompts are all alike at temperature 1; want samples that vary with their index", n)
	}
}

// testGreedy: at temperature 0 every sample of a prompt is the same,
// whatever the seed and the index.
func testGreedy(f *fixture) {
	t := f.t
	s := policy.Sampling{N: 3, MaxTokens: f.b.MaxTokens, Logprobs: true}
	a := f.generateOK("greedy, seeds 1…", f.requests(1), s)
	b := f.generateOK("greedy, seeds 50…", f.requests(50), s)
	for i := range a {
		for j, smp := range slices.Concat(a[i], b[i]) {
			want := a[i][0]
			if smp.Text != want.Text || !slices.Equal(smp.TokenIDs, want.TokenIDs) || !sameBits(smp.Logprobs, want.Logprobs) {
				t.Fatalf("greedy request %d: sample %d %q %v, sample 0 %q %v; want the same", i, j, smp.Text, smp.TokenIDs, want.Text, want.TokenIDs)
			}
		}
	}
}
