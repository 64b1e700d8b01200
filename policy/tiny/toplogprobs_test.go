package tiny_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// distribution is the model's log-softmax over every token it can emit
// (EOS and the characters) after BOS and context, computed by scoring each
// candidate as a one-token completion: an independent path to the numbers
// sampling reports.
func distribution(t *testing.T, m *tiny.Model, context []int32) []policy.TokenLogprob {
	t.Helper()
	var batch []tiny.Example
	for id := int32(0); id < int32(m.Config().VocabSize()); id++ {
		batch = append(batch, tiny.Example{Prompt: context, Completion: []int32{id}})
	}
	lps, _, err := m.Score(t.Context(), nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]policy.TokenLogprob, len(batch))
	for i, e := range batch {
		out[i] = policy.TokenLogprob{ID: e.Completion[0], Logprob: lps[i][0]}
	}
	slices.SortStableFunc(out, func(a, b policy.TokenLogprob) int {
		switch {
		case a.Logprob > b.Logprob:
			return -1
		case a.Logprob < b.Logprob:
			return 1
		}
		return 0 // stable: ties stay in id order
	})
	return out
}

func sameAlternatives(a, b []policy.TokenLogprob) bool {
	return slices.EqualFunc(a, b, func(x, y policy.TokenLogprob) bool {
		return x.ID == y.ID && math.Float32bits(x.Logprob) == math.Float32bits(y.Logprob)
	})
}

// The top log-probabilities of every sampled and every prompt position are
// the k most likely tokens of the model's distribution there, bit for bit
// as scoring computes them; greedily the first is the sampled token.
func TestTopLogprobsAreTheDistribution(t *testing.T) {
	m := embedded(t)
	p := tiny.NewPolicy(m)
	reqs := []policy.Request{{ID: "sum", Prompt: "123+456=", Seed: 1}, {ID: "b", Prompt: "77+642=", Seed: 42}}
	for _, tc := range []struct {
		name string
		s    policy.Sampling
	}{
		{"greedy k 3", policy.Sampling{MaxTokens: 6, Logprobs: true, TopLogprobs: 3, PromptLogprobs: true}},
		{"sampled k 5", policy.Sampling{N: 3, Temperature: 1, MaxTokens: 6, Logprobs: true, TopLogprobs: 5, PromptLogprobs: true}},
		{"k past the vocabulary", policy.Sampling{MaxTokens: 3, Logprobs: true, TopLogprobs: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := p.Generate(t.Context(), reqs, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			k := min(tc.s.TopLogprobs, m.Config().VocabSize())
			for i, ss := range out {
				prompt, _ := m.Tokenize(reqs[i].Prompt)
				for j, smp := range ss {
					if len(smp.TopLogprobs) != len(smp.TokenIDs) {
						t.Fatalf("request %d sample %d: %d top positions for %d tokens", i, j, len(smp.TopLogprobs), len(smp.TokenIDs))
					}
					for pos, id := range smp.TokenIDs {
						want := distribution(t, m, append(slices.Clone(prompt), smp.TokenIDs[:pos]...))[:k]
						if got := smp.TopLogprobs[pos]; !sameAlternatives(got, want) {
							t.Fatalf("request %d sample %d position %d: top %v, want %v", i, j, pos, got, want)
						}
						if tc.s.Temperature == 0 && smp.TopLogprobs[pos][0].ID != id {
							t.Fatalf("greedy, request %d position %d: sampled %d, most likely %d", i, pos, id, smp.TopLogprobs[pos][0].ID)
						}
						if math.Float32bits(smp.Logprobs[pos]) != math.Float32bits(logprobOf(t, m, prompt, smp.TokenIDs[:pos], id)) {
							t.Fatalf("request %d sample %d position %d: logprob %v differs from scoring", i, j, pos, smp.Logprobs[pos])
						}
					}
					if !tc.s.PromptLogprobs {
						if smp.Prompt != nil {
							t.Fatalf("prompt logprobs not asked, got %v", smp.Prompt)
						}
						continue
					}
					if smp.Prompt == nil || !slices.Equal(smp.Prompt.TokenIDs, prompt) {
						t.Fatalf("request %d: prompt %+v, want the tokens %v", i, smp.Prompt, prompt)
					}
					for pos, id := range prompt {
						d := distribution(t, m, prompt[:pos])
						if !sameAlternatives(smp.Prompt.TopLogprobs[pos], d[:k]) {
							t.Fatalf("request %d prompt position %d: top %v, want %v", i, pos, smp.Prompt.TopLogprobs[pos], d[:k])
						}
						if got, want := smp.Prompt.Logprobs[pos], logprobOf(t, m, nil, prompt[:pos], id); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("request %d prompt position %d: logprob %v, want %v", i, pos, got, want)
						}
					}
				}
			}
		})
	}
}

