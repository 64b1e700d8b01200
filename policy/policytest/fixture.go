package policytest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
)

// fixture is one fresh backend plus the test using it. Its helpers fail
// the test at once, naming the call that went wrong.
type fixture struct {
	t   *testing.T
	ctx context.Context
	b   Backend
}

func newFixture(t *testing.T, newBackend NewBackend) *fixture {
	t.Helper()
	b := newBackend(t)
	switch {
	case b.Policy == nil:
		t.Fatalf("newBackend returned a nil policy")
	case len(b.Prompts) < 2:
		t.Fatalf("newBackend returned %d prompts; the suite needs two or more", len(b.Prompts))
	case b.MaxTokens < 2:
		t.Fatalf("newBackend returned MaxTokens %d; the suite needs two or more", b.MaxTokens)
	}
	return &fixture{t: t, ctx: t.Context(), b: b}
}

// requests asks for each prompt once, request i with id "p<i>" and seed
// seed+i.
func (f *fixture) requests(seed int64) []policy.Request {
	reqs := make([]policy.Request, len(f.b.Prompts))
	for i, p := range f.b.Prompts {
		reqs[i] = policy.Request{ID: fmt.Sprintf("p%d", i), Prompt: p, Seed: seed + int64(i)}
	}
	return reqs
}

// generate calls the policy and checks the shape of its answer: a list
// of s.Samples() samples, in index order, per request in order, each
// naming its request.
func (f *fixture) generate(what string, reqs []policy.Request, s policy.Sampling) [][]policy.Sample {
	f.t.Helper()
	out, err := f.b.Policy.Generate(f.ctx, reqs, s)
	if err != nil {
		f.t.Fatalf("%s: generate: %v", what, err)
	}
	if err := shape(out, reqs, s.Samples()); err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
	return out
}

// shape checks that out holds n samples per request of reqs, in order.
func shape(out [][]policy.Sample, reqs []policy.Request, n int) error {
	if len(out) != len(reqs) {
		return fmt.Errorf("%d answers for %d requests", len(out), len(reqs))
	}
	for i, ss := range out {
		if len(ss) != n {
			return fmt.Errorf("request %d (%q): %d samples, want %d", i, reqs[i].ID, len(ss), n)
		}
		for j, smp := range ss {
			if smp.Index != j || smp.RequestID != reqs[i].ID {
				return fmt.Errorf("request %d (%q) sample %d: index %d and request id %q", i, reqs[i].ID, j, smp.Index, smp.RequestID)
			}
		}
	}
	return nil
}

// generateOK is generate for calls whose every sample must be OK.
func (f *fixture) generateOK(what string, reqs []policy.Request, s policy.Sampling) [][]policy.Sample {
	f.t.Helper()
	out := f.generate(what, reqs, s)
	for i, ss := range out {
		for j, smp := range ss {
			if smp.Status != policy.StatusOK {
				f.t.Fatalf("%s: request %d (%q) sample %d: status %q (%s), want %q", what, i, reqs[i].ID, j, smp.Status, smp.Error, policy.StatusOK)
			}
		}
	}
	return out
}

// greedy returns the greedy completions of the prompts within MaxTokens,
// with log-probabilities.
func (f *fixture) greedy(what string, adapter string) [][]policy.Sample {
	f.t.Helper()
	return f.generateOK(what, f.requests(1), policy.Sampling{MaxTokens: f.b.MaxTokens, Logprobs: true, Adapter: adapter})
}

// longest returns the sample of ss with the most tokens (by text when
// the policy returns no token ids).
func longest(ss [][]policy.Sample) (int, policy.Sample) {
	best := 0
	size := func(s policy.Sample) int {
		if s.TokenIDs != nil {
			return len(s.TokenIDs)
		}
		return len(s.Text)
	}
	for i := range ss {
		if size(ss[i][0]) > size(ss[best][0]) {
			best = i
		}
	}
	return best, ss[best][0]
}

