package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// asEpisodes turns each single-turn sample of b into the one-turn episode
// of the same tokens: its prompt then its reply, the reply trainable.
func asEpisodes(t *testing.T, m *tiny.Model, b embedded.Batch) embedded.Batch {
	t.Helper()
	prompts := map[string]string{}
	for _, p := range b.Prompts {
		prompts[p.PromptID] = p.Prompt
	}
	out := embedded.Batch{Prompts: b.Prompts, Rewards: b.Rewards}
	for _, tr := range b.Trajectories {
		ids, err := m.Tokenize(prompts[tr.PromptID])
		if err != nil {
			t.Fatal(err)
		}
		tr.Turns = []tables.Turn{{Role: "user", Content: prompts[tr.PromptID]}, {Role: "assistant", Content: tr.Completion}}
		tr.Sequence = append(ids, tr.TokenIDs...)
		tr.Trainable = make([]int32, len(tr.Sequence))
		for k := len(ids); k < len(tr.Sequence); k++ {
			tr.Trainable[k] = 1
		}
		out.Trajectories = append(out.Trajectories, tr)
	}
	return out
}

func saved(t *testing.T, tr *embedded.Trainer) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := tr.Save(dir); err != nil {
		t.Fatal(err)
	}
	return readFile(t, dir, "adapter_model.safetensors")
}

