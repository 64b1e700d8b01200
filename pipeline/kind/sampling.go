package kind

import (
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
)

// Sampling are the per-request sampling keys that every stage sampling
// from the policy section takes under its sampling key, checked and
// turned into a policy.Sampling by the same rules. An episodes stage's
// sampling is this type; a rollout stage's adds n and hands its other
// keys here.
type Sampling struct {
	Temperature *float64 `yaml:"temperature,omitempty"`
	TopP        float64  `yaml:"top_p,omitempty"`
	MaxTokens   int      `yaml:"max_tokens"`
	Stop        []string `yaml:"stop,omitempty"`
}

// Check reports the first bad key of s below the stage's sampling key
// (max_tokens, then temperature, then top_p), with maxTokensHint as the
// hint of max_tokens, and returns false when it reported one. In the
// generate slot, whose samples the train stage trains on, top_p below 1
// is refused: the trainers train the tempered policy, not a truncated one.
func (s Sampling) Check(c Checker, maxTokensHint string) bool {
	switch {
	case s.MaxTokens < 1:
		c.Fail("sampling.max_tokens", maxTokensHint, "%s: must be at least 1, got %d", c.Path("sampling.max_tokens"), s.MaxTokens)
	case s.Temperature != nil && *s.Temperature < 0:
		c.Fail("sampling.temperature", "0 samples greedily", "%s: cannot be negative, got %g", c.Path("sampling.temperature"), *s.Temperature)
	case s.TopP < 0 || s.TopP > 1:
		c.Fail("sampling.top_p", "", "%s: must be in (0, 1], got %g", c.Path("sampling.top_p"), s.TopP)
	case s.TopP > 0 && s.TopP < 1 && c.Slot() == pipeline.SlotGenerate:
		// The generate stage's samples are trained on (the loop always
		// has a train stage), and top-p's renormalised nucleus is a
		// distribution no trainer can rebuild from the logits.
		c.Fail("sampling.top_p", "remove top_p: temperature alone is trained exactly, as docs/TRAINERS.md explains",
			"%s: %g trains a policy rlpipe cannot score: the sampler draws from the top-p nucleus, renormalised at every token, and neither the recorded logprobs nor the trainer's are of that distribution",
			c.Path("sampling.top_p"), s.TopP)
	default:
		return true
	}
	return false
}

// Policy is the policy.Sampling of s: temperature 1 when the key is not
// set (0 is greedy, so an unset temperature cannot be 0).
func (s Sampling) Policy() policy.Sampling {
	sp := policy.Sampling{Temperature: 1, TopP: s.TopP, MaxTokens: s.MaxTokens, Stop: s.Stop}
	if s.Temperature != nil {
		sp.Temperature = *s.Temperature
	}
	return sp
}
