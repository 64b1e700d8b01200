package kinds_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
	"github.com/rlpipe/rlpipe/rollouts"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// grpoBase is base with a rollout generate stage, a grpo train stage and
// the embedded policy, plus extra.
func grpoBase(extra string) string {
	src := withRollout(rolloutGen, "policy: {kind: embedded}\n"+extra)
	return strings.Replace(src, "train: {kind: standin, sleep: 1s}", "train: {kind: grpo}", 1)
}

// The grpo stage trains the embedded model that a server (vLLM serving its
// export) samples from, when policy.model names it.
func TestGRPOWithAServerOfTheEmbeddedModel(t *testing.T) {
	src := strings.Replace(withRollout(rolloutGen, "policy: {kind: openai, model: tiny-arith, endpoints: ['http://127.0.0.1:8000']}\n"),
		"train: {kind: standin, sleep: 1s}", "train: {kind: grpo}", 1)
	c := mustParse(t, src)
	if c.Policy.Kind != "openai" || c.Stages.Train.Kind != embedded.GRPOKind.Name() {
		t.Fatalf("policy %+v, train %+v", c.Policy, c.Stages.Train)
	}
}

// The kinds' and backends' own keys and checks report as precisely as the
// shared sections: the path, the position and the kind that takes a key.
func TestKindOwnedKeysAndChecks(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"trainer key typo", grpoBase("trainer: {lrr: 0.1}\n"),
			`pipeline.yaml:15:11: unknown key "lrr" in trainer (did you mean "lr"?)`},
		{"trainer value checked once, by the trainer", grpoBase("trainer: {lr: -1}\n"),
			`pipeline.yaml:15:11: trainer.lr: -1; it must be positive (try 1e-3)`},
		{"trainer lora checked by the trainer", grpoBase("trainer: {lora: {rank: -2}}\n"),
			`trainer.lora.rank: -2; it must be ≥ 1`},
		{"trainer lora takes the keyword none only", grpoBase("trainer: {lora: all}\n"),
			`pipeline.yaml:15:17: trainer.lora: expected a mapping or none, got "all" (write none, or a mapping of its keys)`},
		{"trainer max_shard_size needs lora none", grpoBase("trainer: {max_shard_size: 1024}\n"),
			`pipeline.yaml:15:11: trainer.max_shard_size: 1024; it applies to full weights only: set lora: none, or remove it`},
		{"trainer critic needs lora", grpoBase("advantages: {estimator: gae}\ntrainer: {lora: none, critic: {}}\n"),
			`trainer.critic: PPO's critic is a LoRA adapter of the policy adapter's shape, and lora is none: remove lora: none or the critic`},
		{"trainer type", grpoBase("trainer: {epochs: two}\n"),
			`trainer.epochs: expected an integer, got "two"`},
		{"trainer without a grpo stage", base + "trainer: {lr: 0.1}\n",
			`pipeline.yaml:14:1: trainer: no grpo train stage uses this section (set stages.train to {kind: grpo})`},
		{"grpo without the embedded policy", strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: grpo}", 1),
			`stages.train.kind: the grpo stage trains the embedded model, so the policy must be it`},
		{"grpo with a server of another model", strings.Replace(withRollout(rolloutGen, "policy: {kind: openai, model: Qwen/Qwen2.5-0.5B, endpoints: ['http://127.0.0.1:8000']}\n"),
			"train: {kind: standin, sleep: 1s}", "train: {kind: grpo}", 1),
			`stages.train.kind: the grpo stage trains the embedded model, so the policy must be it: kind embedded, or a server whose model is tiny-arith, tiny-chain, tiny-rg, tiny-tool or a .safetensors file (not "Qwen/Qwen2.5-0.5B")`},
		{"a command key on an external trainer", strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: external, command: [t], outputs: [{name: adapter}]}", 1),
			`stages.train.outputs: only command stages take outputs (use kind: command)`},
		{"a key both command and external take, on a stand-in train stage", strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: standin, environment: {A: b}}", 1),
			`stages.train.environment: only command stages or external stages take environment (use kind: command, or use kind: external on the train stage)`},
		{"an openai key on the embedded model names the keys of an openai policy", withRollout(rolloutGen, "policy: {kind: embedded, key_env: K}\n"),
			`policy.key_env: only an openai policy takes key_env (remove it, or use kind: openai; the keys that configure an openai policy: adapter_root, concurrency, endpoints, key_env, retries, timeout, tokenizer)`},
		{"an unknown policy key", withRollout(rolloutGen, "policy: {kind: embedded, serv: http}\n"),
			`unknown key "serv" in policy (did you mean "serve"?)`},
		{"an unknown kind still catches typos in its keys", strings.Replace(base, "reward: {kind: standin}", "reward: {kind: judge, sepc: r.yaml}", 1),
			`unknown key "sepc" in stages.reward (did you mean "spec"?)`},
		{"a bad variable name in an external trainer's environment", strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: external, command: [t], environment: {A-B: c}}", 1),
			`stages.train.environment: "A-B" is not a variable name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(tc.src), kinds.Registry())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing\n%s\ngot\n%v", tc.want, err)
			}
		})
	}
}

// The trainer section is the grpo stage's options, defaults left zero
// (the trainer applies them), and the plan's train task carries them.
func TestTrainerSectionIsTheGRPOStagesOptions(t *testing.T) {
	c := mustParse(t, grpoBase("trainer: {lr: 0.002, lora: {rank: 4}}\n"))
	o, ok := c.Stages.Train.Options.(*embedded.GRPOStage)
	if !ok || o.LR != 0.002 || o.LoRA.Rank != 4 || o.Epochs != 0 {
		t.Fatalf("train options = %#v", c.Stages.Train.Options)
	}
	p := configtest.MustPlan(t, c)
	want := embedded.Options{LR: 0.002, LoRA: embedded.LoRAOptions{Rank: 4}}
	if got, w := p.Stages.Train.Version, embedded.Task(p.Policy.Model.(embedded.Trainable).TinyModel(), want).Version; got != w {
		t.Errorf("train version %s, want %s", got, w)
	}
}

// lora: none is full fine-tuning: it parses, enters the train task's
// version, and survives the effective YAML a run records; without it
// the version is the default's.
func TestTrainerLoRANone(t *testing.T) {
	c := mustParse(t, grpoBase("trainer: {lora: none, lr: 0.0001}\n"))
	o, ok := c.Stages.Train.Options.(*embedded.GRPOStage)
	if !ok || !o.LoRA.None || o.LR != 0.0001 {
		t.Fatalf("train options = %#v", c.Stages.Train.Options)
	}
	again, text := recorded(t, c)
	if o := again.Stages.Train.Options.(*embedded.GRPOStage); !o.LoRA.None || !strings.Contains(string(text), "lora: none") {
		t.Fatalf("the recorded config lost lora: none:\n%s", text)
	}
	m := configtest.MustPlan(t, c).Policy.Model.(embedded.Trainable).TinyModel()
	full := embedded.Task(m, embedded.Options{LR: 0.0001, LoRA: embedded.LoRAOptions{None: true}}).Version
	lora := embedded.Task(m, embedded.Options{LR: 0.0001}).Version
	if p := configtest.MustPlan(t, c); p.Stages.Train.Version != full || full == lora {
		t.Fatalf("train version %s, want %s (lora: none), not %s", p.Stages.Train.Version, full, lora)
	}
}

// Stop sequences made of whitespace survive the effective YAML a run
// records, and enter the hash: "\n" and "\t" are different runs.
func TestWhitespaceStopSequencesRoundTrip(t *testing.T) {
	gen := func(stop string) string {
		return `generate: {kind: rollout, env: gen, sampling: {n: 2, max_tokens: 4, stop: [` + stop + `, "Question:", " x "]}}`
	}
	c := mustParse(t, withRollout(gen(`"\n", "\n\n"`), "policy: {kind: embedded}\n"))
	again, _ := recorded(t, c)
	got := again.Stages.Generate.Options.(*rollouts.RolloutStage).Sampling.Stop
	if want := []string{"\n", "\n\n", "Question:", " x "}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stop after the round trip = %q, want %q", got, want)
	}
	h1, _ := c.Hash()
	h2, _ := mustParse(t, withRollout(gen(`"\t", "\n\n"`), "policy: {kind: embedded}\n")).Hash()
	if h1 == h2 {
		t.Error(`stop "\n" and "\t" hash the same`)
	}
}

// A train stage that trains on advantages brings the advantages step: its
// options are the trainer's, its environment is "advantages" (defined by
// default, or by the file), and the train task leaves advantages.parquet
// to it. A stand-in train stage has no such step.
func TestAdvantagedTrainStageBringsTheAdvantagesStep(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      advantages.TrainOptions
		envs      string
	}{
		{"grpo", grpoBase("trainer: {no_std: true}\n"), advantages.TrainOptions{Options: advantages.Options{NoStd: true}}, ""},
		{"grpo with its environment", strings.Replace(grpoBase("trainer: {keep_zero_std: true}\n"), "environments:\n", "environments:\n  advantages: {resources: {cpu: 2}}\n", 1), advantages.TrainOptions{KeepZeroStd: true}, "cpu"},
		{"external", strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: external, command: [t], hyperparameters: {no_std: true, keep_zero_std: true}}", 1),
			advantages.TrainOptions{Options: advantages.Options{NoStd: true}, KeepZeroStd: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := mustParse(t, tc.src).Plan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			s := p.Stages.Step("advantages")
			if s == nil || s.After != pipeline.SlotReward || s.Before != pipeline.SlotTrain {
				t.Fatalf("advantages step %+v, want one between reward and train", s)
			}
			a := s.Task
			if a == nil || a.Name != "advantages" || a.Version != tc.want.Version() || a.Env != "advantages" {
				t.Fatalf("advantages task %+v, want version %s", a, tc.want.Version())
			}
			env, ok := p.Run.Envs["advantages"]
			if !ok || (tc.envs == "cpu") != (env.Resources.CPU == 2) {
				t.Errorf("advantages environment %+v (defined: %v)", env, ok)
			}
			for _, o := range p.Stages.Train.Outputs {
				if o.Name == pipeline.OutAdvantages {
					t.Errorf("the train task still writes %s", o.File)
				}
			}
			if len(p.Stages.Train.Outputs) != 2 {
				t.Errorf("train outputs %+v, want adapter and metrics", p.Stages.Train.Outputs)
			}
		})
	}
	p, err := mustParse(t, base).Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Stages.Step("advantages") != nil {
		t.Errorf("a stand-in train stage got an advantages step")
	}
}
