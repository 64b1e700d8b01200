package config_test

import (
	"bytes"
	"strings"
	"testing"
)

// TestEffective: the effective config fills in the defaults of the
// trainer's options (which the file leaves out), keeps what the file
// sets, leaves the parsed config as the file wrote it, and never holds a
// key the environment provides (the policy names the variable, key_env;
// its value stays in the environment).
func TestEffective(t *testing.T) {
	const secret = "sk-effective-test-0123456789"
	t.Setenv("EFFECTIVE_TEST_KEY", secret)
	src := strings.Replace(base, "  train: {kind: standin, sleep: 1s}\n", "  train: {kind: grpo}\n", 1)
	src = strings.Replace(src, "  generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}\n", "  generate: {kind: rollout, env: gen, sampling: {n: 2, max_tokens: 5}}\n", 1)
	src = strings.Replace(src, "run: exp1\n", "run: exp1\ntrainer: {lr: 1.0e-3}\npolicy: {kind: openai, model: tiny-arith, endpoints: [\"http://127.0.0.1:9/v1\"], key_env: EFFECTIVE_TEST_KEY}\n", 1)
	c := mustParse(t, src)
	before, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	eff, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.EffectiveKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, key, want string }{
		{"set in the file", "trainer.lr", "0.001"},
		{"lora rank default", "trainer.lora.rank", "8"},
		{"lora alpha default", "trainer.lora.alpha", "16"},
		{"clip default", "trainer.eps_low", "0.2"},
		{"stage env default", "stages.train.env", "train"},
		{"key variable named", "policy.key_env", "EFFECTIVE_TEST_KEY"},
		{"list as JSON", "policy.endpoints", `["http://127.0.0.1:9/v1"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keys[tc.key]; got != tc.want {
				t.Errorf("%s = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
	if bytes.Contains(eff, []byte(secret)) {
		t.Errorf("the effective config holds the key from the environment:\n%s", eff)
	}
	after, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("Effective changed the config:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if bytes.Contains(before, []byte("rank:")) {
		t.Errorf("the config as written holds the default rank:\n%s", before)
	}
}
