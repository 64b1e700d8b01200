package skyrlgym_test

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
)

// An episode of SkyRL-gym's gsm8k_multi_turn: the row's metadata is the
// env's extras, its answer the reward_spec's ground truth. (Not run: it
// needs a python with skyrl-gym, which TestGSM8KMultiTurn finds.)
func ExampleRLEnv() {
	ctx := context.Background()
	mk, version, err := skyrlgym.RLEnv.Open(&skyrlgym.Options{EnvClass: "gsm8k_multi_turn", Python: ".venv-py"}, ".")
	if err != nil {
		panic(err)
	}
	env, err := mk(tables.Prompt{PromptID: "p1", Prompt: "What is 40+2?", Answer: "42", Metadata: `{"max_turns": 3}`})
	if err != nil {
		panic(err) // e.g. the env's KeyError for an extra the row lacks
	}
	defer env.End()
	obs, _ := env.Reset(ctx, "p1") // "What is 40+2?"
	st, _ := env.Step(ctx, "#### 41")
	fmt.Println(version, obs, st.Reward, st.Done) // skyrl-gym-0.4.0 What is 40+2? 0.0667 false
	st, _ = env.Step(ctx, "#### 42")
	fmt.Println(st.Reward, st.Done) // 1 true
}
