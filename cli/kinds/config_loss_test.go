package kinds_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// trainVersion is the version of the train task that src plans with
// the shipped registry.
func trainVersion(t *testing.T, src string) (string, error) {
	t.Helper()
	p, err := plan(src, kinds.Registry())
	if err != nil {
		return "", err
	}
	return p.Stages.Train.Version, nil
}

// mustTrainVersion is trainVersion of a src that must plan: an error
// fails the test.
func mustTrainVersion(t *testing.T, src string) string {
	t.Helper()
	v, err := trainVersion(t, src)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTrainerLoss: trainer.loss names a policy loss of the registry; the
// default named (ppo_clip, or the aggregation by verl's name) keeps the
// default's train version, another loss or aggregation changes it. An
// unknown loss, or dual_clip with a loss it does not apply to, fails at
// its key, for the embedded trainer and for the external one (whose
// reference script computes the same four losses).
func TestTrainerLoss(t *testing.T) {
	def := mustTrainVersion(t, grpoBase(""))
	external := externalBase
	for _, tc := range []struct {
		name, src string
		same      bool // the default's version
		err       string
	}{
		{name: "ppo_clip is the default", src: grpoBase("trainer: {loss: ppo_clip}\n"), same: true},
		{name: "token_mean is the default aggregation", src: grpoBase("trainer: {aggregation: token_mean}\n"), same: true},
		{name: "gspo", src: grpoBase("trainer: {loss: gspo}\n")},
		{name: "cispo", src: grpoBase("trainer: {loss: cispo, aggregation: seq_mean_token_sum_norm}\n")},
		{name: "an unknown loss", src: grpoBase("trainer: {loss: dpo}\n"),
			err: `pipeline.yaml:15:11: trainer.loss: unknown policy loss "dpo": use cispo or gspo or ppo_clip or reinforce`},
		{name: "dual clip with gspo", src: grpoBase("trainer: {loss: gspo, dual_clip: 3}\n"),
			err: `pipeline.yaml:15:23: trainer.dual_clip: 3; dual clip applies to loss ppo_clip only, not gspo (remove dual_clip or the loss)`},
		{name: "an unknown aggregation", src: grpoBase("trainer: {aggregation: seq-mean}\n"),
			err: `pipeline.yaml:15:11: trainer.aggregation: "seq-mean"; use "token", "sequence" or "seq_mean_token_sum_norm"`},
		{name: "external with seq_mean_token_sum_norm", src: external("{aggregation: seq_mean_token_sum_norm}")},
		{name: "external with verl's seq_mean_token_mean", src: external("{aggregation: seq_mean_token_mean}")},
		{name: "external with an unknown aggregation", src: external("{aggregation: seq-mean-token-sum-norm}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.aggregation: seq-mean-token-sum-norm: the external trainer's reference script aggregates no such way (use token, sequence or seq_mean_token_sum_norm; verl's token_mean and seq_mean_token_mean are the first two)`},
		{name: "external with gspo", src: external("{loss: gspo}")},
		{name: "external with cispo", src: external("{loss: cispo, aggregation: seq_mean_token_sum_norm}")},
		{name: "external with reinforce", src: external("{loss: reinforce}")},
		{name: "external with dual clip and reinforce", src: external("{loss: reinforce, dual_clip: 3}"),
			err: `pipeline.yaml:13:76: stages.train.hyperparameters.dual_clip: 3; dual clip applies to loss ppo_clip only, not reinforce (remove dual_clip or the loss)`},
		{name: "external with an unknown loss", src: external("{loss: dpo}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.loss: dpo: the external trainer's reference script computes no such loss (use ppo_clip, gspo, cispo, reinforce)`},
		{name: "external with dual clip and gspo", src: external("{loss: gspo, dual_clip: 3}"),
			err: `pipeline.yaml:13:71: stages.train.hyperparameters.dual_clip: 3; dual clip applies to loss ppo_clip only, not gspo (remove dual_clip or the loss)`},
		{name: "external with dual clip and ppo_clip", src: external("{loss: ppo_clip, dual_clip: 3.5}")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := trainVersion(t, tc.src)
			if got := errString(err); got != tc.err {
				t.Fatalf("error %q, want %q", got, tc.err)
			}
			if tc.err == "" && (v == def) != tc.same {
				t.Errorf("version %q, default's %q: same %t, want %t", v, def, v == def, tc.same)
			}
		})
	}
	if _, err := trainVersion(t, external("{loss: ppo_clip}")); err != nil && strings.Contains(err.Error(), "loss") {
		t.Errorf("external with ppo_clip: %v", err)
	}
}

// nameOnly is a registry loss the embedded trainer cannot compute: a
// kind.Loss that is no grpo.PolicyLoss.
type nameOnly struct{}

func (nameOnly) Name() string { return "name_only" }

// A loss of the registry that the embedded trainer does not compute is
// an error at trainer.loss, not a panic or a silent ppo_clip.
func TestTrainerLossNotComputed(t *testing.T) {
	reg := kinds.Registry()
	reg.Losses = append(reg.Losses, nameOnly{})
	_, err := config.Parse("pipeline.yaml", []byte(grpoBase("trainer: {loss: name_only}\n")), reg)
	want := `pipeline.yaml:15:11: trainer.loss: unknown policy loss: "name_only" is not a loss the embedded trainer computes (it computes trainers/grpo.PolicyLoss values)`
	if got := errString(err); got != want {
		t.Errorf("error %q\nwant %q", got, want)
	}
}
