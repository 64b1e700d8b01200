package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// OutValues is the train task's output of PPO's per-token values
// (tables.TokenValues, runs.ValuesFile), declared with the critic only;
// the external trainer's too (grpo.OutValues).
const OutValues = grpo.OutValues

// CriticDir is the critic's subdirectory of the adapter output: a PEFT
// adapter (adapter_config.json, adapter_model.safetensors),
// tiny.ValueHeadFile and the critic's OptimizerFile (grpo.CriticDir, the
// external trainer's layout too).
const CriticDir = grpo.CriticDir

// PPOFigures are an update's PPO figures, in Metrics when the critic is
// on: the value loss's means over the steps, and the batch's figures
// from the old values (before the update).
type PPOFigures struct {
	CriticStep
	// ExplainedVariance is 1 − Var(R − V_old)/Var(R) over the trainable
	// tokens: 1 when the critic predicts the returns, ≤ 0 when it
	// predicts nothing; nil (null) when the returns do not vary.
	ExplainedVariance *float64 `json:"explained_variance"`
	// ValuesMean and ReturnsMean are the old values' and the returns'
	// means over the trainable tokens.
	ValuesMean  float64 `json:"values_mean"`
	ReturnsMean float64 `json:"returns_mean"`
}

// CriticStep are one critic step's figures.
type CriticStep struct {
	// ValueLoss is ½·agg(max((V − R)², (clip(V, V_old ± c) − R)²)).
	ValueLoss float64 `json:"value_loss"`
	// VFClipFrac is the fraction of trainable tokens whose clipped term
	// was the larger.
	VFClipFrac float64 `json:"vf_clip_frac"`
	// CriticGradNorm is the critic's gradient's global L2 norm before
	// clipping.
	CriticGradNorm float64 `json:"critic_grad_norm"`
}

// ppoBatch is what PPO trains a batch on, per completion token of each
// sample (the samples' order): the rewards, the old values, the returns
// and the whitened advantages.
type ppoBatch struct {
	rewards, values, returns, adv [][]float64
	figures                       PPOFigures
}

// newCritic starts a fresh critic of the adapter's shape.
func (t *Trainer) newCritic() error {
	ad := t.ad
	c, err := t.m.NewCritic(tiny.LoRAConfig{Name: "critic", Rank: ad.Rank(), Alpha: ad.Scaling() * float64(ad.Rank()), Targets: ad.Targets(), Seed: t.o.LoRA.Seed})
	if err != nil {
		return fmt.Errorf("%w: critic: %v", ErrOptions, err)
	}
	return t.useCritic(c)
}

func (t *Trainer) useCritic(c *tiny.Critic) error {
	tc := t.o.trainConfig()
	tc.LR = t.o.Critic.LR
	ctr, err := tiny.NewCriticTrainer(t.m, c, tc)
	if err != nil {
		return fmt.Errorf("%w: critic: %v", ErrOptions, err)
	}
	t.critic, t.ctr = c, ctr
	return nil
}

// loadCritic continues the critic saved under dir's CriticDir. Without
// one, a fresh critic starts when fresh allows it; otherwise the error
// wraps ErrNoCritic.
func (t *Trainer) loadCritic(dir string, fresh bool) error {
	cdir := filepath.Join(dir, CriticDir)
	if _, err := os.Stat(cdir); errors.Is(err, fs.ErrNotExist) {
		if !fresh && t.o.Critic.Missing != MissingFresh {
			return ErrNoCritic
		}
		t.freshCritic = true
		return t.newCritic()
	} else if err != nil {
		return fmt.Errorf("load the critic: %w", err)
	}
	c, err := t.m.LoadCritic(cdir)
	if err != nil {
		return err
	}
	if err := t.useCritic(c); err != nil {
		return err
	}
	opt := filepath.Join(cdir, OptimizerFile)
	if _, err := os.Stat(opt); err == nil {
		return t.ctr.LoadState(opt)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("load the critic's optimizer state: %w", err)
	}
	return nil
}

// saveCritic writes the critic and its optimizer state under dir's
// CriticDir.
func (t *Trainer) saveCritic(dir string) error {
	cdir := filepath.Join(dir, CriticDir)
	if err := t.critic.SaveWith(cdir, unsynced); err != nil {
		return err
	}
	return t.ctr.SaveStateWith(filepath.Join(cdir, OptimizerFile), unsynced)
}

