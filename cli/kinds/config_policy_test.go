package kinds_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/rollouts"
)

func TestPolicySection(t *testing.T) {
	c := mustParse(t, withRollout(rolloutGen, "policy: {kind: embedded, model: tiny-arith, serve: http}\n"))
	if c.Policy.Kind != embedded.Kind || c.Policy.Options.(*embedded.PolicyOptions).Serve != embedded.ServeHTTP {
		t.Errorf("policy: %+v", c.Policy)
	}
	g := c.Stages.Generate.Options.(*rollouts.RolloutStage)
	if c.Stages.Generate.Kind != rollouts.RolloutKind.Name() || g.Sampling.N != 8 || *g.Sampling.Temperature != 1 || g.Sampling.MaxTokens != 6 {
		t.Errorf("generate: %+v %+v", g, g.Sampling)
	}
	mustParse(t, withRollout(rolloutGen, "policy:\n  kind: openai\n  model: Qwen/Qwen2.5-0.5B-Instruct\n  endpoints: [http://127.0.0.1:8000, http://127.0.0.1:8001]\n  key_env: VLLM_API_KEY\n  timeout: 60s\n"))
	// Servers elsewhere read adapters from a shared adapter_root; localhost is this machine.
	mustParse(t, withRollout(rolloutGen, "policy: {kind: openai, model: m, endpoints: [\"http://gpu-01:8000\"], adapter_root: /shared/adapters}\n"))
	mustParse(t, withRollout(rolloutGen, "policy: {kind: openai, model: m, endpoints: [\"http://localhost:8000\", \"http://[::1]:8000\"]}\n"))
}

func TestPolicyErrors(t *testing.T) {
	cases := []struct {
		name, gen, pol, want string
	}{
		{"no policy", rolloutGen, "", "stages.generate: a rollout stage samples from the policy section, which is missing"},
		{"no sampling", "generate: {kind: rollout, env: gen}", "policy: {kind: embedded}\n", "a rollout stage needs sampling"},
		{"zero n", "generate: {kind: rollout, env: gen, sampling: {n: 0, max_tokens: 4}}", "policy: {kind: embedded}\n", "stages.generate.sampling.n: must be at least 1, got 0"},
		{"bad top_p", "generate: {kind: rollout, env: gen, sampling: {n: 2, max_tokens: 4, top_p: 1.5}}", "policy: {kind: embedded}\n", "top_p: must be in (0, 1]"},
		{"negative temperature", "generate: {kind: rollout, env: gen, sampling: {n: 2, max_tokens: 4, temperature: -1}}", "policy: {kind: embedded}\n", "temperature: cannot be negative"},
		{"unknown kind", rolloutGen, "policy: {kind: torch}\n", `policy.kind: unknown kind "torch"`},
		{"no kind", rolloutGen, "policy: {model: x}\n", "policy: missing key kind"},
		{"serve on openai", rolloutGen, "policy: {kind: openai, model: m, endpoints: [\"http://h:1\"], serve: http}\n", "policy.serve: only the embedded model"},
		{"openai without endpoints", rolloutGen, "policy: {kind: openai, model: m}\n", "an openai policy needs endpoints"},
		{"bad endpoint", rolloutGen, "policy: {kind: openai, model: m, endpoints: [\"127.0.0.1:8000\"]}\n", `policy.endpoints[0]: "127.0.0.1:8000" is not an http(s) URL`},
		{"credentials in endpoint", rolloutGen, "policy: {kind: openai, model: m, endpoints: [\"http://me:hunter2@h:1\"]}\n", "policy.endpoints[0]: http://me:xxxxx@h:1 carries credentials"},
		{"server elsewhere without adapter_root", rolloutGen, "policy: {kind: openai, model: m, endpoints: [\"http://127.0.0.1:8000\", \"https://key:s3cret@gpu-01:8000\"]}\n",
			"pipeline.yaml:14:71: policy.endpoints[1]: https://gpu-01:8000 is not on this machine, and its server reads each adapter rlpipe trains from a path: policy.adapter_root must name a directory it shares with this machine"},
		{"endpoints on embedded", rolloutGen, "policy: {kind: embedded, endpoints: [\"http://h:1\"]}\n", "configure an openai policy"},
		{"unknown model", rolloutGen, "policy: {kind: embedded, model: gpt2}\n", `policy.model: "gpt2" is neither a shipped model`},
		{"unknown serve", rolloutGen, "policy: {kind: embedded, serve: grpc}\n", `policy.serve: unknown way "grpc"`},
		{"policy without a rollout stage", "generate: {kind: standin, env: gen}", "policy: {kind: embedded}\n", "policy: no rollout or episodes stage samples from it"},
		{"sampling on standin", "generate: {kind: standin, env: gen, sampling: {n: 2, max_tokens: 3}}", "", "stages.generate.sampling: only rollout stages or episodes stages take sampling (use kind: rollout on the generate stage, or use kind: episodes on the generate stage)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(withRollout(tc.gen, tc.pol)), kinds.Registry())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
	src := strings.Replace(base, "reward: {kind: standin}", "reward: {kind: rollout, sampling: {n: 1, max_tokens: 1}}", 1)
	if _, err := config.Parse("pipeline.yaml", []byte(src), kinds.Registry()); err == nil || !strings.Contains(err.Error(), "only the generate stage can be a rollout") {
		t.Errorf("rollout reward stage: %v", err)
	}
}
