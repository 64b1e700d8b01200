package embedded

import (
	"fmt"
	"slices"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Batch is what one update trains on (grpo.Batch): nil Advantages
// computes them.
type Batch = grpo.Batch

// sample is one trajectory ready to train on.
type sample struct {
	prompt    string // the trajectory's prompt id and sample index
	index     int
	ex        tiny.Example
	old       []float32 // nil: rescore with the policy before the update
	advantage float64
	// trainable marks the completion's tokens that enter the loss; nil:
	// all (a single-turn sample). An episode's completion runs from its
	// first reply to its end, observations between replies included.
	trainable []bool
}

// prepared is a batch joined, masked and tokenized.
type prepared struct {
	samples    []sample
	advantages []tables.Advantage // one per trajectory, (prompt, sample) order
	stats      advantages.Stats
	trajs      []tables.Trajectory // same order as advantages
	// scored are the rewards in the same order, with the status of a
	// failed trajectory or a missing reward not ok.
	scored []tables.Reward
}

// prepare joins the batch's tables, computes group-normalised advantages
// over the samples that were generated and scored (advantages.Join) or
// takes the batch's (advantages.Given), and tokenizes the ones to train
// on. A trajectory that failed (status other
// than ok) is masked and stays out of its group's statistics: it is never
// trained on as a reward of 0.
func prepare(m *tiny.Model, b Batch, o Options) (*prepared, error) {
	prompts := make(map[string]tables.Prompt, len(b.Prompts))
	for _, p := range b.Prompts {
		prompts[p.PromptID] = p
	}
	j, err := advantages.Train(b.Trajectories, b.Rewards, b.Advantages, o.advantages())
	if err != nil {
		return nil, err
	}
	p := &prepared{advantages: j.Advantages, stats: j.Stats, trajs: j.Trajectories, scored: j.Scored}
	for i, t := range j.Trajectories {
		a := j.Advantages[i]
		if a.Mask {
			continue
		}
		pr, ok := prompts[t.PromptID]
		if !ok {
			return nil, fmt.Errorf("%w: trajectory %d of prompt %q has no row in the prompts table", ErrBatch, t.SampleIndex, t.PromptID)
		}
		if t.Logprobs == nil && t.Staleness > 0 && !o.RescoreStale {
			return nil, fmt.Errorf("%w: sample %d of prompt %q was drawn %d update(s) before the trainer's adapter, which would rescore it and anchor the ratio on a policy that did not sample it; "+
				"have the policy return logprobs, run on-policy (overlap.max_staleness: 0), or set trainer.rescore_stale: true to accept it",
				ErrStaleNoLogprobs, t.SampleIndex, t.PromptID, t.Staleness)
		}
		temp, err := temperature(t)
		if err != nil {
			return nil, err
		}
		if t.IsEpisode() {
			if t.Sequence == nil {
				// Join masks it (ReasonNoSequence); given advantages that
				// do not were written by other code.
				return nil, fmt.Errorf("%w: episode %d of prompt %q has no exact token sequence but its advantage is not masked (want reason %q)",
					ErrBatch, t.SampleIndex, t.PromptID, advantages.ReasonNoSequence)
			}
			smp, err := episode(m, t)
			if err != nil {
				return nil, err
			}
			smp.prompt, smp.index, smp.advantage = t.PromptID, int(t.SampleIndex), a.Advantage
			smp.ex.Temperature = temp
			p.samples = append(p.samples, smp)
			continue
		}
		ex, err := example(m, pr, t)
		if err != nil {
			return nil, err
		}
		ex.Temperature = temp
		p.samples = append(p.samples, sample{prompt: t.PromptID, index: int(t.SampleIndex), ex: ex, old: t.Logprobs, advantage: a.Advantage})
	}
	return p, nil
}

// episode is a multi-turn episode ready to train on: its exact token
// sequence (sequence_ids) split before its first trainable token, the
// rest the completion with its trainable mask, and the old logprobs of
// the trainable tokens in their places (the table's logprobs, the
// replies' in order). Nothing is re-tokenized: the trainable tokens must
// be the replies' token ids, in order.
//
// A sequence may begin with BOS: a server that renders the model's chat
// template ({{ bos_token }} first, as the exported model's does) returns
// it in its prompt token ids, as vLLM does. The model prepends its own
// BOS to whatever it scores, so that one is dropped; the context is the
// same. Error positions count it.
func episode(m *tiny.Model, t tables.Trajectory) (sample, error) {
	where := fmt.Sprintf("episode %d of prompt %q", t.SampleIndex, t.PromptID)
	at := 1 // the 1-based position in sequence_ids of t.Sequence[0]
	if len(t.Sequence) > 0 && len(t.Trainable) == len(t.Sequence) && t.Sequence[0] == tiny.BOS && t.Trainable[0] == 0 {
		t.Sequence, t.Trainable, at = t.Sequence[1:], t.Trainable[1:], 2
	}
	first := slices.Index(t.Trainable, 1)
	if first < 0 {
		return sample{}, fmt.Errorf("%w: %s: its trainable mask marks no token of its %d", ErrBatch, where, len(t.Sequence))
	}
	if t.Logprobs != nil && len(t.Logprobs) != len(t.TokenIDs) {
		return sample{}, fmt.Errorf("%w: %s has %d logprobs for %d token ids", ErrBatch, where, len(t.Logprobs), len(t.TokenIDs))
	}
	s := sample{ex: tiny.Example{Prompt: t.Sequence[:first], Completion: t.Sequence[first:]}}
	s.trainable = make([]bool, len(s.ex.Completion))
	if t.Logprobs != nil {
		s.old = make([]float32, len(s.ex.Completion))
	}
	k := 0 // the next reply token
	for j, mark := range t.Trainable[first:] {
		if mark != 1 {
			continue
		}
		if k >= len(t.TokenIDs) || t.TokenIDs[k] != s.ex.Completion[j] {
			return sample{}, fmt.Errorf("%w: %s: token %d of sequence_ids is trainable but is not reply token %d of token_ids: the mask does not cover exactly the policy's tokens",
				ErrBatch, where, first+j+at, k+1)
		}
		s.trainable[j] = true
		if s.old != nil {
			s.old[j] = t.Logprobs[k]
		}
		k++
	}
	if k != len(t.TokenIDs) {
		return sample{}, fmt.Errorf("%w: %s: its mask marks %d tokens for %d reply tokens in token_ids", ErrBatch, where, k, len(t.TokenIDs))
	}
	cfg := m.Config()
	V := int32(cfg.VocabSize())
	for j, id := range t.Sequence {
		// PAD and BOS can be sampled (see example); elsewhere they mean
		// another model's tokenizer.
		sampled := j < len(t.Trainable) && t.Trainable[j] == 1 && id >= 0
		if (id < tiny.EOS && !sampled) || id >= V {
			return sample{}, fmt.Errorf("%w: %s: token %d at %d of sequence_ids is not a token of %s (ids %d..%d, or BOS first, or any id below %d in a reply); was it sampled from another model?",
				ErrBatch, where, id, j+at, m.Version(), tiny.EOS, V-1, V)
		}
	}
	if n := len(t.Sequence); n > cfg.Context {
		return sample{}, fmt.Errorf("%w: %s: %d tokens exceed the context of %d", ErrBatch, where, n, cfg.Context)
	}
	return s, nil
}

// example rebuilds what the policy saw and produced: the prompt tokenized
// as the embedded sampler does (tiny.Model.PromptTokens) and the sampled
// token ids, the final EOS included. Any id of the vocabulary is a
// completion token, PAD and BOS too: samplers draw from the whole
// distribution (the embedded one and vLLM alike), where those two have
// next to no probability but not none, and a completion that holds one is
// trained on like any other. An EOS before the end, or an id outside the
// vocabulary, means another model.
func example(m *tiny.Model, pr tables.Prompt, t tables.Trajectory) (tiny.Example, error) {
	where := fmt.Sprintf("sample %d of prompt %q", t.SampleIndex, t.PromptID)
	req := policy.Request{Prompt: pr.Prompt}
	if len(pr.Messages) > 0 {
		req = policy.Request{Messages: make([]policy.Message, len(pr.Messages))}
		for i, msg := range pr.Messages {
			req.Messages[i] = policy.Message{Role: msg.Role, Content: msg.Content}
		}
	}
	prompt, err := m.PromptTokens(req)
	if err != nil {
		return tiny.Example{}, fmt.Errorf("%w: %s: the prompt %w", ErrBatch, where, err)
	}
	if t.Logprobs != nil && len(t.Logprobs) != len(t.TokenIDs) {
		return tiny.Example{}, fmt.Errorf("%w: %s has %d logprobs for %d token ids", ErrBatch, where, len(t.Logprobs), len(t.TokenIDs))
	}
	cfg := m.Config()
	V := int32(cfg.VocabSize())
	for j, id := range t.TokenIDs {
		if id < 0 || id >= V || (id == tiny.EOS && j != len(t.TokenIDs)-1) {
			return tiny.Example{}, fmt.Errorf("%w: %s: token %d at %d is not a completion token of %s (ids 0..%d, EOS only last); was it sampled from another model?",
				ErrBatch, where, id, j+1, m.Version(), V-1)
		}
	}
	if n := len(prompt) + len(t.TokenIDs); n > cfg.Context {
		return tiny.Example{}, fmt.Errorf("%w: %s: %d prompt + %d completion tokens exceed the context of %d", ErrBatch, where, len(prompt), len(t.TokenIDs), cfg.Context)
	}
	return tiny.Example{Prompt: prompt, Completion: t.TokenIDs}, nil
}
