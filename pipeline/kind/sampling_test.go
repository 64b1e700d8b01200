package kind_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
)

func TestSamplingCheckReportsTheFirstBadKey(t *testing.T) {
	neg, zero := -0.5, 0.0
	cases := []struct {
		name string
		s    kind.Sampling
		ok   bool
		want string
	}{
		{"good", kind.Sampling{MaxTokens: 8, TopP: 1, Temperature: &zero}, true, ""},
		{"no max_tokens", kind.Sampling{}, false, "sampling.max_tokens|the most tokens of one reply|stages.generate.sampling.max_tokens: must be at least 1, got 0"},
		{"max_tokens before temperature", kind.Sampling{MaxTokens: -1, Temperature: &neg}, false, "sampling.max_tokens|the most tokens of one reply|stages.generate.sampling.max_tokens: must be at least 1, got -1"},
		{"negative temperature", kind.Sampling{MaxTokens: 4, Temperature: &neg, TopP: 2}, false, "sampling.temperature|0 samples greedily|stages.generate.sampling.temperature: cannot be negative, got -0.5"},
		{"top_p above 1", kind.Sampling{MaxTokens: 4, TopP: 1.5}, false, "sampling.top_p||stages.generate.sampling.top_p: must be in (0, 1], got 1.5"},
		{"negative top_p", kind.Sampling{MaxTokens: 4, TopP: -0.1}, false, "sampling.top_p||stages.generate.sampling.top_p: must be in (0, 1], got -0.1"},
		{"top_p below 1 trained on", kind.Sampling{MaxTokens: 4, TopP: 0.9}, false, "sampling.top_p|remove top_p: temperature alone is trained exactly, as docs/TRAINERS.md explains|" +
			"stages.generate.sampling.top_p: 0.9 trains a policy rlpipe cannot score: the sampler draws from the top-p nucleus, renormalised at every token, and neither the recorded logprobs nor the trainer's are of that distribution"},
		{"top_p 1 is no truncation", kind.Sampling{MaxTokens: 4, TopP: 1}, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &checker{slot: pipeline.SlotGenerate}
			if ok := tc.s.Check(c, "the most tokens of one reply"); ok != tc.ok {
				t.Errorf("Check = %v, want %v", ok, tc.ok)
			}
			if got := strings.Join(c.errs, "\n"); got != tc.want {
				t.Errorf("problems:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestSamplingPolicyDefaultsTemperatureToOne(t *testing.T) {
	zero := 0.0
	cases := []struct {
		name string
		s    kind.Sampling
		want policy.Sampling
	}{
		{"unset", kind.Sampling{TopP: 0.9, MaxTokens: 8, Stop: []string{"\n"}}, policy.Sampling{Temperature: 1, TopP: 0.9, MaxTokens: 8, Stop: []string{"\n"}}},
		{"greedy", kind.Sampling{Temperature: &zero, MaxTokens: 3}, policy.Sampling{Temperature: 0, MaxTokens: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Policy(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Policy() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
