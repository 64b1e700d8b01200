package grpo

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Aggregation says how per-token losses become the batch loss.
type Aggregation string

const (
	// TokenMean averages over every token of the batch (DAPO): long
	// completions weigh in proportion to their length.
	TokenMean Aggregation = "token"
	// SequenceMean averages each completion's tokens, then the
	// completions (the original GRPO).
	SequenceMean Aggregation = "sequence"
	// SeqMeanTokenSumNorm sums each completion's tokens, averages the
	// completions and divides by a constant, the longest completion of
	// the batch (Dr. GRPO's G·L_max normaliser; verl's
	// seq-mean-token-sum-norm, whose default constant is the padded
	// width, the same length).
	SeqMeanTokenSumNorm Aggregation = "seq_mean_token_sum_norm"
)

// Canonical is a's spelling in options and versions: verl's names
// token_mean and seq_mean_token_mean are TokenMean and SequenceMean, so
// that naming the default its other way keeps the default's version.
func (a Aggregation) Canonical() Aggregation {
	switch a {
	case "token_mean":
		return TokenMean
	case "seq_mean_token_mean":
		return SequenceMean
	}
	return a
}

// Aggregations are the aggregations' names, for messages.
var Aggregations = []Aggregation{TokenMean, SequenceMean, SeqMeanTokenSumNorm}

// LossOptions shape the clipped surrogate.
type LossOptions struct {
	// EpsLow and EpsHigh bound the ratio to [1−EpsLow, 1+EpsHigh]
	// (default 0.2 each; DAPO's clip-higher uses EpsHigh 0.28).
	EpsLow, EpsHigh float64
	// Beta weighs the KL to the reference policy; 0 leaves it out.
	Beta float64
	// KL is the KL estimator Beta weighs (default K3).
	KL KLEstimator
	// EntropyCoeff, when positive, subtracts c·H per trainable token
	// (H the current policy's entropy there, Sequence.Entropies),
	// aggregated like the rest: an entropy bonus. Its gradient is with
	// respect to the entropies (Gradients.Entropies). 0 leaves it out.
	EntropyCoeff float64
	// Aggregation defaults to TokenMean.
	Aggregation Aggregation
	// DualClip, when not 0, is dual-clip PPO's c (> 1, typically 3): a
	// token with a negative advantage and ρ > c contributes −c·A, with
	// no gradient, however far ρ has gone. 0 leaves it off. PPOClip
	// only.
	DualClip float64
	// Policy is the policy term (nil: PPOClip).
	Policy PolicyLoss
	// Correction is the rollout correction: truncated IS weights and
	// rejection on the behaviour policy (verl's rollout_corr; zero: off).
	Correction RolloutCorrection
}

func (o *LossOptions) defaults() error {
	o.EpsLow = cmp.Or(o.EpsLow, 0.2)
	o.EpsHigh = cmp.Or(o.EpsHigh, 0.2)
	o.Aggregation = cmp.Or(o.Aggregation, TokenMean).Canonical()
	o.KL = o.KL.Canonical()
	switch {
	case o.EpsLow < 0 || o.EpsLow >= 1 || o.EpsHigh < 0:
		return fmt.Errorf("grpo: clip range [1-%g, 1+%g] is not a range around 1", o.EpsLow, o.EpsHigh)
	case o.Beta < 0:
		return fmt.Errorf("grpo: beta %g is negative", o.Beta)
	case o.DualClip != 0 && !(o.DualClip > 1):
		return fmt.Errorf("grpo: dual clip %g must be above 1 (0 turns it off)", o.DualClip)
	case o.DualClip != 0 && o.policy() != PPOClip:
		return fmt.Errorf("grpo: dual clip applies to the %s loss only, not %s", PPOClip.Name(), o.policy().Name())
	case !o.KL.Known():
		return fmt.Errorf("grpo: %q: %w", o.KL, ErrUnknownKLEstimator)
	case !(o.EntropyCoeff >= 0) || math.IsInf(o.EntropyCoeff, 0):
		return fmt.Errorf("grpo: entropy coefficient %g must be finite and ≥ 0", o.EntropyCoeff)
	case !slices.Contains(Aggregations, o.Aggregation):
		return fmt.Errorf("grpo: unknown aggregation %q (use token, sequence or %s)", o.Aggregation, SeqMeanTokenSumNorm)
	}
	o.Correction.EnsureDefaults()
	if err := o.Correction.Check(); err != nil {
		return fmt.Errorf("grpo: rollout correction: %w", err)
	}
	return nil
}

