package episodes_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

func pipelineFile(generate string) []byte {
	return []byte(`iterations: 2
batch_size: 4
dataset: main:data/games.parquet
policy: {kind: embedded, model: tiny-arith}
stages:
  sample: {kind: dataset}
  generate: ` + generate + `
  reward: {kind: standin}
  train: {kind: standin}
`)
}

func TestEpisodesStageKeys(t *testing.T) {
	if _, err := config.Parse("pipeline.yaml", pipelineFile("{kind: episodes, rl_env: guess, episodes: 4, max_turns: 8, timeout: 30s, sampling: {max_tokens: 4}}"), kinds.Registry()); err != nil {
		t.Fatalf("a valid episodes stage: %v", err)
	}
	if _, err := config.Parse("pipeline.yaml", pipelineFile("{kind: episodes, rl_env: guess, episodes: 4, max_episode_tokens: 4096, sampling: {max_tokens: 4}}"), kinds.Registry()); err != nil {
		t.Fatalf("a token budget: %v", err)
	}
	if _, err := config.Parse("pipeline.yaml", pipelineFile("{kind: episodes, rl_env: chain, episodes: 4, token_in: true, sampling: {max_tokens: 4}}"), kinds.Registry()); err != nil {
		t.Fatalf("token-in/token-out with the embedded policy: %v", err)
	}
	served := strings.Replace(string(pipelineFile("{kind: episodes, rl_env: chain, episodes: 4, token_in: true, sampling: {max_tokens: 4}}")),
		"{kind: embedded, model: tiny-arith}", "{kind: openai, endpoints: [\"http://127.0.0.1:8000/v1\"], model: m}", 1)
	_, err := config.Parse("pipeline.yaml", []byte(served), kinds.Registry())
	if want := "pipeline.yaml:7:58: stages.generate.token_in: token-in/token-out episodes need a policy whose model renders turns in this process; policy kind openai does not (drop token_in, or use a policy of kind embedded)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("token_in with an openai policy:\n got %v\nwant %s", err, want)
	}
	for _, c := range []struct{ generate, want string }{
		{"{kind: episodes, rl_env: chess, episodes: 4, sampling: {max_tokens: 4}}", `stages.generate.rl_env: no RL environment "chess" in this program (one of: agent, chain, guess, harbor, openenv, skyrl_gym)`},
		{"{kind: episodes, episodes: 4, sampling: {max_tokens: 4}}", "stages.generate: an episodes stage needs rl_env, the RL environment to run (one of: agent, chain, guess, harbor, openenv, skyrl_gym)"},
		{"{kind: episodes, rl_env: guess, episodes: 0, sampling: {max_tokens: 4}}", "stages.generate.episodes: must be at least 1, got 0"},
		{"{kind: episodes, rl_env: guess, episodes: 2}", "stages.generate: an episodes stage needs sampling (per turn)"},
		// The token budget: an explicit 0 is not "none" (leave the key
		// out for that), and it counts whole tokens.
		{"{kind: episodes, rl_env: guess, episodes: 2, max_episode_tokens: 0, sampling: {max_tokens: 4}}",
			"pipeline.yaml:7:58: stages.generate.max_episode_tokens: must be at least 1, got 0 (the most tokens an episode's sequence may hold, e.g. 4096; leave it out for no token budget)"},
		{"{kind: episodes, rl_env: guess, episodes: 2, max_episode_tokens: -512, sampling: {max_tokens: 4}}",
			"pipeline.yaml:7:58: stages.generate.max_episode_tokens: must be at least 1, got -512"},
		{"{kind: episodes, rl_env: guess, episodes: 2, max_episode_tokens: 1.5, sampling: {max_tokens: 4}}",
			"pipeline.yaml:7:78: stages.generate.max_episode_tokens: expected an integer, got 1.5"},
		{"{kind: episodes, rl_env: guess, episodes: 2, max_episode_tokens: 4k, sampling: {max_tokens: 4}}",
			`pipeline.yaml:7:78: stages.generate.max_episode_tokens: expected an integer, got "4k"`},
		{"{kind: episodes, rl_env: guess, episodes: 2, max_turn: 3, sampling: {max_tokens: 4}}", "max_turn"},
		{"{kind: episodes, rl_env: guess, rl_options: {max: 10}, episodes: 2, sampling: {max_tokens: 4}}",
			"pipeline.yaml:7:45: stages.generate.rl_options: rl_env guess: this environment takes no rl_options"},
		{"{kind: episodes, rl_env: agent, rl_options: {world: w, timeout: 3}, episodes: 2, sampling: {max_tokens: 4}}",
			`stages.generate.rl_options: rl_env agent: unknown field "timeout" (keys: end_on_malformed, max_replies, memory_mb, no_help, observation_bytes, procs, timeout_s, tools, world, world_cache)`},
		{"{kind: episodes, rl_env: agent, rl_options: {world: 3}, episodes: 2, sampling: {max_tokens: 4}}",
			"stages.generate.rl_options: rl_env agent: cannot unmarshal number into Go struct field PipelineOptions.world of type string"},
		{"{kind: episodes, rl_env: skyrl_gym, rl_options: {env_class: gsm8k, sandbox: yes}, episodes: 2, sampling: {max_tokens: 4}}",
			"stages.generate.rl_options: rl_env skyrl_gym: cannot unmarshal string into Go struct field Options.sandbox of type bool"},
		{"{kind: episodes, rl_env: skyrl_gym, rl_options: {env: gsm8k}, episodes: 2, sampling: {max_tokens: 4}}",
			`stages.generate.rl_options: rl_env skyrl_gym: unknown field "env" (keys: env_class, env_config, memory_mb, python, request_timeout_s, sandbox)`},
		{"{kind: episodes, rl_env: skyrl_gym, rl_options: {env_class: gsm8k, env_config: [1]}, episodes: 2, sampling: {max_tokens: 4}}",
			"stages.generate.rl_options: rl_env skyrl_gym: cannot unmarshal array into Go struct field Options.env_config of type map[string]interface {}"},
	} {
		_, err := config.Parse("pipeline.yaml", pipelineFile(c.generate), kinds.Registry())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.generate, err, c.want)
		}
	}
}
