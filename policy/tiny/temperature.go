package tiny

import "math"

// tempered reports whether a temperature changes the distribution the
// model samples from: 0 (greedy) and 1 do not, and their
// log-probabilities are the model's log-softmax.
func tempered(temp float64) bool { return temp != 0 && temp != 1 }

// temperedLogSoftmax writes log softmax(z/T) into lp and returns its
// entropy. The sampler records these log-probabilities and Score and the
// Trainer compute them the same way, so a sequence sampled at T and
// scored at T by the same weights gets the same numbers, bit for bit.
func temperedLogSoftmax(z, lp []float32, temp float64) float32 {
	for i, v := range z {
		lp[i] = float32(float64(v) / temp)
	}
	return logSoftmax(lp, lp)
}

// temper replaces the log-probabilities and entropies of the rows that
// predict the completion tokens of each example sampled at a temperature
// (Example.Temperature) with those of softmax(z/T). Rows of other
// examples keep the forward pass's log-softmax.
func (a *acts) temper(batch []Example, starts []int) {
	V := a.cfg.VocabSize()
	for i, e := range batch {
		if !tempered(e.Temperature) {
			continue
		}
		for j := range e.Completion {
			r := starts[i] + len(e.Prompt) + j
			a.ent[r] = temperedLogSoftmax(a.logits[r*V:(r+1)*V], a.logp[r*V:(r+1)*V], e.Temperature)
		}
	}
}

// gradScale is d logit/T / d logit for an example's tokens: 1/T when it
// was sampled at a temperature, else 1.
func (e Example) gradScale() float32 {
	if !tempered(e.Temperature) {
		return 1
	}
	return float32(1 / e.Temperature)
}

// validTemperature reports whether t is a temperature an example can be
// scored at: finite and not negative.
func validTemperature(t float64) bool { return t >= 0 && !math.IsInf(t, 1) }
