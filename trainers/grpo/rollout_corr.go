package grpo

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// RolloutCorrection is verl's rollout correction (rollout_corr): truncated
// importance sampling weights and rejection sampling on the rollout
// (behaviour) policy, the one that sampled. The zero value is off.
//
// Both read the log ratio of a trainable token,
//
//	log w_t = logπ_old − logπ_behaviour   (decoupled: Sequence.BehaviourLogprobs set)
//	log w_t = sg(logπ) − logπ_old         (bypass: the anchor is the behaviour policy)
//
// In decoupled mode (verl's three policies) the anchor π_old is not the
// policy that sampled, so the weight multiplies every token's policy term,
// as verl's losses multiply pg_losses by rollout_is_weights. In bypass mode
// (rlpipe's default: the anchor is the sampler's logprobs) the ratio ρ of
// the ratio losses already is this weight, and verl's bypass mode applies
// none to its ppo_clip loss (it would count the correction twice): the
// weights are then reported only, unless the policy loss asks for them
// (an ISWeighted loss). Rejection masks in both modes.
type RolloutCorrection struct {
	// IS is the weight's level: "" (off), ISToken (each token its own
	// weight, min(exp(log w_t), ISThreshold): verl's token TIS) or
	// ISSequence (every token of a sequence the product of its tokens'
	// weights, min(exp(Σ_t log w_t), ISThreshold)). The log weight is
	// clamped to ±20 before exp, as verl does.
	IS string
	// ISThreshold is the truncation cap C (default 2, verl's default).
	ISThreshold float64
	// RS is the rejection statistic, verl's rollout_rs name: "" (off), or
	// one of RSOptions. A token (token_*) or a whole sequence (seq_*)
	// whose statistic leaves the bounds leaves the loss: it has no
	// gradient and counts in no mean of the loss.
	RS string
	// RSThreshold is the upper bound (required with RS). For the k1
	// statistics (k1 = −log w) the bounds are log RSThresholdLower ≤ k1 ≤
	// log RSThreshold; for k2 (½(log w)²) and k3 (w − 1 − log w) the
	// statistic must be ≤ RSThreshold.
	RSThreshold float64
	// RSThresholdLower is the k1 statistics' lower bound (default
	// 1/RSThreshold): verl's "lower_upper" threshold string. It is an
	// error with the other statistics.
	RSThresholdLower float64
}

// The rollout correction's IS levels.
const (
	ISToken    = "token"
	ISSequence = "sequence"
)

// DefaultISThreshold is the IS weights' cap when RolloutCorrection
// names none: verl's rollout_is_threshold default.
const DefaultISThreshold = 2.0

// RSOptions are the rejection statistics, verl's rollout_rs names:
// token_k* judge each token; seq_sum_k*, seq_mean_k* and seq_max_k* a
// sequence by the sum, mean or largest of its tokens' statistics
// (seq_sum_k1 is the sequence IS ratio, seq_mean_k1 its geometric mean).
var RSOptions = []string{
	"token_k1", "token_k2", "token_k3",
	"seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
	"seq_mean_k1", "seq_mean_k2", "seq_mean_k3",
	"seq_max_k2", "seq_max_k3",
}

// logWeightBound is verl's SAFETY_BOUND: log weights are clamped to ±20
// before exp.
const logWeightBound = 20.0

// On reports whether c does anything.
func (c RolloutCorrection) On() bool { return c.IS != "" || c.RS != "" }

// k1 reports whether the rejection statistic is a k1 one (two bounds).
func (c RolloutCorrection) k1() bool { return strings.HasSuffix(c.RS, "_k1") }

// EnsureDefaults fills in the thresholds left 0: ISThreshold with IS
// on, RSThresholdLower (1/RSThreshold) with a k1 statistic.
func (c *RolloutCorrection) EnsureDefaults() {
	if c.IS != "" && c.ISThreshold == 0 {
		c.ISThreshold = DefaultISThreshold
	}
	if c.k1() && c.RSThresholdLower == 0 && c.RSThreshold > 0 {
		c.RSThresholdLower = 1 / c.RSThreshold
	}
}

// CorrectionError is a rollout correction option that cannot work: Key
// is its name, verl's (rollout_is, rollout_rs_threshold, …).
type CorrectionError struct{ Key, Msg string }

func (e *CorrectionError) Error() string { return e.Key + ": " + e.Msg }

