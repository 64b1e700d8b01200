package tiny

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// The numerical kernels. Two properties matter more than speed:
//
//   - Row independence: every kernel computes a row of its output from the
//     same row of its input with the same operations in the same order,
//     whatever the other rows are. gonum's Sgemm with neither operand
//     transposed sums each output element over k sequentially, one AXPY at
//     a time, in its serial and parallel paths alike, so x·W is row
//     independent. That is why a sequence samples the same tokens whatever
//     batch it is in, and why sampling with the KV cache gives bit for bit
//     the log-probabilities of teacher-forced scoring.
//   - Determinism: no kernel depends on scheduling or on CPU features
//     (exp32 replaces math.Exp, which uses FMA where the CPU has it).

var blasImpl gonum.Implementation

// matmulAcc computes y += x·w for x [rows, in], w [in, out], y [rows, out].
func matmulAcc(rows, in, out int, x, w, y []float32) {
	if rows == 0 {
		return
	}
	blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, rows, out, in, 1, x, in, w, out, 1, y, out)
}

// linearForward computes y = x·w + b (b may be nil).
func linearForward(rows int, l *linear, x, y []float32) {
	y = y[:rows*l.out]
	if l.b != nil {
		for r := 0; r < rows; r++ {
			copy(y[r*l.out:(r+1)*l.out], l.b)
		}
	} else {
		clear(y)
	}
	matmulAcc(rows, l.in, l.out, x, l.w, y)
}

// linearBackward adds dx (+)= dy·wᵀ and, when g is not nil, g.w += xᵀ·dy
// and g.b += column sums of dy (when withBias).
func linearBackward(rows int, l *linear, g *linear, withBias bool, x, dy, dx []float32, accumulate bool) {
	if rows == 0 {
		return
	}
	if g != nil {
		blasImpl.Sgemm(blas.Trans, blas.NoTrans, l.in, l.out, rows, 1, x, l.in, dy, l.out, 1, g.w, l.out)
		if withBias && g.b != nil {
			for r := 0; r < rows; r++ {
				row := dy[r*l.out : (r+1)*l.out]
				for j, v := range row {
					g.b[j] += v
				}
			}
		}
	}
	if dx != nil {
		beta := float32(0)
		if accumulate {
			beta = 1
		}
		blasImpl.Sgemm(blas.NoTrans, blas.Trans, rows, l.in, l.out, 1, dy, l.out, l.w, l.out, beta, dx, l.in)
	}
}

const lnEps = 1e-5

// layerNorm normalises each row of x into y and records its mean and
// reciprocal standard deviation.
func layerNorm(rows, d int, x, g, b, y, mean, rstd []float32) {
	inv := 1 / float32(d)
	for r := 0; r < rows; r++ {
		xr := x[r*d : (r+1)*d]
		yr := y[r*d : (r+1)*d]
		var s float32
		for _, v := range xr {
			s += v
		}
		m := s * inv
		var vs float32
		for _, v := range xr {
			dv := v - m
			vs += dv * dv
		}
		rs := float32(1 / math.Sqrt(float64(vs*inv+lnEps)))
		mean[r], rstd[r] = m, rs
		for i, v := range xr {
			yr[i] = (v-m)*rs*g[i] + b[i]
		}
	}
}

// layerNormBackward adds to dx the gradient through the normalisation of
// x, given dy; dg and db (nil to skip) accumulate the parameters' grads.
func layerNormBackward(rows, d int, x, g, mean, rstd, dy, dx, dg, db []float32) {
	inv := 1 / float32(d)
	for r := 0; r < rows; r++ {
		xr := x[r*d : (r+1)*d]
		dyr := dy[r*d : (r+1)*d]
		dxr := dx[r*d : (r+1)*d]
		m, rs := mean[r], rstd[r]
		var sum1, sum2 float32
		for i, v := range xr {
			xh := (v - m) * rs
			dxh := dyr[i] * g[i]
			sum1 += dxh
			sum2 += dxh * xh
			if dg != nil {
				dg[i] += dyr[i] * xh
				db[i] += dyr[i]
			}
		}
		sum1 *= inv
		sum2 *= inv
		for i, v := range xr {
			xh := (v - m) * rs
			dxh := dyr[i] * g[i]
			dxr[i] += rs * (dxh - sum1 - xh*sum2)
		}
	}
}

