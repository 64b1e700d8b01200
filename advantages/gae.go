package advantages

import "math"

// GAEEstimator is PPO's generalized advantage estimation (Schulman et
// al., 2016) as an entry of the estimator menu. It gives no advantage
// from the rewards alone: the trainer computes per-token advantages with
// its critic (GAE, Whiten), so it is a CriticEstimator. Through Compute
// each scored sample's advantage is its reward total, the reward the
// trainer puts on the sample's last trainable token; no sample is masked
// for being alone in its group, and Join masks no zero-variance group:
// PPO learns from one sample per prompt and from uniform groups, whose
// rewards still differ from the critic's values. Options.Gamma and
// Options.Lambda are the discount and the GAE λ the trainer uses.
var GAEEstimator Estimator = gae{}

type gae struct{}

func (gae) Name() string      { return "gae" }
func (gae) NeedsCritic() bool { return true }

// Group returns the rewards: the outcome reward of each sample, which the
// trainer turns into per-token advantages.
func (gae) Group(rewards []float64, _, _ float64, _ Options) []float64 {
	out := make([]float64, len(rewards))
	copy(out, rewards)
	return out
}

// A CriticEstimator needs a learned value function: a train stage using
// it must have a critic (the trainer section's critic), and the
// advantages it trains on are per token, computed by the trainer.
type CriticEstimator interface {
	Estimator
	NeedsCritic() bool
}

// NeedsCritic reports whether e is a CriticEstimator that needs a
// critic (false for nil, the default GRPO).
func NeedsCritic(e Estimator) bool {
	c, ok := e.(CriticEstimator)
	return ok && c.NeedsCritic()
}

// GAE returns the per-token advantages and returns of one sequence,
// verl's core_algos.compute_gae_advantage_return for one row before its
// whitening:
//
//	δ_t = r_t + γ·V_next − V_t
//	A_t = δ_t + γλ·A_next
//
// taken backwards from the last token, where V_next and A_next are those
// of the next token marked trainable (0 past the end): a token not
// trainable (an episode's observation) carries the next trainable
// token's value and advantage across itself, so the credit of a reply
// flows over the observations to the replies before it. Every slice has
// one entry per token; the entries of tokens not trainable are
// computed as verl computes them but mean nothing. returns = adv + values.
// trainable nil marks every token.
func GAE(rewards, values []float64, trainable []bool, gamma, lambda float64) (adv, ret []float64) {
	n := len(rewards)
	adv, ret = make([]float64, n), make([]float64, n)
	next, last := 0.0, 0.0
	for t := n - 1; t >= 0; t-- {
		delta := rewards[t] + gamma*next - values[t]
		a := delta + gamma*lambda*last
		if trainable == nil || trainable[t] {
			next, last = values[t], a
		}
		adv[t] = last
		ret[t] = last + values[t]
	}
	return adv, ret
}

// Whiten shifts and scales the entries of xs marked trainable, in place,
// to mean 0 and unit variance over all of them together: verl's
// masked_whiten (x − mean)/√(var + 1e-8), var with Bessel's correction.
// Entries not marked are whitened with the same statistics. A nil mask
// marks every entry of its row. With fewer than two marked entries there
// is no variance to estimate: the entries are only centred.
func Whiten(xs [][]float64, trainable [][]bool) {
	var sum float64
	n := 0
	each(xs, trainable, func(x float64) { sum += x; n++ })
	if n == 0 {
		return
	}
	mean := sum / float64(n)
	var ss float64
	each(xs, trainable, func(x float64) { ss += (x - mean) * (x - mean) })
	scale := 1.0
	if n > 1 {
		scale = 1 / math.Sqrt(ss/float64(n-1)+whitenEpsilon)
	}
	for _, row := range xs {
		for t := range row {
			row[t] = (row[t] - mean) * scale
		}
	}
}

// ExplainedVariance is 1 − Var(returns − values) / Var(returns) over the
// entries marked trainable (population variances): 1 when the values
// predict the returns, 0 when they do no better than their mean, below 0
// when worse. NaN when the returns do not vary.
func ExplainedVariance(values, returns [][]float64, trainable [][]bool) float64 {
	var r, d []float64
	for i, row := range returns {
		for t, x := range row {
			if trainable == nil || trainable[i] == nil || trainable[i][t] {
				r, d = append(r, x), append(d, x-values[i][t])
			}
		}
	}
	_, vr := MeanStd(r)
	_, vd := MeanStd(d)
	if vr == 0 {
		return math.NaN()
	}
	return 1 - vd*vd/(vr*vr)
}

// each calls f with the entries of xs marked trainable.
func each(xs [][]float64, trainable [][]bool, f func(float64)) {
	for i, row := range xs {
		for t, x := range row {
			if trainable == nil || trainable[i] == nil || trainable[i][t] {
				f(x)
			}
		}
	}
}