// weights are the per-token weights of an aggregation over a batch: a
// sequence's tokens each weigh of(n), n its trainable tokens.
type weights struct {
	agg                      Aggregation
	total, nonEmpty, longest int
}

// newWeights counts what agg's weights need of n sequences, sequence i
// having trained trainable tokens of all: the trainable tokens, the
// sequences with one, and the longest sequence (its tokens, trainable or
// not).
func newWeights(agg Aggregation, n int, tokens func(i int) (trained, all int)) weights {
	w := weights{agg: agg}
	for i := range n {
		trained, all := tokens(i)
		w.total += trained
		if trained > 0 {
			w.nonEmpty++
		}
		w.longest = max(w.longest, all)
	}
	return w
}

// of is the weight of each trainable token of a sequence with n of them.
func (w weights) of(n int) float64 {
	switch w.agg {
	case SequenceMean:
		return 1 / (float64(w.nonEmpty) * float64(n))
	case SeqMeanTokenSumNorm:
		return 1 / (float64(w.nonEmpty) * float64(w.longest))
	}
	return 1 / float64(w.total)
}

// Sequence is one sampled completion as the loss sees it.
type Sequence struct {
	// Logprobs are the current policy's log-probabilities of the
	// completion's tokens.
	Logprobs []float64
	// OldLogprobs are those of the policy that sampled it (the
	// trajectories table's logprobs column): the ratio's anchor.
	OldLogprobs []float32
	// BehaviourLogprobs, when set, are the sampler's logprobs of a
	// sequence whose anchor OldLogprobs was recomputed by the trainer
	// (verl's decoupled mode): the rollout correction then weighs and
	// rejects by OldLogprobs − BehaviourLogprobs. Nil: the anchor is the
	// behaviour policy (bypass mode). Only the rollout correction reads it.
	BehaviourLogprobs []float32
	// RefLogprobs are the reference policy's (the base model, adapter
	// off); needed when Beta > 0.
	RefLogprobs []float64
	// Entropies are the current policy's per-token entropies: optional,
	// they feed the statistics, and the entropy bonus, which needs them,
	// when EntropyCoeff > 0.
	Entropies []float64
	Advantage float64
	// Advantages, when not nil, are per-token advantages (PPO's GAE),
	// one per token, used in place of Advantage (AdvantageAt).
	Advantages []float64
	// Trainable, when not nil, marks the tokens that enter the loss: an
	// episode's replies (true) among the observations between them
	// (false), which the policy was given, not sampled. A token not
	// trainable has no gradient and counts in no mean; its Logprobs,
	// OldLogprobs and RefLogprobs entries are not read. Nil: every token.
	Trainable []bool
}

// AdvantageAt is token t's advantage: Advantages[t], or the sequence's
// Advantage when there are no per-token ones.
func (s *Sequence) AdvantageAt(t int) float64 {
	if s.Advantages != nil {
		return s.Advantages[t]
	}
	return s.Advantage
}

// trains reports whether token t of s enters the loss.
func (s *Sequence) trains(t int) bool { return s.Trainable == nil || s.Trainable[t] }

// Tokens is the number of s's tokens that enter the loss.
func (s *Sequence) Tokens() int { return trainedTokens(s.Trainable, len(s.Logprobs)) }

