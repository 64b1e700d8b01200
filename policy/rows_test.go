package policy_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
)

func TestPromptRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt tables.Prompt
		want   policy.Request
	}{
		{"text", tables.Prompt{PromptID: "p1", Prompt: "2+2="},
			policy.Request{ID: "p1", Prompt: "2+2=", Seed: 1110677034323924066}},
		{"chat", tables.Prompt{PromptID: "p2", Prompt: "ignored", Messages: []tables.Message{{Role: "user", Content: "hi"}}},
			policy.Request{ID: "p2", Messages: []policy.Message{{Role: "user", Content: "hi"}}, Seed: 1110675385056481750}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := policy.PromptRequest(tc.prompt, 7)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTrajectoryRow(t *testing.T) {
	req := policy.Request{ID: "p1", Seed: 42}
	p := policy.RowParams{Iteration: 3, Staleness: 1}
	ok := policy.TrajectoryRow(policy.Sample{Text: "4", TokenIDs: []int32{9, 2}, Logprobs: []float32{-0.5, -0.25}, FinishReason: policy.FinishStop},
		req, 2, p, "tiny", `{"n":4}`)
	want := tables.Trajectory{PromptID: "p1", SampleIndex: 2, GroupID: "000003-p1", Completion: "4",
		TokenIDs: []int32{9, 2}, Logprobs: []float32{-0.5, -0.25}, FinishReason: policy.FinishStop, NumTokens: 2,
		PolicyVersion: "tiny", Sampler: `{"n":4}`, Seed: 42, Staleness: 1, Status: tables.StatusOK}
	if fmt.Sprintf("%+v", ok) != fmt.Sprintf("%+v", want) {
		t.Fatalf("ok row:\n got %+v\nwant %+v", ok, want)
	}

	// A sample without token ids counts its bytes; one without text
	// carries its status and an error, and its own policy version wins.
	bad := policy.TrajectoryRow(policy.Sample{Text: "abc", Status: policy.StatusTimeout, PolicyVersion: "tiny+adapter-1"},
		req, 0, p, "tiny", "")
	if bad.NumTokens != 3 || bad.Status != tables.StatusTimeout || bad.PolicyVersion != "tiny+adapter-1" ||
		bad.Error == nil || *bad.Error != "the policy returned no text" {
		t.Fatalf("failed row = %+v (error %v)", bad, bad.Error)
	}
}

// The sampler column is the sampling parameters' JSON; a temperature or
// top_p JSON cannot hold is an error naming the column, not an empty one.
func TestSamplingJSON(t *testing.T) {
	got, err := policy.Sampling{N: 2, Temperature: 0.7, TopP: 1, MaxTokens: 8, Adapter: "a1"}.JSON()
	if want := `{"n":2,"temperature":0.7,"top_p":1,"max_tokens":8,"adapter":"a1"}`; err != nil || got != want {
		t.Errorf("JSON() = %s, %v; want %s", got, err, want)
	}
	for _, tc := range []struct {
		s    policy.Sampling
		want string
	}{
		{policy.Sampling{Temperature: math.NaN()}, "sampling: encode the sampler column: json: unsupported value: NaN"},
		{policy.Sampling{TopP: math.Inf(1)}, "sampling: encode the sampler column: json: unsupported value: +Inf"},
	} {
		got, err := tc.s.JSON()
		if err == nil || got != "" || err.Error() != tc.want {
			t.Errorf("%+v: JSON() = %q, %v; want the error %q", tc.s, got, err, tc.want)
		}
	}
}
