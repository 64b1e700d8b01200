package embedded_test

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// The embedded trainer trains with every policy loss and aggregation: two
// updates of two epochs of two minibatches (so the ratio leaves 1 and the
// clips can act) on a small batch give finite losses and an adapter that
// is neither the untrained one nor the one the default loss trains. The
// aggregation seq_mean_token_sum_norm differs from token_mean only by a
// factor per step, which gradient clipping and AdamW undo, so it is
// compared with seq_mean_token_mean, whose weights differ by length: the
// rewards are the completions' lengths, so that the groups that train
// mix lengths.
func TestTrainsWithEachLoss(t *testing.T) {
	ctx := context.Background()
	m := embeddedModel(t)
	adapter := func(t *testing.T, o embedded.Options) ([]byte, embedded.Result) {
		t.Helper()
		o.Epochs, o.Minibatches = 2, 2
		tr := newTrainer(t, m, o)
		var res embedded.Result
		for seed := uint64(1); seed <= 2; seed++ {
			var err error
			b := sampleBatch(t, m, tr.Adapter(), 4, seed)
			// Reward length, so that the groups that train mix lengths
			// and the aggregations differ.
			for i := range b.Rewards {
				r := float64(len(b.Trajectories[i].Logprobs))
				b.Rewards[i].Total, b.Rewards[i].Components = r, map[string]float64{"correct": r}
			}
			if res, err = tr.Update(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		dir := filepath.Join(t.TempDir(), "adapter")
		if err := tr.Save(dir); err != nil {
			t.Fatal(err)
		}
		return readFile(t, dir, "adapter_model.safetensors"), res
	}
	untrained := filepath.Join(t.TempDir(), "untrained")
	if err := newTrainer(t, m, embedded.Options{}).Save(untrained); err != nil {
		t.Fatal(err)
	}
	fresh := readFile(t, untrained, "adapter_model.safetensors")
	def, _ := adapter(t, embedded.Options{})
	seqMean, _ := adapter(t, embedded.Options{Aggregation: grpo.SequenceMean})
	for _, tc := range []struct {
		name  string
		o     embedded.Options
		other []byte
	}{
		{"gspo", embedded.Options{Loss: "gspo", PolicyLoss: grpo.GSPO, Aggregation: grpo.SequenceMean}, def},
		{"cispo", embedded.Options{PolicyLoss: grpo.CISPO}, def},
		{"ppo_clip seq_mean_token_sum_norm", embedded.Options{Aggregation: grpo.SeqMeanTokenSumNorm}, seqMean},
		{"gspo with beta", embedded.Options{PolicyLoss: grpo.GSPO, Beta: 0.04}, def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := adapter(t, tc.o)
			mt := res.Metrics
			if res.Metrics.OptimizerSteps != 8 {
				t.Errorf("%d optimizer steps, want 8", mt.OptimizerSteps)
			}
			for _, x := range []float64{mt.Loss, mt.PolicyLoss, mt.GradNorm, mt.RatioDev} {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("metrics %+v: not finite", mt.LossFigures)
				}
			}
			if mt.GradNorm == 0 {
				t.Error("grad norm 0: the loss gave no gradient")
			}
			if bytes.Equal(got, fresh) || bytes.Equal(got, tc.other) {
				t.Errorf("adapter equal to the untrained one (%t) or to the one compared (%t)", bytes.Equal(got, fresh), bytes.Equal(got, tc.other))
			}
		})
	}
}

// A loss named without its value, or dual_clip with a loss it does not
// apply to, is an option error naming the key; ppo_clip by name keeps
// the default's version, another loss changes it.
func TestLossOptions(t *testing.T) {
	m := embeddedModel(t)
	def, err := embedded.Options{}.Version(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    embedded.Options
		err  string
		same bool
	}{
		{name: "ppo_clip by name", o: embedded.Options{Loss: "ppo_clip"}, same: true},
		{name: "ppo_clip by value", o: embedded.Options{PolicyLoss: grpo.PPOClip}, same: true},
		{name: "gspo", o: embedded.Options{PolicyLoss: grpo.GSPO}},
		{name: "a name without its loss", o: embedded.Options{Loss: "gspo"},
			err: `invalid trainer options: loss: "gspo" has no policy loss of that name set beside it; set PolicyLoss to it (grpo.GSPO, grpo.CISPO)`},
		{name: "a name that is not its loss's", o: embedded.Options{Loss: "gspo", PolicyLoss: grpo.CISPO},
			err: `invalid trainer options: loss: "gspo" has no policy loss of that name set beside it; set PolicyLoss to it (grpo.GSPO, grpo.CISPO)`},
		{name: "dual clip with cispo", o: embedded.Options{PolicyLoss: grpo.CISPO, DualClip: 3},
			err: `invalid trainer options: dual_clip: 3; dual clip applies to loss ppo_clip only, not cispo (remove dual_clip or the loss)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.EnsureDefaults()
			if got := errString(o.Validate()); got != tc.err {
				t.Fatalf("error %q, want %q", got, tc.err)
			}
			if tc.err != "" {
				return
			}
			v, err := tc.o.Version(m)
			if err != nil {
				t.Fatal(err)
			}
			if (v == def) != tc.same {
				t.Errorf("version %s, default's %s: same %t, want %t", v, def, v == def, tc.same)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
