package tiny

// EntropyLossFunc is a LossFunc whose loss depends on the entropies too
// (an entropy bonus): besides d loss / d logprob into grad, it writes
// d loss / d entropy for every token into gradEnt. All four are shaped
// like the batch's completions; grad and gradEnt start at zero.
type EntropyLossFunc func(logprobs, entropies, grad, gradEnt [][]float32) (float64, error)

// entropyFree is f as an EntropyLossFunc whose loss has no entropy term.
func (f LossFunc) entropyFree() EntropyLossFunc {
	return func(logprobs, entropies, grad, _ [][]float32) (float64, error) {
		return f(logprobs, entropies, grad)
	}
}

// entropyDlogits adds gh·∂H/∂z to dl, the gradient of one row's logits z,
// for the entropy H = −Σ p_k log p_k of the row's distribution (lp its
// log-probabilities, h its entropy): ∂H/∂z_k = −p_k·(log p_k + H).
func entropyDlogits(lp []float32, h, gh float32, dl []float32) {
	for k, l := range lp {
		dl[k] -= gh * exp32(l) * (l + h)
	}
}
