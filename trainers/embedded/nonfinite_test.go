package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// TestUpdateRefusesNonfiniteValues: a reward total that says ok but is
// NaN, a NaN logprob and an infinite given advantage of a sample the
// trainer would train on fail the update with advantages.ErrNonfinite (an
// ErrBatch) naming the file, the row and the sample, before any step.
func TestUpdateRefusesNonfiniteValues(t *testing.T) {
	m := embeddedModel(t)
	const prefix = "inconsistent training batch: a value is NaN or infinite: "
	for _, tc := range []struct {
		name   string
		mutate func(*embedded.Batch) string // returns the message wanted
	}{
		{"a NaN total with status ok", func(b *embedded.Batch) string {
			b.Rewards[2].Total = math.NaN()
			return fmt.Sprintf(`rewards.parquet row 3 (prompt %q, sample 2): total NaN with status ok; make the reward finite, or give the row status nonfinite so that it is masked, and rescore the iteration (rlpipe rescore --reward)`,
				b.Rewards[2].PromptID)
		}},
		{"a NaN logprob", func(b *embedded.Batch) string {
			tr := &b.Trajectories[9]
			tr.Logprobs[0] = float32(math.NaN())
			return fmt.Sprintf(`trajectories.parquet row 10 (prompt %q, sample 1): logprob 1 of %d is NaN; a sampled token's logprob must be a number: check the policy server's logprobs`,
				tr.PromptID, len(tr.Logprobs))
		}},
		{"an infinite given advantage", func(b *embedded.Batch) string {
			j, err := advantages.Join(b.Trajectories, b.Rewards, advantages.TrainOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b.Advantages = j.Advantages
			b.Advantages[0].Advantage = math.Inf(1)
			return fmt.Sprintf(`advantages.parquet row 1 (prompt %q, sample 0): advantage +Inf is not masked; recompute the table (the loop's advantages step writes finite ones)`,
				b.Advantages[0].PromptID)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleBatch(t, m, nil, 2, 1)
			// Give every group two rewards so no group is dropped.
			b.Rewards[0].Total, b.Rewards[8].Total = 1, 1
			b.Rewards[1].Total, b.Rewards[9].Total = 0, 0
			want := prefix + tc.mutate(&b)
			_, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), b)
			if !errors.Is(err, advantages.ErrNonfinite) || !errors.Is(err, embedded.ErrBatch) || err.Error() != want {
				t.Fatalf("error %v\nwant the ErrNonfinite %s", err, want)
			}
		})
	}
}
