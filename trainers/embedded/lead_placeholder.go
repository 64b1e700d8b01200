package embedded

// TEMPORARY: local stand-ins for the lead's advantages.GAE, Whiten,
// ExplainedVariance and grpo.ValueLoss (same signatures), deleted when
// main has them.

import (
	"encoding/json"
	"math"
	"os"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

func phGAE(rewards, values []float64, trainable []bool, gamma, lambda float64) (adv, ret []float64) {
	n := len(rewards)
	adv, ret = make([]float64, n), make([]float64, n)
	next, last := 0.0, 0.0
	for t := n - 1; t >= 0; t-- {
		delta := rewards[t] + gamma*next - values[t]
		l := delta + gamma*lambda*last
		if trainable == nil || trainable[t] {
			next, last = values[t], l
		}
		adv[t] = last
		ret[t] = last + values[t]
	}
	return adv, ret
}

func phWhiten(xs [][]float64, trainable [][]bool) {
	var sum, n float64
	each := func(f func(x float64)) {
		for i, row := range xs {
			for t, x := range row {
				if trainable[i] == nil || trainable[i][t] {
					f(x)
				}
			}
		}
	}
	each(func(x float64) { sum += x; n++ })
	if n == 0 {
		return
	}
	mean := sum / n
	var sq float64
	each(func(x float64) { sq += (x - mean) * (x - mean) })
	v := sq / n
	if n > 1 {
		v *= n / (n - 1)
	}
	r := 1 / math.Sqrt(v+1e-8)
	for _, row := range xs {
		for t := range row {
			row[t] = (row[t] - mean) * r
		}
	}
}

func phExplainedVariance(values, returns [][]float64, trainable [][]bool) float64 {
	var d, r []float64
	for i := range values {
		for t := range values[i] {
			if trainable[i] == nil || trainable[i][t] {
				d = append(d, returns[i][t]-values[i][t])
				r = append(r, returns[i][t])
			}
		}
	}
	variance := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		m := s / float64(len(xs))
		var q float64
		for _, x := range xs {
			q += (x - m) * (x - m)
		}
		return q / float64(len(xs))
	}
	if len(r) == 0 {
		return 0
	}
	return 1 - variance(d)/variance(r)
}

type phValueSequence struct {
	Values, OldValues, Returns []float64
	Trainable                  []bool
}

type phValueLossOptions struct {
	ClipRange   float64
	Aggregation grpo.Aggregation
}

type phValueLossResult struct {
	Loss     float64
	Grad     [][]float64
	ClipFrac float64
}

func phValueLoss(seqs []phValueSequence, o phValueLossOptions) (phValueLossResult, error) {
	var res phValueLossResult
	total, longest, nonEmpty := 0, 0, 0
	tok := func(s phValueSequence) int {
		n := 0
		for t := range s.Values {
			if s.Trainable == nil || s.Trainable[t] {
				n++
			}
		}
		return n
	}
	for _, s := range seqs {
		n := tok(s)
		total += n
		longest = max(longest, len(s.Values))
		if n > 0 {
			nonEmpty++
		}
	}
	res.Grad = make([][]float64, len(seqs))
	var clipped float64
	for i, s := range seqs {
		res.Grad[i] = make([]float64, len(s.Values))
		n := tok(s)
		if n == 0 {
			continue
		}
		w := 1 / float64(total)
		switch o.Aggregation {
		case grpo.SequenceMean:
			w = 1 / (float64(nonEmpty) * float64(n))
		case grpo.SeqMeanTokenSumNorm:
			w = 1 / (float64(nonEmpty) * float64(longest))
		}
		for t, v := range s.Values {
			if s.Trainable != nil && !s.Trainable[t] {
				continue
			}
			old, r := s.OldValues[t], s.Returns[t]
			vc := math.Min(math.Max(v, old-o.ClipRange), old+o.ClipRange)
			l1, l2 := (v-r)*(v-r), (vc-r)*(vc-r)
			if l2 > l1 {
				clipped++
				res.Loss += 0.5 * w * l2
				if v > old-o.ClipRange && v < old+o.ClipRange {
					res.Grad[i][t] = w * (vc - r)
				}
			} else {
				res.Loss += 0.5 * w * l1
				res.Grad[i][t] = w * (v - r)
			}
		}
	}
	if total > 0 {
		res.ClipFrac = clipped / float64(total)
	}
	return res, nil
}

func phNeedsCritic(e advantages.Estimator) bool { return e != nil && e.Name() == "gae" }

type phTokenValue struct {
	PromptID                             string
	SampleIndex                          int32
	Rewards, Values, Returns, Advantages []float64
}

func phWriteValues(path string, rows []phTokenValue) error {
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// OutValues is the train task's values output (PPO).
const OutValues = "values"

const phValuesFile = "values.parquet"
