package tiny

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Example is a prompt and a completion as token ids. The model prepends
// BOS; the prompt holds no special tokens and the completion may end with
// EOS. Together they must fit the context: len(Prompt)+len(Completion) ≤
// Context (BOS takes a position, the completion's last token needs none).
type Example struct {
	Prompt     []int32
	Completion []int32
	// Temperature is the temperature the completion was sampled at: its
	// tokens' log-probabilities and entropies are those of softmax(z/T),
	// as Generate records them, and gradients flow through z/T. 0 and 1
	// mean the model's own distribution (a greedy sample's
	// log-probabilities are untempered too).
	Temperature float64
	// NoGradient says the loss of a training step gives this example's
	// tokens a zero gradient (a GRPO sample of advantage 0 without a KL
	// or entropy term): the step runs its forward pass, for its
	// log-probabilities, and skips its backward pass, whose every term
	// would be zero. The gradient keeps every bit (see Trainer.StepEntropy);
	// a loss that gives such an example a gradient fails the step.
	// Scoring ignores it.
	NoGradient bool
}

// checkExample reports why e cannot be scored.
func (m *Model) checkExample(i int, e Example) error {
	V := int32(m.cfg.VocabSize())
	for j, t := range e.Prompt {
		if (t < numSpecial && t != EOS) || t >= V {
			return fmt.Errorf("example %d: prompt token %d at %d: %w as prompt text (ids %d..%d, or EOS ending an earlier reply)", i, t, j+1, ErrVocabulary, numSpecial, V-1)
		}
	}
	for j, t := range e.Completion {
		if t < 0 || t >= V {
			return fmt.Errorf("example %d: completion token %d at %d: %w (ids 0..%d)", i, t, j+1, ErrVocabulary, V-1)
		}
	}
	if !validTemperature(e.Temperature) {
		return fmt.Errorf("example %d: temperature %g: it must be finite and ≥ 0", i, e.Temperature)
	}
	if n := len(e.Prompt) + len(e.Completion); n > m.cfg.Context {
		return fmt.Errorf("example %d: %d prompt + %d completion tokens exceed the context of %d", i, len(e.Prompt), len(e.Completion), m.cfg.Context)
	}
	return nil
}

// inputRows is the number of rows an example takes in a packed batch:
// BOS, the prompt and the completion but its last token; 0 without a
// completion.
func inputRows(e Example) int {
	if len(e.Completion) == 0 {
		return 0
	}
	return len(e.Prompt) + len(e.Completion)
}

// pack lays examples out in a; it returns the first row of each example.
func (a *acts) pack(batch []Example) []int {
	starts, _ := a.packLive(batch, false)
	return starts
}

// packLive packs batch as pack does, except that with live the examples
// marked NoGradient go after all the others (each group in batch order);
// it returns the rows before them: a backward pass over those first rows
// is the whole batch's.
func (a *acts) packLive(batch []Example, live bool) (starts []int, liveRows int) {
	rows := 0
	for _, e := range batch {
		rows += inputRows(e)
	}
	a.reset(rows)
	starts = make([]int, len(batch))
	at := 0
	for _, noGrad := range []bool{false, true} {
		if noGrad {
			liveRows = at
		}
		for i, e := range batch {
			if live && e.NoGradient != noGrad || !live && noGrad {
				continue
			}
			starts[i] = at
			n := inputRows(e)
			if n == 0 {
				continue
			}
			a.spans = append(a.spans, span{at, n})
			for j := 0; j < n; j++ {
				var t int32
				switch {
				case j == 0:
					t = BOS
				case j <= len(e.Prompt):
					t = e.Prompt[j-1]
				default:
					t = e.Completion[j-1-len(e.Prompt)]
				}
				a.tokens[at+j], a.pos[at+j], a.start[at+j] = t, int32(j), int32(at)
			}
			at += n
		}
	}
	if !live {
		liveRows = at
	}
	return starts, liveRows
}

// gather copies each example's completion log-probabilities and entropies
// out of a forward pass.
func (a *acts) gather(batch []Example, starts []int, lp, ent [][]float32) {
	V := a.cfg.VocabSize()
	for i, e := range batch {
		for j, t := range e.Completion {
			r := starts[i] + len(e.Prompt) + j
			lp[i][j] = a.logp[r*V+int(t)]
			ent[i][j] = a.ent[r]
		}
	}
}

// ragged returns slices shaped like the batch's completions, backed by
// one buffer.
func ragged(batch []Example) [][]float32 {
	n := 0
	for _, e := range batch {
		n += len(e.Completion)
	}
	buf := make([]float32, n)
	out := make([][]float32, len(batch))
	for i, e := range batch {
		out[i], buf = buf[:len(e.Completion):len(e.Completion)], buf[len(e.Completion):]
	}
	return out
}

// Score returns the teacher-forced log-probability of every completion
// token given the prompt and the completion's earlier tokens, and the
// entropy of the distribution it was drawn from, under the base model
// (a == nil) or the adapter a. Log-probabilities are at the example's
// Temperature (1 when 0) without top-p, PAD and BOS excluded: exactly
// those Generate returns for the same tokens at that temperature.
// Examples are scored in parallel; the results do not depend on how
// the batch is split.
func (m *Model) Score(ctx context.Context, a *Adapter, batch []Example) (logprobs, entropies [][]float32, err error) {
	for i, e := range batch {
		if err := m.checkExample(i, e); err != nil {
			return nil, nil, fmt.Errorf("score: %w", err)
		}
	}
	w, err := m.weightsFor(a)
	if err != nil {
		return nil, nil, fmt.Errorf("score: %w", err)
	}
	logprobs, entropies = ragged(batch), ragged(batch)
	err = m.forwardChunks(ctx, w, batch, func(ac *acts, lo, hi int, starts []int) {
		ac.temper(batch[lo:hi], starts)
		ac.gather(batch[lo:hi], starts, logprobs[lo:hi], entropies[lo:hi])
	})
	if err != nil {
		return nil, nil, fmt.Errorf("score: %w", err)
	}
	return logprobs, entropies, nil
}

// forwardChunks runs w over batch in chunks of 64 examples, in parallel,
// and hands each chunk's activations to read (called concurrently, for
// disjoint [lo, hi)); it returns ctx's error if it was cancelled.
func (m *Model) forwardChunks(ctx context.Context, w *weights, batch []Example, read func(ac *acts, lo, hi int, starts []int)) error {
	const chunk = 64
	var err error
	workers := min(runtime.GOMAXPROCS(0), (len(batch)+chunk-1)/chunk)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for wk := 0; wk < workers; wk++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ac := m.getActs()
			defer m.putActs(ac)
			for lo := wk * chunk; lo < len(batch); lo += workers * chunk {
				if e := ctx.Err(); e != nil {
					mu.Lock()
					err = e
					mu.Unlock()
					return
				}
				hi := min(lo+chunk, len(batch))
				starts := ac.pack(batch[lo:hi])
				w.forward(ac, nil)
				read(ac, lo, hi, starts)
			}
		}()
	}
	wg.Wait()
	return err
}

func (m *Model) getActs() *acts {
	if a, ok := m.actsPool.Get().(*acts); ok {
		return a
	}
	return newActs(m.cfg)
}

func (m *Model) putActs(a *acts) { m.actsPool.Put(a) }