// trainsTheSame updates two fresh trainers with o, one on x and one on y
// (named xName and yName in its messages), and fails the test unless both
// took steps on the same tokens with the same figures and loss, and
// saved the same adapter bytes.
func trainsTheSame(t *testing.T, m *tiny.Model, o embedded.Options, xName string, x embedded.Batch, yName string, y embedded.Batch) {
	t.Helper()
	ctx := context.Background()
	a, b := newTrainer(t, m, o), newTrainer(t, m, o)
	ra, err := a.Update(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Update(ctx, y)
	if err != nil {
		t.Fatal(err)
	}
	if len(ra.Metrics.Steps) == 0 || ra.Metrics.TrainTokens == 0 || fmt.Sprint(ra.Metrics.Steps) != fmt.Sprint(rb.Metrics.Steps) ||
		ra.Metrics.Loss != rb.Metrics.Loss || ra.Metrics.TrainTokens != rb.Metrics.TrainTokens {
		t.Errorf("steps\n %s %+v\n %s %+v", xName, ra.Metrics.Steps, yName, rb.Metrics.Steps)
	}
	if !bytes.Equal(saved(t, a), saved(t, b)) {
		t.Errorf("the adapter trained on %s differs from the one trained on %s", yName, xName)
	}
}

// An episode of one turn trains exactly as the single-turn sample of the
// same tokens: the same loss and figures of every step, the same adapter
// bytes.
func TestOneTurnEpisodeTrainsAsItsSample(t *testing.T) {
	m := embeddedModel(t)
	samples := sampleBatch(t, m, nil, 8, 4)
	eps := asEpisodes(t, m, samples)
	if tables.FirstEpisode(eps.Trajectories) != 0 {
		t.Fatal("the episodes batch holds no episode")
	}
	trainsTheSame(t, m, embedded.Options{}, "their samples", samples, "one-turn episodes", eps)
}

// chain is a running sum over three turns: "12+3=", then "+4=" and "-5=",
// each to be answered with the sum so far; 1 for every right answer. It
// speaks the tiny model's vocabulary.
type chain struct {
	sum, turn int
	terms     []int
}

func (c *chain) Reset(_ context.Context, id string) (string, error) {
	r := environments.RNG(id)
	c.sum, c.turn = 10+r.IntN(40), 0
	c.terms = []int{r.IntN(9) + 1, r.IntN(9) + 1, -(r.IntN(9) + 1)}
	c.sum += c.terms[0]
	return strconv.Itoa(c.sum-c.terms[0]) + "+" + strconv.Itoa(c.terms[0]) + "=", nil
}

func (c *chain) Step(_ context.Context, action string) (environments.Step, error) {
	reward := 0.0
	if action == strconv.Itoa(c.sum) {
		reward = 1
	}
	c.turn++
	if c.turn == len(c.terms) {
		return environments.Step{Reward: reward, Done: true}, nil
	}
	next := c.terms[c.turn]
	c.sum += next
	return environments.Step{Observation: fmt.Sprintf("%+d=", next), Reward: reward}, nil
}

func (c *chain) End() error { return nil }

// episodeBatch plays G episodes of chain per prompt with the embedded
// model, as the episodes stage would, and rewards each with its
// environment's sum.
func episodeBatch(t *testing.T, m *tiny.Model, prompts, g int) embedded.Batch {
	t.Helper()
	r, err := environments.NewRunner(tiny.NewPolicy(m), &environments.RunnerOptions{Seed: 7,
		Sampling: policy.Sampling{Temperature: 1, MaxTokens: 4, Logprobs: true, PromptLogprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	var b embedded.Batch
	for p := range prompts {
		id := "c" + strconv.Itoa(p)
		b.Prompts = append(b.Prompts, tables.Prompt{PromptID: id})
		for j := range g {
			res, err := r.Run(context.Background(), &chain{}, environments.Episode{ID: id, SampleIndex: int32(j)})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			tr.GroupID = id
			b.Trajectories = append(b.Trajectories, tr)
			b.Rewards = append(b.Rewards, tables.Reward{PromptID: id, SampleIndex: int32(j), Total: res.Reward,
				Components: map[string]float64{"env": res.Reward}, Status: tables.StatusOK})
		}
	}
	return b
}

// Multi-turn episodes of the embedded model have an exact token sequence
// (each reply's EOS is in the next prompt), and training on them takes
// the loss over the replies' tokens only: the observations between them
// are given, not trained.
func TestMultiTurnEpisodesTrainOnTheirRepliesOnly(t *testing.T) {
	m := embeddedModel(t)
	b := episodeBatch(t, m, 6, 4)
	replies, given := 0, 0
	for i, tr := range b.Trajectories {
		if tr.Sequence == nil {
			t.Fatalf("episode %d has no exact sequence (status %s, turns %d)", i, tr.Status, len(tr.Turns))
		}
		if n := strings.Count(turnRoles(tr.Turns), "assistant"); n != 3 {
			t.Fatalf("episode %d has %d replies, want 3", i, n)
		}
		for _, mark := range tr.Trainable {
			if mark == 1 {
				replies++
			} else {
				given++
			}
		}
	}
	res, err := newTrainer(t, m, embedded.Options{KeepZeroStd: true}).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	met := res.Metrics
	if met.Masked != 0 || len(met.Steps) != 1 || met.TrainTokens != replies || met.Steps[0].Tokens != replies {
		t.Errorf("trained on %d tokens (step: %d), masked %d; want the %d reply tokens of 24 episodes (not the %d given)",
			met.TrainTokens, met.Steps[0].Tokens, met.Masked, replies, given)
	}
	if met.Steps[0].RatioDev > 1e-3 {
		t.Errorf("ratio deviation %g: the old logprobs are not the replies' in their places", met.Steps[0].RatioDev)
	}
}

// An episode whose sequence begins with BOS, as vLLM returns the prompt
// token ids of the exported model's chat template ({{ bos_token }}
// first), trains exactly as the same episode without it: the model
// prepends its own BOS. A BOS anywhere else is another model's token.
func TestEpisodeWithALeadingBOS(t *testing.T) {
	ctx := context.Background()
	m := embeddedModel(t)
	plain := episodeBatch(t, m, 3, 4)
	led := episodeBatch(t, m, 3, 4)
	for i := range led.Trajectories {
		tr := &led.Trajectories[i]
		tr.Sequence = append([]int32{tiny.BOS}, tr.Sequence...)
		tr.Trainable = append([]int32{0}, tr.Trainable...)
	}
	trainsTheSame(t, m, embedded.Options{KeepZeroStd: true}, "the same episodes without BOS", plain, "BOS-led episodes", led)
	// A reply may hold a sampled PAD or BOS (samplers draw from the whole
	// distribution); the trainer takes it.
	tr := &led.Trajectories[1]
	first := slices.Index(tr.Trainable, 1)
	tr.Sequence[first], tr.TokenIDs[0] = tiny.PAD, tiny.PAD
	if _, err := newTrainer(t, m, embedded.Options{KeepZeroStd: true}).Update(ctx, led); err != nil {
		t.Errorf("a PAD sampled in a reply: %v", err)
	}
	led.Trajectories[0].Sequence[2] = tiny.BOS
	if _, err := newTrainer(t, m, embedded.Options{KeepZeroStd: true}).Update(ctx, led); !errors.Is(err, embedded.ErrBatch) ||
		!strings.Contains(err.Error(), `episode 0 of prompt "c0": token 1 at 3 of sequence_ids is not a token of`) {
		t.Errorf("a BOS inside the sequence, outside the replies: %v", err)
	}
}

// Episodes the trainer cannot take: a mask that does not cover exactly
// the replies' tokens fails the batch, naming the episode; one without an
// exact sequence is left out and counted.
func TestEpisodeMasksThatDoNotFit(t *testing.T) {
	m := embeddedModel(t)
	for _, c := range []struct {
		name   string
		mutate func(tr *tables.Trajectory)
		want   string
	}{
		{"a given token marked trainable", func(tr *tables.Trajectory) { tr.Trainable[0] = 1 },
			`episode 0 of prompt "c0": token 1 of sequence_ids is trainable but is not reply token 1 of token_ids`},
		{"a reply token not marked", func(tr *tables.Trajectory) {
			for k := len(tr.Trainable) - 1; k >= 0; k-- {
				if tr.Trainable[k] == 1 {
					tr.Trainable[k] = 0
					return
				}
			}
		}, `episode 0 of prompt "c0": its mask marks`},
		{"no token marked", func(tr *tables.Trajectory) { clear(tr.Trainable) }, "its trainable mask marks no token"},
		{"a token of another model", func(tr *tables.Trajectory) { tr.Sequence[1] = 99 }, "token 99 at 2 of sequence_ids"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := episodeBatch(t, m, 1, 2)
			c.mutate(&b.Trajectories[0])
			_, err := newTrainer(t, m, embedded.Options{KeepZeroStd: true}).Update(context.Background(), b)
			if !errors.Is(err, embedded.ErrBatch) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrBatch saying %q", err, c.want)
			}
		})
	}
	b := episodeBatch(t, m, 2, 2)
	b.Trajectories[1].Sequence, b.Trajectories[1].Trainable = nil, nil
	res, err := newTrainer(t, m, embedded.Options{KeepZeroStd: true}).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Advantages[1]; !a.Mask || a.Reason != advantages.ReasonNoSequence || res.Metrics.MaskReasons[advantages.ReasonNoSequence] != 1 {
		t.Errorf("the episode without a sequence: %+v, mask reasons %v; want it masked: %s", a, res.Metrics.MaskReasons, advantages.ReasonNoSequence)
	}
	// Given advantages that leave it unmasked (other code wrote them) fail the update.
	b.Advantages = append([]tables.Advantage(nil), res.Advantages...)
	b.Advantages[1].Mask, b.Advantages[1].Reason = false, ""
	if _, err := newTrainer(t, m, embedded.Options{KeepZeroStd: true}).Update(context.Background(), b); !errors.Is(err, embedded.ErrBatch) ||
		!strings.Contains(err.Error(), `episode 1 of prompt "c0" has no exact token sequence but its advantage is not masked`) {
		t.Errorf("unmasked given advantages: %v", err)
	}
}

func turnRoles(ts []tables.Turn) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Role + " ")
	}
	return b.String()
}
