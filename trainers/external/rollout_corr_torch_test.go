package external_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external/torchtest"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// TestReferenceScriptDecoupledRolloutCorrection runs the script for real
// in verl's decoupled mode: recompute_old_logprobs rescores the anchor
// with the start adapter, and the recorded logprobs, shifted ±0.4 on two
// tokens of three, are the behaviour policy's. The IS weights (e^∓0.4 and
// 1, capped at 1.3) and the rejection (token_k1 keeping ratios in
// [1/1.6, 1/0.9]: the 1.49s dropped) are trainers/grpo's on the same
// logprobs scored by the Go engine: the figures within 1e-5 or one
// token, the same kept tokens, and the loss at ρ = 1, −A times the
// weights, within 1e-5.
func TestReferenceScriptDecoupledRolloutCorrection(t *testing.T) {
	py := slowTorchPython(t, "runs torch once (about half a minute)")
	m, model := torchtest.Export(t)
	start := torchtest.StartAdapter(t, m, embedded.Options{LR: 2e-3}, 3, 8, 4)
	f := torchtest.Batch(t, m, filepath.Join(t.TempDir(), "batch"), 4, 8, 4, 0.4)
	c := grpo.RolloutCorrection{IS: grpo.ISToken, ISThreshold: 1.3, RS: "token_k1", RSThreshold: 1.6, RSThresholdLower: 0.9}
	hp := torchtest.Hparams(model)
	hp["recompute_old_logprobs"] = true
	hp["rollout_is"], hp["rollout_is_threshold"] = c.IS, c.ISThreshold
	hp["rollout_rs"], hp["rollout_rs_threshold"], hp["rollout_rs_threshold_lower"] = c.RS, c.RSThreshold, c.RSThresholdLower
	res := torchtest.Run(t, []string{py, torchtest.Script(t)}, f, hp, start, "", 1)

	ad, err := m.LoadAdapter(start)
	if err != nil {
		t.Fatal(err)
	}
	lps, _, err := m.Score(context.Background(), ad, examples(t, m, f.Batch))
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		prompt string
		sample int32
	}
	adv := map[key]float64{}
	for _, a := range f.Batch.Advantages {
		adv[key{a.PromptID, a.SampleIndex}] = a.Advantage
	}
	seqs := make([]grpo.Sequence, len(lps))
	for i, tr := range f.Batch.Trajectories {
		s := grpo.Sequence{OldLogprobs: lps[i], BehaviourLogprobs: tr.Logprobs, Advantage: adv[key{tr.PromptID, tr.SampleIndex}]}
		for _, x := range lps[i] {
			s.Logprobs = append(s.Logprobs, float64(x))
		}
		seqs[i] = s
	}
	st, _, err := grpo.Loss(seqs, grpo.LossOptions{Correction: c})
	if err != nil {
		t.Fatal(err)
	}
	pf, gf := res.Metrics.RolloutFigures, st.RolloutFigures
	one := 1.0 / float64(f.Tokens)
	t.Logf("loss torch %.9f, Go %.9f; %s; train tokens torch %d, Go %d",
		res.Metrics.Loss, st.Loss, rolloutFiguresMatch(t, pf, gf, one), res.Metrics.TrainTokens, st.Tokens)
	if *gf.ISCapped == 0 || *gf.RSMasked == 0 || *gf.RSMasked == 1 || res.Metrics.TrainTokens != st.Tokens {
		t.Errorf("capped %s, masked %s, train tokens torch %d, Go %d: want some capped and dropped, the same count",
			fmtPtr(gf.ISCapped), fmtPtr(gf.RSMasked), res.Metrics.TrainTokens, st.Tokens)
	}
	if math.Abs(res.Metrics.Loss-st.Loss) > 1e-5 {
		t.Errorf("loss: torch %.9f, Go %.9f", res.Metrics.Loss, st.Loss)
	}
}
