package cli

import (
	"context"
	"strings"
	"testing"
)

// The iteration line shows the figures the trainer computed and leaves
// out the ones it wrote as null: at β = 0 there is no "kl 0.0000".
func TestIterationLineLeavesOutWhatWasNotComputed(t *testing.T) {
	ctx := context.Background()
	st := newLocalStore(t)
	for n, metrics := range map[int]string{
		1: `{"loss": -0.0025, "kl": null, "reward": {"mean": 0.477}, "frac_reward_zero_std": 0.56}`,
		2: `{"loss": 0.0035, "kl": 0.0123, "reward": {"mean": 0.617}, "frac_reward_zero_std": 0.31}`,
		// n: 1 (PPO): no group has two samples to have a spread.
		3: `{"loss": 0.0041, "kl": null, "reward": {"mean": 0.5}, "frac_reward_zero_std": null}`,
	} {
		path := "iterations/00000" + string(rune('0'+n)) + "/train_metrics.json"
		if _, err := st.PutObject(ctx, "main", path, strings.NewReader(metrics), nil); err != nil {
			t.Fatal(err)
		}
	}
	for n, want := range map[int]string{
		1: "iteration 1: reward 0.477  loss -0.0025  zero-std groups 0.56",
		2: "iteration 2: reward 0.617  loss +0.0035  kl 0.0123  zero-std groups 0.31",
		3: "iteration 3: reward 0.500  loss +0.0041",
	} {
		if got := iterationReport(ctx, st, "main", n); len(got) != 1 || got[0] != want {
			t.Errorf("iteration %d: %q, want %q", n, got, want)
		}
	}
}
