package tiny

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttendSameBits: attendRow and attendBackward, which compute four
// dot products at a time, give the same bits as the loops they replaced
// (one dot product at a time, below), for every length of the
// four-at-a-time part and its tail, several head sizes, and scores that
// overflow to infinity or are NaN.
func TestAttendSameBits(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		name        string
		n, d, heads int
		special     func(Q, K, V, dOut []float32)
	}{
		{name: "one row", n: 1, d: 64, heads: 4},
		{name: "three rows, all tail", n: 3, d: 64, heads: 4},
		{name: "four rows, no tail", n: 4, d: 64, heads: 4},
		{name: "seven rows", n: 7, d: 64, heads: 4},
		{name: "the demo's longest", n: 21, d: 64, heads: 4},
		{name: "odd head size", n: 9, d: 30, heads: 3},
		{name: "one head", n: 13, d: 16, heads: 1},
		{name: "past the stack buffer", n: 70, d: 32, heads: 2},
		{name: "infinite and NaN inputs", n: 10, d: 64, heads: 4, special: func(Q, K, V, dOut []float32) {
			K[64*5+3] = inf
			V[64*6+20] = nan
			dOut[64*8+40] = -inf
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.d)))
			ctx := tc.n
			Q, K, V, dOut := normals(rng, tc.n*tc.d), normals(rng, tc.n*tc.d), normals(rng, tc.n*tc.d), normals(rng, tc.n*tc.d)
			if tc.special != nil {
				tc.special(Q, K, V, dOut)
			}
			probs, outs := make([][]float32, 2), make([][]float32, 2)
			for k, attend := range []func(q, K, V []float32, n, d, heads, ctx int, out, probs []float32){attendRow, attendRowOneAtATime} {
				probs[k], outs[k] = make([]float32, tc.n*tc.heads*ctx), make([]float32, tc.n*tc.d)
				for r := 0; r < tc.n; r++ {
					attend(Q[r*tc.d:(r+1)*tc.d], K, V, r+1, tc.d, tc.heads, ctx, outs[k][r*tc.d:(r+1)*tc.d], probs[k][r*tc.heads*ctx:(r+1)*tc.heads*ctx])
				}
			}
			sameBits(t, "attention output", outs[0], outs[1])
			sameBits(t, "attention weights", probs[0], probs[1])
			grads := make([][3][]float32, 2)
			for k, back := range []func(n, d, heads, ctx int, Q, K, V, probs, dOut, dQ, dK, dV []float32){attendBackward, attendBackwardOneAtATime} {
				g := [3][]float32{normals(rand.New(rand.NewPCG(7, 7)), tc.n*tc.d), normals(rand.New(rand.NewPCG(8, 8)), tc.n*tc.d), normals(rand.New(rand.NewPCG(9, 9)), tc.n*tc.d)}
				back(tc.n, tc.d, tc.heads, ctx, Q, K, V, probs[1], dOut, g[0], g[1], g[2])
				grads[k] = g
			}
			for i, name := range []string{"dQ", "dK", "dV"} {
				sameBits(t, name, grads[0][i], grads[1][i])
			}
		})
	}
}

// sameBits fails t where got and want differ in a bit.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v (%#08x), the one-at-a-time loop's %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// attendRowOneAtATime is attendRow as it was before its scores were
// computed four at a time: the reference its bits are checked against.
// It computes causal attention for one query row q against the
// first n rows of K and V (row stride d), writing the heads' outputs into
// out and their attention weights into probs (heads × ctx, row u of head h
// at h*ctx+u).
func attendRowOneAtATime(q, K, V []float32, n, d, heads, ctx int, out, probs []float32) {
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

// attendBackwardOneAtATime is attendBackward as it was before, the
// reference of its bits. It back-propagates attention over one sequence of n rows:
// given the saved weights probs (rows × heads × ctx) and dOut, it adds the
// gradients of Q, K and V.
func attendBackwardOneAtATime(n, d, heads, ctx int, Q, K, V, probs, dOut, dQ, dK, dV []float32) {
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

// BenchmarkAttend is attention forward and backward over a sequence of
// the demo's longest (21 rows, 4 heads of 16), four dot products at a
// time against one at a time.
func BenchmarkAttend(b *testing.B) {
	const n, d, heads = 21, 64, 4
	rng := rand.New(rand.NewPCG(1, 2))
	Q, K, V, dOut := normals(rng, n*d), normals(rng, n*d), normals(rng, n*d), normals(rng, n*d)
	probs, out := make([]float32, n*heads*n), make([]float32, n*d)
	dQ, dK, dV := make([]float32, n*d), make([]float32, n*d), make([]float32, n*d)
	for _, k := range []struct {
		name    string
		forward func(q, K, V []float32, n, d, heads, ctx int, out, probs []float32)
		back    func(n, d, heads, ctx int, Q, K, V, probs, dOut, dQ, dK, dV []float32)
	}{
		{"four-at-a-time", attendRow, attendBackward},
		{"one-at-a-time", attendRowOneAtATime, attendBackwardOneAtATime},
	} {
		b.Run(k.name+"/forward", func(b *testing.B) {
			for b.Loop() {
				for r := 0; r < n; r++ {
					k.forward(Q[r*d:(r+1)*d], K, V, r+1, d, heads, n, out[r*d:(r+1)*d], probs[r*heads*n:(r+1)*heads*n])
				}
			}
		})
		b.Run(k.name+"/backward", func(b *testing.B) {
			for b.Loop() {
				k.back(n, d, heads, n, Q, K, V, probs, dOut, dQ, dK, dV)
			}
		})
	}
}
