package embedded_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// The rollout correction on a batch trained on twice, on-policy and then
// one update stale: on-policy every weight is 1 and nothing is capped or
// masked; stale, the rejection drops the tokens whose ratio left [1/U, U]
// from the loss (train_tokens counts the rest) and the figures say how
// many. Without the options the metrics have none of the keys.
func TestRolloutCorrectionStale(t *testing.T) {
	m := embeddedModel(t)
	for _, c := range []struct {
		name string
		o    embedded.Options
	}{
		{"verl's defaults: token TIS 2, token_k1 2", embedded.Options{RolloutIS: "token", RolloutRS: "token_k1", RolloutRSThreshold: 2}},
		{"tight: token TIS 1.05, token_k1 1.05", embedded.Options{RolloutIS: "token", RolloutISThreshold: 1.05, RolloutRS: "token_k1", RolloutRSThreshold: 1.05}},
		{"sequence TIS 2, seq_mean_k3 0.02", embedded.Options{RolloutIS: "sequence", RolloutRS: "seq_mean_k3", RolloutRSThreshold: 0.02}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTrainer(t, m, c.o)
			b := sampleBatch(t, m, nil, 16, 3)
			on, err := tr.Update(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			if *on.Metrics.ISMean != 1 || *on.Metrics.ISCapped != 0 || *on.Metrics.RSMasked != 0 {
				t.Errorf("on-policy: rollout_is_mean %v, capped %v, masked %v; want 1, 0, 0", *on.Metrics.ISMean, *on.Metrics.ISCapped, *on.Metrics.RSMasked)
			}
			stale, err := tr.Update(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			f := stale.Metrics.RolloutFigures
			t.Logf("one update stale: rollout_is_mean %.4f max %.4f capped %.4f; rollout_rs_masked_frac %.4f (seq %.4f); train_tokens %d of %d; ratio_max %.4f mismatch_kl %.3g",
				*f.ISMean, *f.ISMax, *f.ISCapped, *f.RSMasked, *f.RSSeqMasked, stale.Metrics.TrainTokens, f.Tokens, stale.Metrics.RatioMax, stale.Metrics.MismatchKL)
			if kept := float64(stale.Metrics.TrainTokens) / float64(f.Tokens); math.Abs(kept-(1-*f.RSMasked)) > 1e-12 {
				t.Errorf("train_tokens %d of %d, masked fraction %v: they disagree", stale.Metrics.TrainTokens, f.Tokens, *f.RSMasked)
			}
			s0 := stale.Metrics.Steps[0]
			if *s0.ISMean != *f.ISMean || *s0.RSMasked != *f.RSMasked {
				t.Errorf("one step: the update's figures %+v are not the step's %+v", f, s0.RolloutFigures)
			}
		})
	}
	res, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), sampleBatch(t, m, nil, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "rollout_") {
		t.Errorf("metrics without the rollout correction hold its keys: %s", b)
	}
}

// The rollout correction's keys enter the version only when set; a bad
// value names its key.
func TestRolloutCorrectionOptions(t *testing.T) {
	m := embeddedModel(t)
	base, _ := embedded.Options{}.Version(m)
	set, _ := embedded.Options{RolloutRS: "token_k1", RolloutRSThreshold: 2}.Version(m)
	if base != "grpo-embedded-4-7f641a25bcb13605" || set == base {
		t.Errorf("versions: default %s (want the one before the rollout correction existed), rollout_rs %s", base, set)
	}
	o := embedded.Options{RolloutIS: "tokens"}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil || err.Error() != `invalid trainer options: rollout_is: "tokens"; use token or sequence (verl's rollout_is levels)` {
		t.Errorf("rollout_is tokens: %v", err)
	}
}