// Diff says how sample got differs from want, naming the first field
// that differs — texts, token ids, finish and stop reasons and versions
// exactly, log-probabilities and top log-probabilities bit for bit — or
// returns "" when none does (Prompt is not compared). A parity test of two
// ways to reach one policy compares their samples with it.
func Diff(got, want policy.Sample) string {
	switch {
	case got.RequestID != want.RequestID || got.Index != want.Index:
		return fmt.Sprintf("request id and index %q/%d, want %q/%d", got.RequestID, got.Index, want.RequestID, want.Index)
	case got.Status != want.Status:
		return fmt.Sprintf("status %q (%s), want %q", got.Status, got.Error, want.Status)
	case got.Text != want.Text:
		return fmt.Sprintf("text %q, want %q", got.Text, want.Text)
	case !slices.Equal(got.TokenIDs, want.TokenIDs):
		return fmt.Sprintf("token ids %v, want %v", got.TokenIDs, want.TokenIDs)
	case got.FinishReason != want.FinishReason:
		return fmt.Sprintf("finish reason %q, want %q", got.FinishReason, want.FinishReason)
	case got.PromptTokens != want.PromptTokens:
		return fmt.Sprintf("prompt tokens %d, want %d", got.PromptTokens, want.PromptTokens)
	case got.PolicyVersion != want.PolicyVersion:
		return fmt.Sprintf("policy version %q, want %q", got.PolicyVersion, want.PolicyVersion)
	case got.StopReason != want.StopReason:
		return fmt.Sprintf("stop reason %q, want %q", got.StopReason, want.StopReason)
	case !sameBits(got.Logprobs, want.Logprobs):
		return fmt.Sprintf("logprobs %v, want %v", got.Logprobs, want.Logprobs)
	case !sameTop(got.TopLogprobs, want.TopLogprobs):
		return fmt.Sprintf("top logprobs %v, want %v", got.TopLogprobs, want.TopLogprobs)
	}
	return ""
}

// sameTop reports whether a and b hold the same alternatives in the same
// order, log-probabilities bit for bit (nil only equals nil).
func sameTop(a, b [][]policy.TokenLogprob) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j].ID != b[i][j].ID || math.Float32bits(a[i][j].Logprob) != math.Float32bits(b[i][j].Logprob) {
				return false
			}
		}
	}
	return true
}

// sameBits reports whether a and b hold the same float32s bit for bit
// (nil only equals nil).
func sameBits(a, b []float32) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// same fails t unless got and want hold the same samples.
func same(t *testing.T, what string, got, want [][]policy.Sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d answers, want %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: request %d: %d samples, want %d", what, i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if d := Diff(got[i][j], want[i][j]); d != "" {
				t.Fatalf("%s: request %d sample %d: %s", what, i, j, d)
			}
		}
	}
}

// invalid checks that ss are samples of a request the policy could not
// serve: StatusInvalid, FinishError, an error and no text.
func invalid(ss []policy.Sample) error {
	if len(ss) == 0 {
		return fmt.Errorf("no samples")
	}
	for j, smp := range ss {
		if smp.Status != policy.StatusInvalid || smp.FinishReason != policy.FinishError || smp.Error == "" || smp.Text != "" {
			return fmt.Errorf("sample %d: status %q, finish reason %q, error %q, text %q; want status %q, finish reason %q, an error and no text",
				j, smp.Status, smp.FinishReason, smp.Error, smp.Text, policy.StatusInvalid, policy.FinishError)
		}
	}
	return nil
}

// loader returns the policy's adapter loader, skipping the test when it
// has none or the backend names no adapter.
func (f *fixture) loader() policy.AdapterLoader {
	f.t.Helper()
	l, ok := f.b.Policy.(policy.AdapterLoader)
	if !ok {
		f.t.Skipf("%T does not load adapters (policy.AdapterLoader)", f.b.Policy)
	}
	if f.b.AdapterDir == "" {
		f.t.Skip("the backend names no adapter directory (Backend.AdapterDir)")
	}
	return l
}

// load loads Backend.AdapterDir as AdapterName.
func (f *fixture) load() {
	f.t.Helper()
	if err := f.loader().LoadAdapter(f.ctx, AdapterName, f.b.AdapterDir); err != nil {
		f.t.Fatalf("load adapter %s from %s: %v", AdapterName, f.b.AdapterDir, err)
	}
}
