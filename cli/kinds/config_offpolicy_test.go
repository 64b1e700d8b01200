package kinds_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// recompute_old_logprobs rescores every sample with the trainer's adapter:
// right on-policy, but with overlap.max_staleness > 0 it anchors the ratio
// on adapter N−1 while N−2 sampled, so the plan refuses it, naming the
// key and the fixes, unless rescore_stale says the user wants it.
func TestRecomputeOldLogprobsOffPolicy(t *testing.T) {
	external := func(hp, overlap string) string {
		src := strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: external, command: [t], hyperparameters: "+hp+"}", 1)
		return src + overlap + "\n"
	}
	const refused = "stages.train.hyperparameters.recompute_old_logprobs: with overlap.max_staleness 1 the trainer would rescore samples of adapter N-2 with adapter N-1, " +
		"anchoring the ratio on a policy that did not sample them: the staleness correction would silently disappear"
	const fix = "set overlap.max_staleness: 0 to recompute on-policy, remove recompute_old_logprobs to keep the sampler's logprobs, or set hyperparameters.rescore_stale: true to accept it, as docs/TRAINERS.md explains"
	cases := []struct{ name, src, want string }{
		{"off-policy", external("{recompute_old_logprobs: true}", "overlap: {max_staleness: 1}"), refused},
		{"on-policy", external("{recompute_old_logprobs: true}", "overlap: {max_staleness: 0}"), ""},
		{"off-policy, accepted", external("{recompute_old_logprobs: true, rescore_stale: true}", "overlap: {max_staleness: 1}"), ""},
		{"off-policy, sampler's logprobs", external("{recompute_old_logprobs: false}", "overlap: {max_staleness: 1}"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(tc.src), kinds.Registry())
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fix) {
				t.Fatalf("want an error saying\n%s\n%s\ngot\n%v", tc.want, fix, err)
			}
		})
	}
}
