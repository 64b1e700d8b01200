package kinds_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// The generate stage's samples are trained on, and no trainer can
// rebuild a top-p nucleus: top_p below 1 is a plan error at the key's
// line and column, with the fix; top_p 1 and any temperature are not.
func TestTopPTrainedOnRefused(t *testing.T) {
	const pol = "policy: {kind: embedded, model: tiny-arith}\n"
	cases := []struct{ name, gen, want string }{
		{"top_p 0.9", "generate: {kind: rollout, env: gen, sampling: {n: 8, temperature: 1.0, top_p: 0.9, max_tokens: 6}}",
			"pipeline.yaml:11:74: stages.generate.sampling.top_p: 0.9 trains a policy rlpipe cannot score: the sampler draws from the top-p nucleus, renormalised at every token, " +
				"and neither the recorded logprobs nor the trainer's are of that distribution (remove top_p: temperature alone is trained exactly, as docs/TRAINERS.md explains)"},
		{"top_p 1", "generate: {kind: rollout, env: gen, sampling: {n: 8, temperature: 1.0, top_p: 1, max_tokens: 6}}", ""},
		{"temperature 1.2", "generate: {kind: rollout, env: gen, sampling: {n: 8, temperature: 1.2, max_tokens: 6}}", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(withRollout(tc.gen, pol)), kinds.Registry())
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
}