const (
	log2e = 1.44269504088896340736
	ln2hi = 0.693359375
	ln2lo = -2.12194440e-4
)

// exp32 is e^x to about one ulp in float32, deterministic on every CPU.
func exp32(x float32) float32 {
	if x < -87 {
		return 0
	}
	if x > 88 {
		return float32(math.Inf(1))
	}
	t := x * log2e
	var k int32
	if t >= 0 {
		k = int32(t + 0.5)
	} else {
		k = int32(t - 0.5)
	}
	kf := float32(k)
	r := x - kf*ln2hi - kf*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(k+127)<<23)
}

// logSoftmax writes the log-probabilities of logits z into lp, with the
// special tokens PAD and BOS masked to -Inf, and returns the entropy of the
// distribution.
func logSoftmax(z, lp []float32) float32 {
	mx := float32(math.Inf(-1))
	for i := numSpecial - 1; i < len(z); i++ { // EOS onwards
		if z[i] > mx {
			mx = z[i]
		}
	}
	var s float32
	for i := numSpecial - 1; i < len(z); i++ {
		s += exp32(z[i] - mx)
	}
	lse := mx + float32(math.Log(float64(s)))
	negInf := float32(math.Inf(-1))
	var h float32
	for i := range z {
		if i < numSpecial-1 {
			lp[i] = negInf
			continue
		}
		l := z[i] - lse
		lp[i] = l
		h -= exp32(l) * l
	}
	return h
}

// attendRow computes causal attention for one query row q against the
// first n rows of K and V (row stride d), writing the heads' outputs into
// out and their attention weights into probs (heads × ctx, row u of head h
// at h*ctx+u).
func attendRow(q, K, V []float32, n, d, heads, ctx int, out, probs []float32) {
	dh := d / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	for h := 0; h < heads; h++ {
		o := h * dh
		qh := q[o : o+dh]
		p := probs[h*ctx : h*ctx+n]
		mx := float32(math.Inf(-1))
		for u := 0; u < n; u++ {
			kr := K[u*d+o : u*d+o+dh]
			var s float32
			for i, qv := range qh {
				s += qv * kr[i]
			}
			s *= scale
			p[u] = s
			if s > mx {
				mx = s
			}
		}
		var sum float32
		for u := range p {
			e := exp32(p[u] - mx)
			p[u] = e
			sum += e
		}
		inv := 1 / sum
		oh := out[o : o+dh]
		clear(oh)
		for u := range p {
			pu := p[u] * inv
			p[u] = pu
			vr := V[u*d+o : u*d+o+dh]
			for i, vv := range vr {
				oh[i] += pu * vv
			}
		}
	}
}

// attendBackward back-propagates attention over one sequence of n rows:
// given the saved weights probs (rows × heads × ctx) and dOut, it adds the
// gradients of Q, K and V.
func attendBackward(n, d, heads, ctx int, Q, K, V, probs, dOut, dQ, dK, dV []float32) {
	dh := d / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	var dpBuf [64]float32
	dp := dpBuf[:]
	if ctx > len(dp) {
		dp = make([]float32, ctx)
	}
	for t := 0; t < n; t++ {
		for h := 0; h < heads; h++ {
			o := h * dh
			p := probs[(t*heads+h)*ctx : (t*heads+h)*ctx+t+1]
			do := dOut[t*d+o : t*d+o+dh]
			var sumPdP float32
			for u := range p {
				vr := V[u*d+o : u*d+o+dh]
				var s float32
				for i, g := range do {
					s += g * vr[i]
				}
				dp[u] = s
				sumPdP += p[u] * s
				dvr := dV[u*d+o : u*d+o+dh]
				pu := p[u]
				for i, g := range do {
					dvr[i] += pu * g
				}
			}
			qt := Q[t*d+o : t*d+o+dh]
			dqt := dQ[t*d+o : t*d+o+dh]
			for u := range p {
				ds := p[u] * (dp[u] - sumPdP) * scale
				if ds == 0 {
					continue
				}
				kr := K[u*d+o : u*d+o+dh]
				dkr := dK[u*d+o : u*d+o+dh]
				for i := range qt {
					dqt[i] += ds * kr[i]
					dkr[i] += ds * qt[i]
				}
			}
		}
	}
}

func sqrtf(x float64) float64 { return math.Sqrt(x) }
