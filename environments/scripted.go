package environments

import (
	"context"

	"github.com/rlpipe/rlpipe/policy"
)

// ScriptedVersion is the policy version of samples from a Scripted policy.
const ScriptedVersion = "scripted"

// Scripted is a policy.Policy whose every reply is a Go function of the
// transcript: a rule-based baseline, a scripted agent for tests and
// examples, a replay of recorded actions. A plain-text request reads as one
// user message. Its samples carry no token ids.
type Scripted func(msgs []policy.Message) string

var _ policy.Policy = Scripted(nil)

// Generate returns f's reply to each request, N times.
func (f Scripted) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	if err := policy.Validate(reqs, s); err != nil {
		return nil, err
	}
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msgs := r.Messages
		if r.Prompt != "" {
			msgs = []policy.Message{{Role: "user", Content: r.Prompt}}
		}
		out[i] = make([]policy.Sample, s.Samples())
		for j := range out[i] {
			out[i][j] = policy.Sample{RequestID: r.ID, Index: j, Text: f(msgs), FinishReason: policy.FinishStop,
				PolicyVersion: ScriptedVersion, Status: policy.StatusOK}
		}
	}
	return out, nil
}
