package policytest

import (
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/policy"
)

// testN: N samples per request, in index order, each naming its
// request, finished as stop or length within MaxTokens, and versioned.
func testN(f *fixture) {
	t := f.t
	s := policy.Sampling{N: 3, Temperature: 1, MaxTokens: f.b.MaxTokens}
	out := f.generateOK("n 3", f.requests(1), s)
	version := out[0][0].PolicyVersion
	if version == "" || f.b.Version != "" && version != f.b.Version {
		t.Fatalf("n 3: policy version %q, want %q (any, if the backend names none)", version, f.b.Version)
	}
	for i, ss := range out {
		for j, smp := range ss {
			switch {
			case smp.FinishReason != policy.FinishStop && smp.FinishReason != policy.FinishLength:
				t.Fatalf("request %d sample %d: finish reason %q, want %q or %q", i, j, smp.FinishReason, policy.FinishStop, policy.FinishLength)
			case smp.TokenIDs != nil && len(smp.TokenIDs) > f.b.MaxTokens:
				t.Fatalf("request %d sample %d: %d tokens, more than max tokens %d", i, j, len(smp.TokenIDs), f.b.MaxTokens)
			case smp.PolicyVersion != version:
				t.Fatalf("request %d sample %d: policy version %q, another sample's %q", i, j, smp.PolicyVersion, version)
			case smp.Logprobs != nil:
				t.Fatalf("request %d sample %d: %d logprobs nobody asked for", i, j, len(smp.Logprobs))
			}
		}
	}
}

// testNZero: N 0 asks for one sample per request.
func testNZero(f *fixture) {
	f.generateOK("n 0", f.requests(1), policy.Sampling{Temperature: 1, MaxTokens: f.b.MaxTokens})
}

// testChat: a chat transcript is served like a prompt, and a batch may
// mix both.
func testChat(f *fixture) {
	reqs := f.requests(1)
	reqs[0].Messages = []policy.Message{{Role: "user", Content: reqs[0].Prompt}}
	reqs[0].Prompt = ""
	f.generateOK("chat and prompt", reqs, policy.Sampling{N: 2, Temperature: 1, MaxTokens: f.b.MaxTokens})
}

// testMaxTokens: a greedy completion cut one token short of its end
// finishes with FinishLength after exactly MaxTokens tokens, a prefix of
// the full one.
func testMaxTokens(f *fixture) {
	t := f.t
	full := f.greedy("greedy", "")
	i, whole := longest(full)
	n := len(whole.TokenIDs)
	if whole.TokenIDs == nil {
		n = len(whole.Logprobs)
	}
	if n == 0 {
		t.Skip("the policy returns neither token ids nor log-probabilities: its tokens cannot be counted")
	}
	if n < 2 {
		t.Fatalf("the longest greedy completion, %q, has %d tokens; Backend.MaxTokens must leave room for two", whole.Text, n)
	}
	reqs := f.requests(1)[i : i+1]
	cut := f.generateOK("max tokens", reqs, policy.Sampling{MaxTokens: n - 1, Logprobs: true})[0][0]
	if cut.FinishReason != policy.FinishLength {
		t.Fatalf("max tokens %d: finish reason %q, want %q", n-1, cut.FinishReason, policy.FinishLength)
	}
	if !strings.HasPrefix(whole.Text, cut.Text) {
		t.Fatalf("max tokens %d: text %q is not a prefix of the full completion %q", n-1, cut.Text, whole.Text)
	}
	if whole.TokenIDs != nil && !slices.Equal(cut.TokenIDs, whole.TokenIDs[:n-1]) {
		t.Fatalf("max tokens %d: token ids %v, want the first %d of %v", n-1, cut.TokenIDs, n-1, whole.TokenIDs)
	}
	if len(whole.Logprobs) == n && !sameBits(cut.Logprobs, whole.Logprobs[:n-1]) {
		t.Fatalf("max tokens %d: logprobs %v, want the first %d of %v", n-1, cut.Logprobs, n-1, whole.Logprobs)
	}
}

// testStop: a stop string ends a completion where it first appears, and
// is not part of its text.
func testStop(f *fixture) {
	t := f.t
	full := f.greedy("greedy", "")
	i, whole := longest(full)
	chars := []rune(whole.Text)
	if len(chars) < 2 {
		t.Fatalf("the longest greedy completion, %q, is shorter than two characters; Backend.MaxTokens must leave room for two", whole.Text)
	}
	stop := string(chars[1])
	want := whole.Text[:strings.Index(whole.Text, stop)]
	reqs := f.requests(1)[i : i+1]
	got := f.generateOK("stop", reqs, policy.Sampling{MaxTokens: f.b.MaxTokens, Stop: []string{stop}})[0][0]
	if got.Text != want || got.FinishReason != policy.FinishStop {
		t.Fatalf("stop %q in %q: text %q, finish reason %q; want %q, %q", stop, whole.Text, got.Text, got.FinishReason, want, policy.FinishStop)
	}
}
