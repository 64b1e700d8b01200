package tiny

import (
	"math"

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
	mulAcc(rows, out, in, x, in, 1, w, out, y, out)
}

// linearForward computes y = x·w.
func linearForward(rows int, l *linear, x, y []float32) {
	y = y[:rows*l.out]
	clear(y)
	matmulAcc(rows, l.in, l.out, x, l.w, y)
}

// linearBackward computes dx = dy·wᵀ (or adds it, with accumulate) and,
// when g is not nil, adds xᵀ·dy to g.w.
func linearBackward(rows int, l *linear, g *linear, x, dy, dx []float32, accumulate bool) {
	if rows == 0 {
		return
	}
	if g != nil {
		mulAcc(l.in, l.out, rows, x, 1, l.in, dy, l.out, g.w, l.out) // xᵀ·dy
	}
	if dx != nil {
		beta := float32(0)
		if accumulate {
			beta = 1
		}
		mulAccT(rows, l.in, l.out, dy, l.out, l.w, l.out, beta, dx, l.in) // dy·wᵀ
	}
}

// normEps is the RMSNorm epsilon (rms_norm_eps).
const normEps = 1e-5

// rmsNorm writes x·rsqrt(mean(x²) + ε)·g into y, row by row, and records
// each row's reciprocal root mean square.
func rmsNorm(rows, d int, x, g, y, rstd []float32) {
	inv := 1 / float32(d)
	for r := 0; r < rows; r++ {
		xr := x[r*d : (r+1)*d]
		yr := y[r*d : (r+1)*d]
		var ss float32
		for _, v := range xr {
			ss += v * v
		}
		rs := float32(1 / math.Sqrt(float64(ss*inv+normEps)))
		rstd[r] = rs
		for i, v := range xr {
			yr[i] = g[i] * (v * rs)
		}
	}
}

// rmsNormBackward adds to dx the gradient through the normalisation of x,
// given dy; dg (nil to skip) accumulates the gain's gradient.
func rmsNormBackward(rows, d int, x, g, rstd, dy, dx, dg []float32) {
	inv := 1 / float32(d)
	for r := 0; r < rows; r++ {
		xr := x[r*d : (r+1)*d]
		dyr := dy[r*d : (r+1)*d]
		dxr := dx[r*d : (r+1)*d]
		rs := rstd[r]
		var dot float32
		for i, v := range xr {
			xh := v * rs
			dot += dyr[i] * g[i] * xh
			if dg != nil {
				dg[i] += dyr[i] * xh
			}
		}
		dot *= inv
		for i, v := range xr {
			dxr[i] += rs * (dyr[i]*g[i] - v*rs*dot)
		}
	}
}

// sigmoid is 1/(1+e^-x); silu is x·sigmoid(x), the SwiGLU gate.
func sigmoid(x float32) float32 { return 1 / (1 + exp32(-x)) }
func silu(x float32) float32    { return x * sigmoid(x) }

// ropeTheta is the rotary embedding's base (rope_theta).
const ropeTheta = 10000

// ropeTable holds cos and sin of the rotary embedding's angles, positions
// × half a head: the angle of pair i at position p is p·θ^(−2i/headDim),
// computed in float32 as Hugging Face's LlamaRotaryEmbedding does.
type ropeTable struct {
	half     int
	cos, sin []float32
}

func newRopeTable(ctx, headDim int) *ropeTable {
	half := headDim / 2
	t := &ropeTable{half: half, cos: make([]float32, ctx*half), sin: make([]float32, ctx*half)}
	for i := 0; i < half; i++ {
		e := float32(2*i) / float32(headDim)
		invFreq := 1 / float32(math.Pow(ropeTheta, float64(e)))
		for p := 0; p < ctx; p++ {
			ang := float64(float32(p) * invFreq)
			t.cos[p*half+i] = float32(math.Cos(ang))
			t.sin[p*half+i] = float32(math.Sin(ang))
		}
	}
	return t
}