// ppoTargets computes, before any step, what PPO trains the batch on:
// the old values (the critic before the update), the per-token rewards —
// the sample's reward (the advantages table's advantage under gae) on
// its last trainable token and, with KLInReward, −β·(logπ_old − logπ_ref)
// on every trainable one — GAE's advantages and returns over the
// trainable tokens (observations in between carry the running values),
// and the advantages whitened over the batch's trainable tokens. A
// non-finite value, return or advantage fails, naming the sample.
func (t *Trainer) ppoTargets(ctx context.Context, samples []sample, examples []tiny.Example, ref [][]float64) (*ppoBatch, error) {
	vals, err := t.m.Values(ctx, t.critic, examples)
	if err != nil {
		return nil, fmt.Errorf("score old values: %w", err)
	}
	n := len(samples)
	p := &ppoBatch{rewards: make([][]float64, n), values: vals, returns: make([][]float64, n), adv: make([][]float64, n)}
	masks := make([][]bool, n)
	g := t.o.GAE
	for i, s := range samples {
		if t.o.KLInReward && len(ref) == 0 {
			return nil, fmt.Errorf("kl_in_reward: no reference logprobs (beta is %g)", t.o.Beta)
		}
		masks[i] = s.trainable
		r := make([]float64, len(s.ex.Completion))
		last := -1
		for j := range r {
			if s.trainable != nil && !s.trainable[j] {
				continue
			}
			last = j
			if t.o.KLInReward {
				r[j] = -t.o.Beta * (float64(s.old[j]) - ref[i][j])
			}
		}
		if last >= 0 {
			r[last] += s.advantage
		}
		p.rewards[i] = r
		p.adv[i], p.returns[i] = advantages.GAE(r, vals[i], s.trainable, g.Gamma, g.Lambda)
		if err := s.finite("value", vals[i]); err != nil {
			return nil, err
		}
		if err := s.finite("return", p.returns[i]); err != nil {
			return nil, err
		}
	}
	advantages.Whiten(p.adv, masks)
	for i, s := range samples {
		if err := s.finite("advantage", p.adv[i]); err != nil {
			return nil, err
		}
	}
	if ev := advantages.ExplainedVariance(vals, p.returns, masks); !math.IsNaN(ev) {
		p.figures.ExplainedVariance = &ev
	}
	p.figures.ValuesMean = maskedMean(vals, masks)
	p.figures.ReturnsMean = maskedMean(p.returns, masks)
	return p, nil
}

// finite reports the first non-finite value of xs, one per completion
// token of s, naming s.
func (s *sample) finite(what string, xs []float64) error {
	for j, x := range xs {
		if s.trainable != nil && !s.trainable[j] {
			continue
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("sample %d of prompt %q: the critic's %s at completion token %d is %g: %w; the critic diverged or its state is corrupt: retrain it (trainer.critic.missing: fresh from an adapter without critic/) or lower trainer.critic.lr",
				s.index, s.prompt, what, j+1, x, grpo.ErrNonFinite)
		}
	}
	return nil
}

func maskedMean(xs [][]float64, masks [][]bool) float64 {
	var sum float64
	n := 0
	for i, row := range xs {
		for j, x := range row {
			if masks[i] == nil || masks[i][j] {
				sum += x
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// criticStep takes one critic step on the samples [from, from+len(ex)).
func (t *Trainer) criticStep(ctx context.Context, samples []sample, ex []tiny.Example, p *ppoBatch, from int) (CriticStep, error) {
	var res grpo.ValueLossResult
	loss := func(values, grad [][]float64) (float64, error) {
		seqs := make([]grpo.ValueSequence, len(values))
		for i := range values {
			k := from + i
			seqs[i] = grpo.ValueSequence{Values: values[i], OldValues: p.values[k], Returns: p.returns[k], Trainable: samples[k].trainable}
		}
		r, err := grpo.ValueLoss(seqs, grpo.ValueLossOptions{ClipRange: t.o.Critic.ClipRangeValue, Aggregation: t.o.Aggregation})
		if err != nil {
			return 0, err
		}
		for i, g := range r.Grad {
			copy(grad[i], g)
		}
		res = r
		return r.Loss, nil
	}
	ss, err := t.ctr.StepValues(ctx, ex, loss)
	if err != nil {
		return CriticStep{}, fmt.Errorf("critic step %d: %w", t.ctr.Steps()+1, err)
	}
	if math.IsNaN(ss.GradNorm) || math.IsInf(ss.GradNorm, 0) || math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return CriticStep{}, fmt.Errorf("critic step %d: value loss %g, gradient norm %g: %w; the critic is corrupt", ss.Step, res.Loss, ss.GradNorm, grpo.ErrNonFinite)
	}
	return CriticStep{ValueLoss: res.Loss, VFClipFrac: res.ClipFrac, CriticGradNorm: ss.GradNorm}, nil
}

// valueRows are the batch's values table: one row per trained sample, in
// (prompt id, sample index) order, each trainable token's figures.
func (p *ppoBatch) valueRows(samples []sample) []tables.TokenValue {
	rows := make([]tables.TokenValue, len(samples))
	for i, s := range samples {
		row := tables.TokenValue{PromptID: s.prompt, SampleIndex: int32(s.index)}
		for j := range s.ex.Completion {
			if s.trainable != nil && !s.trainable[j] {
				continue
			}
			row.Rewards = append(row.Rewards, p.rewards[i][j])
			row.Values = append(row.Values, p.values[i][j])
			row.Returns = append(row.Returns, p.returns[i][j])
			row.Advantages = append(row.Advantages, p.adv[i][j])
		}
		rows[i] = row
	}
	return rows
}
