package kinds_test

import (
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config/kindtest"
)

// stageCase is a stage kind's case: the stage's slot and keys, the sections
// and other stages it needs, a key it does not take.
type stageCase struct {
	kind, slot, keys, sections, bad string
	others                          map[string]string
}

// Every stage kind of the registry runs the stage-kind suite, with the
// smallest valid stage of its kind; a kind added to the registry without
// a case here fails.
func TestStageKindsConform(t *testing.T) {
	const embedded = "policy: {kind: embedded}\n"
	cases := []stageCase{
		{"standin", "train", "sleep: 1s", "", "slep", nil},
		{"command", "reward", "command: [score, '{{inputs.trajectories}}', '{{outputs.rewards}}'], outputs: [{name: rewards, file: rewards.parquet}]", "", "outputz", nil},
		{"dataset", "sample", "", "", "shuffle_seed", nil},
		{"cel", "reward", "spec: ../../examples/arithmetic/reward.yaml", "", "sepc", nil},
		{"rollout", "generate", "sampling: {n: 2, max_tokens: 4}", embedded, "samplin", nil},
		{"episodes", "generate", "rl_env: guess, episodes: 2, max_turns: 2, sampling: {max_tokens: 4}", embedded, "rl_envs", nil},
		{"grpo", "train", "", embedded, "lrr", map[string]string{"generate": "{kind: rollout, env: gen, sampling: {n: 2, max_tokens: 4}}"}},
		{"external", "train", "command: [train]", "", "hyperparams", nil},
	}
	reg := kinds.Registry()
	for _, k := range reg.Kinds {
		if !slices.ContainsFunc(cases, func(c stageCase) bool { return c.kind == k.Name() }) {
			t.Errorf("stage kind %s has no case in TestStageKindsConform", k.Name())
		}
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			k, ok := reg.Lookup(c.kind)
			if !ok {
				t.Fatalf("the registry has no stage kind %s", c.kind)
			}
			kindtest.Run(t, kindtest.Case{Kind: k, Registry: reg, Slot: c.slot, Keys: c.keys, Sections: c.sections, Others: c.others, BadKey: c.bad})
		})
	}
}

// A program's own kind (the Example's constant reward) runs the same
// suite, in its own copy of the registry.
func TestAProgramsOwnKindConforms(t *testing.T) {
	reg := kinds.Registry()
	reg.Kinds = append(reg.Kinds, constantKind{})
	kindtest.Run(t, kindtest.Case{Kind: constantKind{}, Registry: reg, Slot: pipeline.SlotReward, Keys: "score: 0.5", BadKey: "scroe"})
}
