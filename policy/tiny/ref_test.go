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

// refLogprobs returns the completion log-probabilities of each example.
func refLogprobs(m *Model, flat []float64, batch []Example) [][]float64 {
	c := m.cfg
	P := refParams(m, flat)
	d, V, H := c.Dim, c.VocabSize(), c.Heads
	dh := d / H
	lin := func(x []float64, name string, in, out int, bias bool) []float64 {
		w := P[name+".weight"]
		y := make([]float64, out)
		for j := 0; j < out; j++ {
			if bias {
				y[j] = P[name+".bias"][j]
			}
			for i := 0; i < in; i++ {
				y[j] += x[i] * w[i*out+j]
			}
		}
		return y
	}
	norm := func(x []float64, name string) []float64 {
		var m, v float64
		for _, a := range x {
			m += a
		}
		m /= float64(len(x))
		for _, a := range x {
			v += (a - m) * (a - m)
		}
		v /= float64(len(x))
		y := make([]float64, len(x))
		for i, a := range x {
			y[i] = (a-m)/math.Sqrt(v+lnEps)*P[name+".weight"][i] + P[name+".bias"][i]
		}
		return y
	}
	out := make([][]float64, len(batch))
	for bi, e := range batch {
		toks := append([]int32{BOS}, e.Prompt...)
		toks = append(toks, e.Completion[:len(e.Completion)-1]...)
		T := len(toks)
		x := make([][]float64, T)
		for t, tok := range toks {
			x[t] = make([]float64, d)
			for i := range x[t] {
				x[t][i] = P["embed_tokens.weight"][int(tok)*d+i] + P["embed_positions.weight"][t*d+i]
			}
		}
		for l := 0; l < c.Layers; l++ {
			p := "layers." + string(rune('0'+l)) + "."
			q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
			for t := range x {
				h := norm(x[t], p+"attn_norm")
				q[t] = lin(h, p+"attn.q_proj", d, d, true)
				k[t] = lin(h, p+"attn.k_proj", d, d, true)
				v[t] = lin(h, p+"attn.v_proj", d, d, true)
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
				o := lin(att, p+"attn.o_proj", d, d, true)
				for i := range o {
					x[t][i] += o[i]
				}
				h := norm(x[t], p+"mlp_norm")
				u := lin(h, p+"mlp.up_proj", d, c.Hidden, true)
				for i := range u {
					u[i] = math.Max(u[i], 0)
				}
				dn := lin(u, p+"mlp.down_proj", c.Hidden, d, true)
				for i := range dn {
					x[t][i] += dn[i]
				}
			}
		}
		out[bi] = make([]float64, len(e.Completion))
		for j, tok := range e.Completion {
			t := len(e.Prompt) + j
			h := norm(x[t], "norm")
			z := lin(h, "lm_head", d, V, false)
			mx := math.Inf(-1)
			for i := int(EOS); i < V; i++ {
				mx = math.Max(mx, z[i])
			}
			var s float64
			for i := int(EOS); i < V; i++ {
				s += math.Exp(z[i] - mx)
			}
			out[bi][j] = z[tok] - mx - math.Log(s)
		}
	}
	return out
}

// refWeightedLoss is weightedLoss in float64.
func refWeightedLoss(lp [][]float64) float64 {
	var s float64
	k := 0
	for _, l := range lp {
		for _, v := range l {
			c := float32(math.Sin(float64(k)*1.7)) - 0.2
			k++
			s += float64(c) * v
		}
	}
	return s
}
