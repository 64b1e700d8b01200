package tiny

import "math"

// A float64 reference implementation of the forward pass, written naively
// and independently of the kernels: finite differences run on it, and the
// float32 model is compared with it.

// refParams returns the model's parameters as float64, by tensor name, in
// compute layout.
func refParams(m *Model, flat []float64) map[string][]float64 {
	out := map[string][]float64{}
	for _, p := range m.lo.params {
		out[p.name] = flat[p.off : p.off+p.size]
	}
	return out
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// refMerge adds s·a·b of every adapter module to a float64 copy of the base.
func refMerge(m *Model, a *Adapter, adFlat []float64) []float64 {
	flat := toF64(m.w.flat)
	if a == nil {
		return flat
	}
	s := a.Scaling()
	off := 0
	for _, mod := range a.mods {
		in, out, r := mod.spec.in, mod.spec.out, a.rank
		A := adFlat[off : off+in*r]
		off += in * r
		B := adFlat[off : off+r*out]
		off += r * out
		w := flat[m.lo.params[mod.spec.weight].off:]
		for i := 0; i < in; i++ {
			for j := 0; j < out; j++ {
				var sum float64
				for k := 0; k < r; k++ {
					sum += A[i*r+k] * B[k*out+j]
				}
				w[i*out+j] += s * sum
			}
		}
	}
	return flat
}

// refLogprobs returns the completion log-probabilities of each example,
// computed as Hugging Face's LlamaForCausalLM defines them, of
// softmax(z/T) at the example's Temperature.
func refLogprobs(m *Model, flat []float64, batch []Example) [][]float64 {
	lp, _ := refScores(m, flat, batch)
	return lp
}

// refScores returns refLogprobs and the entropy of the distribution each
// completion token was drawn from, softmax(z/T).
func refScores(m *Model, flat []float64, batch []Example) (logprobs, entropies [][]float64) {
	V := m.cfg.VocabSize()
	logSoftmax := func(e Example, h []float64, lin func(x []float64, name string, in, out int) []float64) []float64 {
		z := lin(h, "lm_head", m.cfg.Dim, V)
		if tempered(e.Temperature) {
			for i := range z {
				z[i] /= e.Temperature
			}
		}
		mx := math.Inf(-1)
		for _, v := range z {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range z {
			s += math.Exp(v - mx)
		}
		lse := mx + math.Log(s)
		for i := range z {
			z[i] -= lse
		}
		return z
	}
	logprobs = refForward(m, flat, batch, func(e Example, h []float64, tok int32, lin func(x []float64, name string, in, out int) []float64) float64 {
		return logSoftmax(e, h, lin)[tok]
	})
	entropies = refForward(m, flat, batch, func(e Example, h []float64, _ int32, lin func(x []float64, name string, in, out int) []float64) float64 {
		var ent float64
		for _, l := range logSoftmax(e, h, lin) {
			ent -= math.Exp(l) * l
		}
		return ent
	})
	return logprobs, entropies
}

// refValues returns the value of each completion token: the head (Dim
// weights, then the bias) on the final norm's output at the position
// that predicts it.
func refValues(m *Model, flat, head []float64, batch []Example) [][]float64 {
	d := m.cfg.Dim
	return refForward(m, flat, batch, func(_ Example, h []float64, _ int32, _ func(x []float64, name string, in, out int) []float64) float64 {
		v := head[d]
		for i, x := range h {
			v += x * head[i]
		}
		return v
	})
}

// refForward runs the model over each example and returns, for each
// completion token, out of the final norm's output h at the position
// predicting tok (lin applies a named linear layer).
func refForward(m *Model, flat []float64, batch []Example, out func(e Example, h []float64, tok int32, lin func(x []float64, name string, in, out int) []float64) float64) [][]float64 {
	c := m.cfg
	P := refParams(m, flat)
	d, H := c.Dim, c.Heads
	dh := d / H
	lin := func(x []float64, name string, in, out int) []float64 {
		w := P[name+".weight"]
		y := make([]float64, out)
		for j := 0; j < out; j++ {
			for i := 0; i < in; i++ {
				y[j] += x[i] * w[i*out+j]
			}
		}
		return y
	}
	norm := func(x []float64, name string) []float64 {
		var ss float64
		for _, a := range x {
			ss += a * a
		}
		r := 1 / math.Sqrt(ss/float64(len(x))+normEps)
		y := make([]float64, len(x))
		for i, a := range x {
			y[i] = a * r * P[name+".weight"][i]
		}
		return y
	}
	// rope rotates each head's pairs (i, i+dh/2) by pos·θ^(-2i/dh).
	rope := func(x []float64, pos int) []float64 {
		y := make([]float64, len(x))
		for hd := 0; hd < H; hd++ {
			o := hd * dh
			for i := 0; i < dh/2; i++ {
				ang := float64(pos) * math.Pow(ropeTheta, -float64(2*i)/float64(dh))
				a, b := x[o+i], x[o+i+dh/2]
				y[o+i] = a*math.Cos(ang) - b*math.Sin(ang)
				y[o+i+dh/2] = b*math.Cos(ang) + a*math.Sin(ang)
			}
		}
		return y
	}
	res := make([][]float64, len(batch))
	for bi, e := range batch {
		toks := append([]int32{BOS}, e.Prompt...)
		toks = append(toks, e.Completion[:len(e.Completion)-1]...)
		T := len(toks)
		x := make([][]float64, T)
		for t, tok := range toks {
			x[t] = append([]float64(nil), P["model.embed_tokens.weight"][int(tok)*d:int(tok+1)*d]...)
		}
		for l := 0; l < c.Layers; l++ {
			p := "model.layers." + string(rune('0'+l)) + "."
			q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
			for t := range x {
				h := norm(x[t], p+"input_layernorm")
				q[t] = rope(lin(h, p+"self_attn.q_proj", d, d), t)
				k[t] = rope(lin(h, p+"self_attn.k_proj", d, d), t)
				v[t] = lin(h, p+"self_attn.v_proj", d, d)
			}
			for t := range x {
				att := make([]float64, d)
				for hd := 0; hd < H; hd++ {
					s := make([]float64, t+1)
					mx := math.Inf(-1)
					for u := 0; u <= t; u++ {
						for i := hd * dh; i < (hd+1)*dh; i++ {
							s[u] += q[t][i] * k[u][i]
						}
						s[u] /= math.Sqrt(float64(dh))
						mx = math.Max(mx, s[u])
					}
					var z float64
					for u := range s {
						s[u] = math.Exp(s[u] - mx)
						z += s[u]
					}
					for u := range s {
						for i := hd * dh; i < (hd+1)*dh; i++ {
							att[i] += s[u] / z * v[u][i]
						}
					}
				}
				o := lin(att, p+"self_attn.o_proj", d, d)
				for i := range o {
					x[t][i] += o[i]
				}
				h := norm(x[t], p+"post_attention_layernorm")
				g := lin(h, p+"mlp.gate_proj", d, c.Hidden)
				u := lin(h, p+"mlp.up_proj", d, c.Hidden)
				for i := range u {
					u[i] *= g[i] / (1 + math.Exp(-g[i]))
				}
				dn := lin(u, p+"mlp.down_proj", c.Hidden, d)
				for i := range dn {
					x[t][i] += dn[i]
				}
			}
		}
		res[bi] = make([]float64, len(e.Completion))
		for j, tok := range e.Completion {
			res[bi][j] = out(e, norm(x[len(e.Prompt)+j], "model.norm"), tok, lin)
		}
	}
	return res
}

// refWeightedLoss is weightedLoss in float64.
func refWeightedLoss(lp [][]float64) float64 { return weightedSum(lp, nil) }
