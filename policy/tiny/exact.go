package tiny

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
)

// ExactPass is the exact metric of an evaluation of the embedded model
// (policy.ExactScorer, which evaluation finds on the opened policy's
// model): for each prompt, the probability that one sample at
// temperature 1 is exactly its reference answer followed by EOS, from
// teacher-forced token probabilities, with the checkpoint in adapterDir
// (a PEFT adapter, or a full fine-tune's weights; "" for the base model). It fits tasks whose only correct completion is
// the answer itself (the arithmetic task); for others the sampled metrics
// apply.
func (m *Model) ExactPass(ctx context.Context, adapterDir string, prompts []tables.Prompt) ([]float64, error) {
	var a *Adapter
	scorer := m
	if adapterDir != "" {
		kind, err := policy.CheckpointKind(adapterDir)
		if err != nil {
			return nil, err
		}
		if kind == policy.KindWeights {
			// A full fine-tune's checkpoint: score its own weights.
			if scorer, err = LoadWeightsDir(m, adapterDir); err != nil {
				return nil, err
			}
		} else if a, err = m.LoadAdapter(adapterDir); err != nil {
			return nil, err
		}
	}
	batch := make([]Example, len(prompts))
	for i, p := range prompts {
		prompt, err := m.Tokenize(p.Prompt)
		if err != nil {
			return nil, fmt.Errorf("problem %s: %w", p.PromptID, err)
		}
		ans, err := m.Tokenize(p.Answer)
		if err != nil {
			return nil, fmt.Errorf("problem %s: answer: %w", p.PromptID, err)
		}
		batch[i] = Example{Prompt: prompt, Completion: append(ans, EOS)}
	}
	return scorer.completionProbabilities(ctx, a, batch)
}

// TinyModel returns m: the capability the grpo trainer
// (trainers/embedded.Trainable) finds on an opened policy's model, the
// embedded engine's weights whose LoRA adapter it trains.
func (m *Model) TinyModel() *Model { return m }
