package evaluators

import (
	"context"
	"fmt"
	"math"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// TinyExact returns a TaskOptions.Exact for the embedded model: each
// problem's probability that one sample at temperature 1 is exactly its
// reference answer followed by EOS, from teacher-forced token
// probabilities. It fits tasks whose only correct completion is the answer
// itself (the arithmetic task); for others the sampled metrics apply.
func TinyExact(m *tiny.Model) func(ctx context.Context, adapterDir string, prompts []tables.Prompt) ([]float64, error) {
	return func(ctx context.Context, adapterDir string, prompts []tables.Prompt) ([]float64, error) {
		var a *tiny.Adapter
		if adapterDir != "" {
			var err error
			if a, err = m.LoadAdapter(adapterDir); err != nil {
				return nil, err
			}
		}
		batch := make([]tiny.Example, len(prompts))
		for i, p := range prompts {
			prompt, err := m.Tokenize(p.Prompt)
			if err != nil {
				return nil, fmt.Errorf("problem %s: %w", p.PromptID, err)
			}
			ans, err := m.Tokenize(p.Answer)
			if err != nil {
				return nil, fmt.Errorf("problem %s: answer: %w", p.PromptID, err)
			}
			batch[i] = tiny.Example{Prompt: prompt, Completion: append(ans, tiny.EOS)}
		}
		lp, _, err := m.Score(ctx, a, batch)
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(lp))
		for i, l := range lp {
			s := 0.0
			for _, v := range l {
				s += float64(v)
			}
			out[i] = math.Exp(s)
		}
		return out, nil
	}
}