// Check reports the first option of c (defaults applied) that cannot
// work, or nil.
func (c RolloutCorrection) Check() *CorrectionError {
	bad := func(key, format string, args ...any) *CorrectionError {
		return &CorrectionError{Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.IS != "" && c.IS != ISToken && c.IS != ISSequence:
		return bad("rollout_is", "%q; use %s or %s (verl's rollout_is levels)", c.IS, ISToken, ISSequence)
	case c.IS == "" && c.ISThreshold != 0:
		return bad("rollout_is_threshold", "%g without rollout_is; set rollout_is: %s or %s, or remove it", c.ISThreshold, ISToken, ISSequence)
	case c.IS != "" && !(c.ISThreshold > 0 && finite(c.ISThreshold)):
		return bad("rollout_is_threshold", "%g; it must be positive (2 is verl's default)", c.ISThreshold)
	case c.RS != "" && !slices.Contains(RSOptions, c.RS):
		return bad("rollout_rs", "%q; use one of %s (verl's rollout_rs names)", c.RS, strings.Join(RSOptions, ", "))
	case c.RS == "" && c.RSThreshold != 0:
		return bad("rollout_rs_threshold", "%g without rollout_rs; set rollout_rs (e.g. token_k1), or remove it", c.RSThreshold)
	case c.RS == "" && c.RSThresholdLower != 0:
		return bad("rollout_rs_threshold_lower", "%g without rollout_rs; set rollout_rs (e.g. token_k1), or remove it", c.RSThresholdLower)
	case c.RS != "" && c.RSThreshold == 0:
		return bad("rollout_rs", "%s needs rollout_rs_threshold (e.g. 2 for a k1 statistic: ratios in [1/2, 2])", c.RS)
	case c.RS != "" && !(c.RSThreshold > 0 && finite(c.RSThreshold)):
		return bad("rollout_rs_threshold", "%g; rollout_rs %s needs a positive threshold (e.g. 2 for a k1 statistic)", c.RSThreshold, c.RS)
	case c.RSThresholdLower != 0 && !c.k1():
		return bad("rollout_rs_threshold_lower", "%g; only the k1 statistics have a lower bound, not %s", c.RSThresholdLower, c.RS)
	case c.k1() && !(c.RSThresholdLower > 0 && c.RSThresholdLower <= c.RSThreshold):
		return bad("rollout_rs_threshold_lower", "%g; it must be positive and at most rollout_rs_threshold %g", c.RSThresholdLower, c.RSThreshold)
	}
	return nil
}

// ISWeighted is a PolicyLoss whose term does not carry the ratio to the
// behaviour policy (REINFORCE), so that in bypass mode the rollout
// correction's IS weights multiply it, as verl's bypass mode does for
// its reinforce loss type.
type ISWeighted interface {
	PolicyLoss
	takesISWeights()
}

// RolloutFigures are the rollout correction's figures, each present only
// when its half is on: the IS weights' mean (over the trainable tokens,
// after truncation: verl's rollout_is_mean) and max (verl's rollout_is_max:
// with token weights the largest after truncation, with sequence weights
// the largest before), the fraction of trainable tokens whose weight was
// truncated, and the fractions of trainable tokens and of sequences the
// rejection masked (verl's rollout_rs_masked_fraction and
// rollout_rs_seq_masked_fraction). They are taken over the tokens the
// trainable mask admits, before the rejection.
type RolloutFigures struct {
	ISMean      *float64 `json:"rollout_is_mean,omitempty"`
	ISMax       *float64 `json:"rollout_is_max,omitempty"`
	ISCapped    *float64 `json:"rollout_is_capped_frac,omitempty"`
	RSMasked    *float64 `json:"rollout_rs_masked_frac,omitempty"`
	RSSeqMasked *float64 `json:"rollout_rs_seq_masked_frac,omitempty"`
	// Tokens and Seqs are what the fractions are of, to weigh steps.
	Tokens int `json:"-"`
	Seqs   int `json:"-"`
}

// corrected is one sequence under the rollout correction: its IS weight
// per token (nil when they are not applied to the loss) and the tokens
// the rejection keeps (nil when it keeps them all).
type corrected struct {
	weights []float64
	keep    []bool
}

// correctionTally sums a batch's figures.
type correctionTally struct {
	wsum, wmax, capped, masked float64
	seqsMasked, tokens, seqs   int
}

// logWeight is token t's log IS ratio: decoupled when s has behaviour
// logprobs, bypass otherwise.
func (s *Sequence) logWeight(t int) float64 {
	if s.BehaviourLogprobs != nil {
		return float64(s.OldLogprobs[t]) - float64(s.BehaviourLogprobs[t])
	}
	return s.Logprobs[t] - float64(s.OldLogprobs[t])
}

// correct computes s's weights and kept tokens and adds them to the
// tally; apply says whether the weights multiply the loss.
func (c RolloutCorrection) correct(s *Sequence, apply bool, tl *correctionTally) corrected {
	var out corrected
	n := s.Tokens()
	tl.seqs++
	if n == 0 {
		return out
	}
	tl.tokens += n
	if c.IS != "" {
		w := make([]float64, len(s.Logprobs))
		var seqW float64
		seqCapped := false
		if c.IS == ISSequence {
			var sum float64
			for t := range s.Logprobs {
				if s.trains(t) {
					sum += s.logWeight(t)
				}
			}
			raw := math.Exp(math.Min(math.Max(sum, -logWeightBound), logWeightBound))
			seqW, seqCapped = math.Min(raw, c.ISThreshold), raw > c.ISThreshold
			tl.wmax = math.Max(tl.wmax, raw)
		}
		for t := range s.Logprobs {
			if !s.trains(t) {
				continue
			}
			if c.IS == ISSequence {
				w[t] = seqW
				if seqCapped {
					tl.capped++
				}
			} else {
				raw := math.Exp(math.Min(math.Max(s.logWeight(t), -logWeightBound), logWeightBound))
				w[t] = math.Min(raw, c.ISThreshold)
				if raw > c.ISThreshold {
					tl.capped++
				}
				tl.wmax = math.Max(tl.wmax, w[t])
			}
			tl.wsum += w[t]
		}
		if apply {
			out.weights = w
		}
	}
	if c.RS != "" {
		out.keep = c.reject(s, tl)
	}
	return out
}

// reject is the rejection's kept tokens of s (nil: all kept).
func (c RolloutCorrection) reject(s *Sequence, tl *correctionTally) []bool {
	stat := func(t int) float64 {
		lw := math.Min(math.Max(s.logWeight(t), -logWeightBound), logWeightBound)
		switch c.RS[len(c.RS)-1] {
		case '1':
			return -lw
		case '2':
			return 0.5 * lw * lw
		}
		return math.Exp(lw) - 1 - lw
	}
	lo, hi := math.Inf(-1), c.RSThreshold
	if c.k1() {
		lo, hi = math.Log(c.RSThresholdLower), math.Log(c.RSThreshold)
	}
	ok := func(x float64) bool { return x >= lo && x <= hi }
	keep := make([]bool, len(s.Logprobs))
	dropped := 0
	if strings.HasPrefix(c.RS, "token_") {
		for t := range s.Logprobs {
			if !s.trains(t) {
				continue
			}
			if keep[t] = ok(stat(t)); !keep[t] {
				dropped++
			}
		}
	} else {
		var sum, mx float64
		n := 0
		mx = math.Inf(-1)
		for t := range s.Logprobs {
			if s.trains(t) {
				x := stat(t)
				sum += x
				mx = math.Max(mx, x)
				n++
			}
		}
		var v float64
		switch {
		case strings.HasPrefix(c.RS, "seq_sum_"):
			v = sum
		case strings.HasPrefix(c.RS, "seq_mean_"):
			v = sum / float64(n)
		default:
			v = mx
		}
		kept := ok(v)
		for t := range s.Logprobs {
			if s.trains(t) {
				keep[t] = kept
				if !kept {
					dropped++
				}
			}
		}
	}
	tl.masked += float64(dropped)
	if dropped == 0 {
		return nil
	}
	tl.seqsMasked++
	return keep
}

// figures are the tally's RolloutFigures.
func (c RolloutCorrection) figures(tl correctionTally) RolloutFigures {
	f := RolloutFigures{Tokens: tl.tokens, Seqs: tl.seqs}
	ptr := func(x float64) *float64 { return &x }
	if c.IS != "" && tl.tokens > 0 {
		n := float64(tl.tokens)
		f.ISMean, f.ISMax, f.ISCapped = ptr(tl.wsum/n), ptr(tl.wmax), ptr(tl.capped/n)
	}
	if c.RS != "" && tl.tokens > 0 {
		f.RSMasked, f.RSSeqMasked = ptr(tl.masked/float64(tl.tokens)), ptr(float64(tl.seqsMasked)/float64(tl.seqs))
	}
	return f
}

// RolloutOf is the RolloutFigures of an update's steps, firstEpoch of
// which make up its first epoch: like MismatchOf, the figures of the
// update's first pass over the batch (with one minibatch, the trainer's
// policy before the update), the means weighted by the steps' tokens,
// the sequence fraction by their sequences, the max over those steps.
// Nothing is set when no step had the figures.
func RolloutOf(steps []LossStats, firstEpoch int) RolloutFigures {
	var out RolloutFigures
	var mean, capped, masked, seqMasked, mx float64
	for _, s := range steps[:min(firstEpoch, len(steps))] {
		f := s.RolloutFigures
		n, q := float64(f.Tokens), float64(f.Seqs)
		if f.ISMean != nil {
			mean += *f.ISMean * n
			capped += *f.ISCapped * n
			mx = math.Max(mx, *f.ISMax)
			out.ISMean = &mean
		}
		if f.RSMasked != nil {
			masked += *f.RSMasked * n
			seqMasked += *f.RSSeqMasked * q
			out.RSMasked = &masked
		}
		out.Tokens += f.Tokens
		out.Seqs += f.Seqs
	}
	if out.ISMean != nil {
		mean /= float64(out.Tokens)
		capped /= float64(out.Tokens)
		out.ISCapped, out.ISMax = &capped, &mx
	}
	if out.RSMasked != nil {
		masked /= float64(out.Tokens)
		seqMasked /= float64(out.Seqs)
		out.RSSeqMasked = &seqMasked
	}
	return out
}