// logprobOf scores id after BOS, prompt and prefix.
func logprobOf(t *testing.T, m *tiny.Model, prompt, prefix []int32, id int32) float32 {
	t.Helper()
	ctx := append(slices.Clone(prompt), prefix...)
	lps, _, err := m.Score(context.Background(), nil, []tiny.Example{{Prompt: ctx, Completion: []int32{id}}})
	if err != nil {
		t.Fatal(err)
	}
	return lps[0][0]
}

// Asking for alternatives and prompt logprobs changes nothing sampled;
// a stop string is reported as the stop reason, EOS and max tokens as none.
func TestTopLogprobsChangeNothingSampled(t *testing.T) {
	p := tiny.NewPolicy(embedded(t))
	reqs := []policy.Request{{ID: "a", Prompt: "77+642=", Seed: 42}}
	plain := policy.Sampling{N: 4, Temperature: 1, MaxTokens: 6, Logprobs: true}
	rich := plain
	rich.TopLogprobs, rich.PromptLogprobs = 4, true
	a, err := p.Generate(t.Context(), reqs, plain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Generate(t.Context(), reqs, rich)
	if err != nil {
		t.Fatal(err)
	}
	for j := range a[0] {
		x, y := a[0][j], b[0][j]
		if x.Text != y.Text || !slices.Equal(x.TokenIDs, y.TokenIDs) || !equalFloats(x.Logprobs, y.Logprobs) {
			t.Fatalf("sample %d: %q %v without alternatives, %q %v with them", j, x.Text, x.TokenIDs, y.Text, y.TokenIDs)
		}
		if x.TopLogprobs != nil || x.Prompt != nil {
			t.Fatalf("sample %d: alternatives or prompt logprobs nobody asked for", j)
		}
		if y.Prompt != b[0][0].Prompt {
			t.Errorf("sample %d: the request's samples do not share their prompt logprobs", j)
		}
	}
	for _, tc := range []struct {
		name         string
		s            policy.Sampling
		text, finish string
		stop         string
	}{
		{"eos", policy.Sampling{MaxTokens: 6}, "579", policy.FinishStop, ""},
		{"max tokens", policy.Sampling{MaxTokens: 2}, "57", policy.FinishLength, ""},
		{"stop string", policy.Sampling{MaxTokens: 6, Stop: []string{"x", "79"}}, "5", policy.FinishStop, "79"},
	} {
		out, err := p.Generate(t.Context(), []policy.Request{{ID: "sum", Prompt: "123+456="}}, tc.s)
		if err != nil {
			t.Fatal(err)
		}
		if s := out[0][0]; s.Text != tc.text || s.FinishReason != tc.finish || s.StopReason != tc.stop {
			t.Errorf("%s: %q, finish %q, stop %q; want %q, %q, %q", tc.name, s.Text, s.FinishReason, s.StopReason, tc.text, tc.finish, tc.stop)
		}
	}
}

func equalFloats(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func TestTokenText(t *testing.T) {
	p := tiny.NewPolicy(embedded(t))
	var got []string
	for id := int32(0); id < 17; id++ {
		got = append(got, p.TokenText(id))
	}
	want := []string{"<pad>", "<bos>", "<eos>", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "-", "=", ""}
	if !slices.Equal(got, want) {
		t.Fatalf("token texts %q, want %q", got, want)
	}
}

// rlpipe's client reads the alternatives and the stop reason back from a
// policy server exactly as the model gives them in process.
func TestTopLogprobsOverHTTP(t *testing.T) {
	m := embedded(t)
	p := tiny.NewPolicy(m)
	c, _ := servertest.Loopback(t, p, &server.Options{Model: m.Version()}, nil)
	reqs := []policy.Request{
		{ID: "sum", Prompt: "123+456=", Seed: 1},
		{ID: "chat", Messages: []policy.Message{{Role: "user", Content: "77+642="}}, Seed: 42},
	}
	for _, s := range []policy.Sampling{
		{N: 3, Temperature: 1, MaxTokens: 6, Logprobs: true, TopLogprobs: 3},
		{N: 2, MaxTokens: 6, Logprobs: true, TopLogprobs: 1, Stop: []string{"9", "0"}},
		{N: 2, Temperature: 1, MaxTokens: 6, Logprobs: true, TopLogprobs: 20},
	} {
		if err := servertest.Parity(t.Context(), p, c, reqs, s); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
	}
}
