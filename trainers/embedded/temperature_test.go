package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// At T 1.2 the trainer scores each row at its sampler column's
// temperature, so its logπ at step 0 is the sampler's recorded log
// softmax(z/T): mismatch_kl 0 and ratio_max 1 exactly, as at T 1.
// Ignoring the temperature (what the trainer did before it read the
// column: here, the same rows with the column saying T 1) puts the
// trainer's log softmax(z) against the sampler's log softmax(z/T).
func TestTemperedPolicyMatchesTheSampler(t *testing.T) {
	m := embeddedModel(t)
	const temp = 1.2
	b := sampleBatchAt(t, m, nil, 16, 3, temp)
	applied, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	untempered, err := policy.Sampling{N: 8, Temperature: 1, MaxTokens: 5, Logprobs: true}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Trajectories {
		b.Trajectories[i].Sampler = untempered
	}
	ignored, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	a, ig := applied.Metrics, ignored.Metrics
	t.Logf("T %g, %d samples trained: T applied mismatch_kl %.6g ratio_max %.6g clipped %.4f; T ignored mismatch_kl %.6g ratio_max %.6g clipped %.4f",
		temp, a.Used, a.MismatchKL, a.RatioMax, a.ClipLow+a.ClipHigh, ig.MismatchKL, ig.RatioMax, ig.ClipLow+ig.ClipHigh)
	if a.MismatchKL != 0 || a.RatioMax != 1 || a.ClipLow+a.ClipHigh != 0 {
		t.Errorf("T applied: mismatch_kl %g, ratio_max %g, clipped %g; want 0, 1 and 0", a.MismatchKL, a.RatioMax, a.ClipLow+a.ClipHigh)
	}
	if math.Abs(ig.MismatchKL-0.0067646) > 5e-8 || math.Abs(ig.RatioMax-1.06051) > 5e-6 {
		t.Errorf("T ignored: mismatch_kl %.6g, ratio_max %.6g; want 0.0067646 and 1.06051 as measured", ig.MismatchKL, ig.RatioMax)
	}
}

// A row the trainer cannot score as sampled fails the update (ErrBatch,
// wrapping policy.ErrSampler) naming the row and the next step.
func TestSamplerColumnRefused(t *testing.T) {
	m := embeddedModel(t)
	for _, tc := range []struct {
		name, sampler, want string
	}{
		{"top_p", `{"n":8,"temperature":1,"top_p":0.9,"max_tokens":5}`,
			"top_p 0.9 trains a policy rlpipe cannot score (the nucleus changes with every token); sample the train stage's rollouts without top_p (temperature alone is trained exactly)"},
		{"not json", `n=8`,
			`"n=8" is not a JSON object of sampling parameters: invalid character '=' in literal null (expecting 'u')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleBatch(t, m, nil, 2, 1)
			b.Rewards[0].Total, b.Rewards[8].Total = 1, 1
			tr := &b.Trajectories[3]
			tr.Sampler = tc.sampler
			_, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), b)
			want := fmt.Sprintf("inconsistent training batch: sample 3 of prompt %q: sampler column: %s", tr.PromptID, tc.want)
			if !errors.Is(err, embedded.ErrBatch) || !errors.Is(err, policy.ErrSampler) || err == nil || err.Error() != want {
				t.Fatalf("error %v\nwant ErrBatch and ErrSampler saying\n%s", err, want)
			}
		})
	}
}