// trainedTokens counts the tokens a trainable mask keeps; a nil mask keeps
// all n.
func trainedTokens(trainable []bool, n int) int {
	if trainable == nil {
		return n
	}
	n = 0
	for _, ok := range trainable {
		if ok {
			n++
		}
	}
	return n
}

// LossFigures are the loss's health figures, each a mean over the tokens
// that entered the loss (PolicyLoss and Loss follow the aggregation). A
// step's LossStats hold them, and a trainer's metrics hold their means
// over its steps, under the same JSON keys.
type LossFigures struct {
	Loss       float64 `json:"loss"`
	PolicyLoss float64 `json:"policy_loss"`
	// KL is the mean of the KL estimator's per-token estimate (k3:
	// exp(δ) − δ − 1, δ = logπ_ref − logπ); nil (JSON null) when Beta is
	// 0, which leaves it uncomputed.
	KL      *float64 `json:"kl"`
	Entropy float64  `json:"entropy"`
	// ClipLow is the fraction of tokens whose negative advantage met a
	// ratio below 1−EpsLow (no gradient); ClipHigh those whose positive
	// advantage met a ratio above 1+EpsHigh. GSPO counts its sequence
	// ratio for each of the sequence's tokens; CISPO counts clipped
	// weights whatever the advantage's sign, and keeps their gradient.
	ClipLow  float64 `json:"clip_frac_low"`
	ClipHigh float64 `json:"clip_frac_high"`
	// ClipDual is the fraction of tokens whose negative advantage met a
	// ratio above DualClip (no gradient); nil (left out) when DualClip is
	// off.
	ClipDual *float64 `json:"clip_frac_dual,omitempty"`
	// RatioDev is the mean |ρ − 1|: how far the policy has moved from the
	// one that sampled.
	RatioDev float64 `json:"ratio_dev"`
}

// LossStats are the step's health figures and how many tokens entered
// the loss.
type LossStats struct {
	LossFigures
	// RatioMax is the largest ρ; BehaviourKL the mean k3 estimate
	// ρ − 1 − log ρ of KL(π_old ‖ π) from the tokens π_old sampled. At
	// an update's first step they are the train/inference mismatch
	// (OffPolicy). Tokens the rollout correction rejected count in them
	// (Scored tokens), in no other figure.
	RatioMax    float64 `json:"ratio_max"`
	BehaviourKL float64 `json:"behaviour_kl"`
	Tokens      int     `json:"tokens"`
	// Scored is the number of trainable tokens before the rejection
	// (Tokens without it).
	Scored int `json:"-"`
	// RolloutFigures are the rollout correction's, when it is on.
	RolloutFigures
}

// ErrNonFinite is returned when the loss or a ratio is NaN or infinite:
// the step must fail and the previous adapter stay current.
var ErrNonFinite = errors.New("non-finite loss")

// Loss is the GRPO objective of a batch and its gradient with respect to
// every sequence's Logprobs. Per token, with the policy term ℓ_π of
// o.Policy (PPOClip by default: ρ = exp(logπ − logπ_old),
// ℓ_π = −min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A), capped at −c·A when
// o.DualClip is c > 0 and A < 0, dual-clip PPO):
//
//	ℓ = ℓ_π + β·k(δ) − c_H·H,  δ = logπ_ref − logπ
//
// k the estimator o.KL (k3 = exp(δ) − δ − 1 by default), aggregated by
// o.Aggregation. grads[i][t] is ∂Loss/∂Logprobs[i][t]. With an entropy
// bonus (o.EntropyCoeff > 0) the loss also depends on the entropies:
// Gradient returns both gradients.
func Loss(seqs []Sequence, o LossOptions) (LossStats, [][]float64, error) {
	st, g, err := Gradient(seqs, o)
	return st, g.Logprobs, err
}

