package grpo

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// ValueSequence is one sample as PPO's critic loss sees it, per token of
// its completion (Trainable marks those that enter the loss; nil: all).
type ValueSequence struct {
	// Values are the critic's current predictions V_θ, OldValues those
	// GAE used (the critic before the update), Returns GAE's returns.
	Values, OldValues, Returns []float64
	Trainable                  []bool
}

// ValueLossOptions shape the critic's loss.
type ValueLossOptions struct {
	// ClipRange c keeps V_θ within OldValues ± c in the clipped term
	// (verl's cliprange_value; must be > 0).
	ClipRange float64
	// Aggregation is the policy loss's (default TokenMean).
	Aggregation Aggregation
}

// ValueLossResult is the critic loss, its gradient with respect to every
// sequence's Values, and the fraction of tokens whose clipped term was
// the larger (verl's vf_clipfrac).
type ValueLossResult struct {
	Loss     float64
	Grad     [][]float64
	ClipFrac float64
}

// ValueLoss is PPO's clipped value loss, verl's
// core_algos.compute_value_loss:
//
//	ℓ_t = ½·max((V − R)², (clip(V, V_old − c, V_old + c) − R)²)
//
// aggregated over the trainable tokens as the policy loss is.
// Grad[i][t] is ∂Loss/∂Values[i][t]: where the clipped term wins and V
// is outside the clip range it is 0.
func ValueLoss(seqs []ValueSequence, o ValueLossOptions) (ValueLossResult, error) {
	agg := cmp.Or(o.Aggregation, TokenMean).Canonical()
	switch {
	case !(o.ClipRange > 0) || math.IsInf(o.ClipRange, 0):
		return ValueLossResult{}, fmt.Errorf("grpo: value clip range %g must be a number above 0", o.ClipRange)
	case !slices.Contains(Aggregations, agg):
		return ValueLossResult{}, fmt.Errorf("grpo: unknown aggregation %q", o.Aggregation)
	}
	trained := func(s *ValueSequence) int { return trainedTokens(s.Trainable, len(s.Values)) }
	for i, s := range seqs {
		if len(s.OldValues) != len(s.Values) || len(s.Returns) != len(s.Values) || s.Trainable != nil && len(s.Trainable) != len(s.Values) {
			return ValueLossResult{}, fmt.Errorf("grpo: sequence %d has %d values, %d old values, %d returns and %d mask entries",
				i, len(s.Values), len(s.OldValues), len(s.Returns), len(s.Trainable))
		}
	}
	w := newWeights(agg, len(seqs), func(i int) (int, int) { return trained(&seqs[i]), len(seqs[i].Values) })
	res := ValueLossResult{Grad: make([][]float64, len(seqs))}
	clipped := 0
	for i := range seqs {
		s := &seqs[i]
		g := make([]float64, len(s.Values))
		res.Grad[i] = g
		n := trained(s)
		if n == 0 {
			continue
		}
		wi := w.of(n)
		for t, v := range s.Values {
			if s.Trainable != nil && !s.Trainable[t] {
				continue
			}
			old, ret := s.OldValues[t], s.Returns[t]
			vc := math.Min(math.Max(v, old-o.ClipRange), old+o.ClipRange)
			l1, l2 := (v-ret)*(v-ret), (vc-ret)*(vc-ret)
			if l2 > l1 { // V is outside the range: the clipped term has no gradient
				clipped++
				res.Loss += wi * 0.5 * l2
				continue
			}
			res.Loss += wi * 0.5 * l1
			g[t] = wi * (v - ret)
		}
	}
	if w.total > 0 {
		res.ClipFrac = float64(clipped) / float64(w.total)
	}
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return ValueLossResult{}, fmt.Errorf("grpo: value loss %g over %d tokens: %w; the step is not applied", res.Loss, w.total, ErrNonFinite)
	}
	return res, nil
}