// rotate applies the rotary embedding of position p to each head of row
// (heads × headDim), in Llama's "rotate half" layout: element i pairs with
// element i+headDim/2. inverse applies the transpose, which
// back-propagates the rotation.
func (t *ropeTable) rotate(row []float32, p, heads int, inverse bool) {
	h := t.half
	cs, sn := t.cos[p*h:(p+1)*h], t.sin[p*h:(p+1)*h]
	for hd := 0; hd < heads; hd++ {
		x := row[hd*2*h : (hd+1)*2*h]
		for i := 0; i < h; i++ {
			c, s := cs[i], sn[i]
			if inverse {
				s = -s
			}
			a, b := x[i], x[i+h]
			x[i] = a*c - b*s
			x[i+h] = b*c + a*s
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

// logSoftmax writes the log-probabilities of logits z into lp and returns
// the entropy of the distribution.
func logSoftmax(z, lp []float32) float32 {
	mx := float32(math.Inf(-1))
	for _, v := range z {
		if v > mx {
			mx = v
		}
	}
	var s float32
	for _, v := range z {
		s += exp32(v - mx)
	}
	lse := mx + float32(math.Log(float64(s)))
	var h float32
	for i, v := range z {
		l := v - lse
		lp[i] = l
		h -= exp32(l) * l
	}
	return h
}

// attendRow computes causal attention for one query row q against the
// first n rows of K and V (row stride d), writing the heads' outputs into
// out and their attention weights into probs (heads × ctx, row u of head h
// at h*ctx+u).
//
// The scores of four keys are computed at once (scores4), each summed in
// the same order as one at a time: four independent chains of adds the
// CPU overlaps, where one chain waits on each add. The results are the
// same to the bit (TestAttendSameBits).
func attendRow(q, K, V []float32, n, d, heads, ctx int, out, probs []float32) {
	dh := d / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	for h := 0; h < heads; h++ {
		o := h * dh
		qh := q[o : o+dh]
		p := probs[h*ctx : h*ctx+n]
		mx := float32(math.Inf(-1))
		u := 0
		for ; u+4 <= n; u += 4 {
			s0, s1, s2, s3 := dot4Rows(qh, K[u*d+o:], d)
			s0 *= scale
			s1 *= scale
			s2 *= scale
			s3 *= scale
			p[u], p[u+1], p[u+2], p[u+3] = s0, s1, s2, s3
			if s0 > mx {
				mx = s0
			}
			if s1 > mx {
				mx = s1
			}
			if s2 > mx {
				mx = s2
			}
			if s3 > mx {
				mx = s3
			}
		}
		for ; u < n; u++ {
			kr := K[u*d+o : u*d+o+dh]
			kr = kr[:len(qh)]
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
			vr = vr[:len(oh)]
			for i, vv := range vr {
				oh[i] += pu * vv
			}
		}
	}
}

// dot4Rows is the dot products of x with four rows of M, M[0:], M[d:],
// M[2d:] and M[3d:] (each len(x) long), each summed in order from the
// first term: four chains the CPU runs side by side.
func dot4Rows(x, M []float32, d int) (s0, s1, s2, s3 float32) {
	n := len(x)
	r0 := M[:n]
	r1 := M[d : d+n]
	r2 := M[2*d : 2*d+n]
	r3 := M[3*d : 3*d+n]
	for i, xv := range x {
		s0 += xv * r0[i]
		s1 += xv * r1[i]
		s2 += xv * r2[i]
		s3 += xv * r3[i]
	}
	return
}

// attendBackward back-propagates attention over one sequence of n rows:
// given the saved weights probs (rows × heads × ctx) and dOut, it adds the
// gradients of Q, K and V. As in attendRow, the dot products with V's
// rows are computed four at a time, each in its own order, and every sum
// across rows keeps its order: the same bits as one row at a time.
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
			u := 0
			for ; u+4 <= len(p); u += 4 {
				s0, s1, s2, s3 := dot4Rows(do, V[u*d+o:], d)
				dp[u], dp[u+1], dp[u+2], dp[u+3] = s0, s1, s2, s3
				sumPdP += p[u] * s0
				sumPdP += p[u+1] * s1
				sumPdP += p[u+2] * s2
				sumPdP += p[u+3] * s3
			}
			for ; u < len(p); u++ {
				vr := V[u*d+o : u*d+o+dh]
				vr = vr[:len(do)]
				var s float32
				for i, g := range do {
					s += g * vr[i]
				}
				dp[u] = s
				sumPdP += p[u] * s
			}
			for u := range p {
				dvr := dV[u*d+o : u*d+o+dh]
				dvr = dvr[:len(do)]
				pu := p[u]
				for i, g := range do {
					dvr[i] += pu * g
				}
			}
			qt := Q[t*d+o : t*d+o+dh]
			dqt := dQ[t*d+o : t*d+o+dh]
			dqt = dqt[:len(qt)]
			for u := range p {
				ds := p[u] * (dp[u] - sumPdP) * scale
				if ds == 0 {
					continue
				}
				kr := K[u*d+o : u*d+o+dh]
				dkr := dK[u*d+o : u*d+o+dh]
				kr, dkr = kr[:len(qt)], dkr[:len(qt)]
				for i := range qt {
					dqt[i] += ds * kr[i]
					dkr[i] += ds * qt[i]
				}
			}
		}
	}
}

func sqrtf(x float64) float64 { return math.Sqrt(x) }