// Gradients are the loss's derivatives, shaped like the sequences'
// tokens: Logprobs[i][t] = ∂Loss/∂Logprobs[i][t], Entropies[i][t] =
// ∂Loss/∂Entropies[i][t] (nil unless EntropyCoeff > 0). A model turns the
// second into the gradient of its logits z through
// ∂H/∂z_k = −p_k·(log p_k + H).
type Gradients struct {
	Logprobs, Entropies [][]float64
}

// Gradient is Loss with the gradient with respect to the entropies too.
func Gradient(seqs []Sequence, o LossOptions) (LossStats, Gradients, error) {
	if err := o.defaults(); err != nil {
		return LossStats{}, Gradients{}, err
	}
	var st LossStats
	total := 0
	for i, s := range seqs {
		if len(s.OldLogprobs) != len(s.Logprobs) {
			return st, Gradients{}, fmt.Errorf("grpo: sequence %d has %d old logprobs for %d tokens", i, len(s.OldLogprobs), len(s.Logprobs))
		}
		if o.Beta > 0 && len(s.RefLogprobs) != len(s.Logprobs) {
			return st, Gradients{}, fmt.Errorf("grpo: sequence %d has %d reference logprobs for %d tokens (beta > 0 needs them)", i, len(s.RefLogprobs), len(s.Logprobs))
		}
		if o.EntropyCoeff > 0 && s.Entropies == nil && len(s.Logprobs) > 0 {
			return st, Gradients{}, fmt.Errorf("grpo: sequence %d has no entropies (an entropy bonus needs one per token)", i)
		}
		if s.Entropies != nil && len(s.Entropies) != len(s.Logprobs) {
			return st, Gradients{}, fmt.Errorf("grpo: sequence %d has %d entropies for %d tokens (give one per token, or none)", i, len(s.Entropies), len(s.Logprobs))
		}
		if s.Advantages != nil && len(s.Advantages) != len(s.Logprobs) {
			return st, Gradients{}, fmt.Errorf("grpo: sequence %d has %d advantages for %d tokens (give one per token, or none)", i, len(s.Advantages), len(s.Logprobs))
		}
		if s.Trainable != nil && len(s.Trainable) != len(s.Logprobs) {
			return st, Gradients{}, fmt.Errorf("grpo: sequence %d has a trainable mask of %d for %d tokens", i, len(s.Trainable), len(s.Logprobs))
		}
		if s.BehaviourLogprobs != nil && len(s.BehaviourLogprobs) != len(s.Logprobs) {
			return st, Gradients{}, fmt.Errorf("grpo: sequence %d has %d behaviour logprobs for %d tokens", i, len(s.BehaviourLogprobs), len(s.Logprobs))
		}
		total += s.Tokens()
	}
	st.Scored = total
	pol := o.policy()
	// The rollout correction: each sequence's IS weights (applied in
	// decoupled mode, or to a loss that takes them) and the tokens its
	// rejection keeps, which then stand in for the trainable mask.
	var corr []corrected
	if o.Correction.On() {
		_, weighted := pol.(ISWeighted)
		var tl correctionTally
		corr = make([]corrected, len(seqs))
		total = 0
		for i := range seqs {
			s := &seqs[i]
			corr[i] = o.Correction.correct(s, weighted || s.BehaviourLogprobs != nil, &tl)
			total += corr[i].kept(s)
		}
		st.RolloutFigures = o.Correction.figures(tl)
	}
	// The mismatch figures count every trainable token, rejected or not.
	var bkl float64
	st.RatioMax, bkl = mismatch(seqs)
	if st.Scored > 0 {
		st.BehaviourKL = bkl / float64(st.Scored)
	}
	grads := make([][]float64, len(seqs))
	var entGrads [][]float64
	if o.EntropyCoeff > 0 {
		entGrads = make([][]float64, len(seqs))
	}
	if total == 0 {
		return st, Gradients{grads, entGrads}, nil
	}
	agg := newWeights(o.Aggregation, len(seqs), func(i int) (int, int) {
		if corr != nil {
			return corr[i].kept(&seqs[i]), len(seqs[i].Logprobs)
		}
		return seqs[i].Tokens(), len(seqs[i].Logprobs)
	})
	var terms []TokenLoss
	var kl, ent, low, high, dual, dev float64
	for i := range seqs {
		s := &seqs[i]
		g := make([]float64, len(s.Logprobs))
		grads[i] = g
		var ge []float64
		if entGrads != nil {
			ge = make([]float64, len(s.Logprobs))
			entGrads[i] = ge
		}
		// in is s as the loss sees it: without the tokens the rejection
		// dropped. s keeps them for the mismatch figures.
		in := s
		var weights []float64
		if corr != nil {
			weights = corr[i].weights
			if corr[i].keep != nil {
				c := *s
				c.Trainable = corr[i].keep
				in = &c
			}
		}
		n := in.Tokens()
		if n == 0 {
			continue
		}
		// w is the weight of each of this sequence's tokens in the loss.
		w := agg.of(n)
		terms = slices.Grow(terms[:0], len(s.Logprobs))[:len(s.Logprobs)]
		clear(terms)
		pol.Policy(in, o, terms)
		for t, lp := range s.Logprobs {
			if !in.trains(t) {
				continue
			}
			rho := math.Exp(lp - float64(s.OldLogprobs[t]))
			pg, dpg := terms[t].Value, terms[t].Grad
			if weights != nil {
				pg, dpg = pg*weights[t], dpg*weights[t]
			}
			switch terms[t].Clip {
			case ClipLow:
				low++
			case ClipHigh:
				high++
			case ClipDual:
				dual++
			}
			l, dl := pg, dpg
			if o.Beta > 0 {
				k, dk := o.KL.term(s.RefLogprobs[t] - lp)
				kl += k
				l += o.Beta * k
				dl += o.Beta * dk
			}
			if ge != nil {
				l -= o.EntropyCoeff * s.Entropies[t]
				ge[t] = -w * o.EntropyCoeff
			}
			st.PolicyLoss += w * pg
			st.Loss += w * l
			g[t] = w * dl
			dev += math.Abs(rho - 1)
			if s.Entropies != nil {
				ent += s.Entropies[t]
			}
		}
	}
	n := float64(total)
	st.Entropy, st.ClipLow, st.ClipHigh, st.RatioDev, st.Tokens = ent/n, low/n, high/n, dev/n, total
	if o.Beta > 0 {
		mean := kl / n
		st.KL = &mean
	}
	if o.DualClip > 0 {
		frac := dual / n
		st.ClipDual = &frac
	}
	if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) || math.IsNaN(st.RatioDev) || math.IsInf(st.RatioDev, 0) {
		return st, Gradients{}, fmt.Errorf("grpo: loss %g over %d tokens (mean |ratio-1| %g): %w; the step is not applied",
			st.Loss, total, st.RatioDev, ErrNonFinite)
	}
	return st, Gradients{grads, entGrads}, nil
}

// kept is the number of s's tokens that the rejection left in the loss.
func (c corrected) kept(s *Sequence) int {
	if c.keep == nil {
		return s.Tokens()
	}
	n := 0
	for _, k := range c.keep {
		if k {
			n++
		}
	}
	return n
}

// mismatch is the largest ratio ρ of the trainable tokens of seqs and
// the sum of their k3 estimates ρ − 1 − log ρ of KL(π_old ‖ π).
func mismatch(seqs []Sequence) (ratioMax, k3 float64) {
	for i := range seqs {
		s := &seqs[i]
		for t, lp := range s.Logprobs {
			if s.trains(t) {
				x := lp - float64(s.OldLogprobs[t])
				rho := math.Exp(x)
				k3 += rho - 1 - x
				ratioMax = math.Max(ratioMax, rho)
			}
		}
	}
	return ratioMax, k3
}
