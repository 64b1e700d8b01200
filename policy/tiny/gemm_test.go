package tiny

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
)

// TestMulAccMatchesSgemm checks that mulAcc computes gonum's Sgemm bit
// for bit — the tiles, the leftover rows and columns, zeros of either
// sign in A (skipped), infinities and NaNs in B and negative zeros in C
// — for A as stored and transposed.
func TestMulAccMatchesSgemm(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		name    string
		m, n, k int
		// special puts values gonum treats apart into a, b and c.
		special func(a, b, c []float32)
	}{
		{name: "one tile", m: 4, n: 16, k: 64},
		{name: "tiles only", m: 8, n: 32, k: 130},
		{name: "leftover rows and columns", m: 9, n: 37, k: 17},
		{name: "narrower than a tile", m: 3, n: 15, k: 5},
		{name: "one term", m: 5, n: 17, k: 1},
		{name: "no terms", m: 4, n: 16, k: 0},
		{name: "a demo linear", m: 61, n: 176, k: 64},
		{name: "zeros in a are skipped", m: 8, n: 32, k: 9, special: func(a, b, c []float32) {
			for i := 0; i < len(a); i += 3 {
				a[i] = 0
			}
			a[1] = negZero
		}},
		{name: "zero times infinity is skipped", m: 8, n: 32, k: 6, special: func(a, b, c []float32) {
			clear(a[:len(a)/2])
			b[0], b[17], b[40] = inf, -inf, nan
		}},
		{name: "negative zeros in c are kept", m: 8, n: 32, k: 6, special: func(a, b, c []float32) {
			clear(a)
			a[5] = 1
			for i := range c {
				c[i] = negZero
			}
		}},
		{name: "zeros and infinities in the last rows", m: 7, n: 16, k: 6, special: func(a, b, c []float32) {
			for i := 0; i < len(a); i += 2 {
				a[i] = 0
			}
			b[3], b[20], b[33] = inf, -inf, nan
			c[len(c)-1] = negZero
		}},
		{name: "infinities meet", m: 4, n: 16, k: 3, special: func(a, b, c []float32) {
			b[0], b[16] = inf, -inf
			c[1] = nan
		}},
	} {
		for _, trans := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/transposed=%v", tc.name, trans), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(tc.m*1000+tc.n), uint64(tc.k)))
				fill := func(n int) []float32 { return normals(rng, n) }
				a, b, c := fill(tc.m*max(tc.k, 1)+1), fill(tc.k*tc.n+2), fill(tc.m*tc.n)
				if tc.special != nil {
					tc.special(a, b, c)
				}
				want := append([]float32(nil), c...)
				got := append([]float32(nil), c...)
				if trans { // a holds Aᵀ: k rows of m
					blasImpl.Sgemm(blas.Trans, blas.NoTrans, tc.m, tc.n, tc.k, 1, a, max(tc.m, 1), b, tc.n, 1, want, tc.n)
					mulAcc(tc.m, tc.n, tc.k, a, 1, tc.m, b, tc.n, got, tc.n)
				} else {
					blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, tc.m, tc.n, tc.k, 1, a, max(tc.k, 1), b, tc.n, 1, want, tc.n)
					mulAcc(tc.m, tc.n, tc.k, a, tc.k, 1, b, tc.n, got, tc.n)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("c[%d][%d] = %v (%#08x), gonum's Sgemm %v (%#08x)", i/tc.n, i%tc.n, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			})
		}
	}
}

// TestMulAccShortSlices checks that mulAcc refuses slices too short
// for the shapes (the assembly must never read past them).
func TestMulAccShortSlices(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b, c int
		want    string
	}{
		{"short a", 4*8 - 1, 8 * 16, 4 * 16, "tiny: mulAcc: a has 31 values, 4 × 8 needs 32"},
		{"short b", 4 * 8, 8*16 - 1, 4 * 16, "tiny: mulAcc: b has 127 values (row stride 16), 8 × 16 needs 128"},
		{"short c", 4 * 8, 8 * 16, 4*16 - 1, "tiny: mulAcc: c has 63 values (row stride 16), 4 × 16 needs 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if got := recover(); got != tc.want {
					t.Fatalf("panic %v, want %q", got, tc.want)
				}
			}()
			mulAcc(4, 16, 8, make([]float32, tc.a), 8, 1, make([]float32, tc.b), 16, make([]float32, tc.c), 16)
		})
	}
}

// BenchmarkMulAcc times the demo's matrix products (a shard of a train
// step: 750 rows through a 64 × 176 layer, its weight gradient and the
// gradient of its input)
// with mulAcc against gonum's Sgemm on the same operands, alternating,
// and reports gonum/mulacc.
func BenchmarkMulAcc(b *testing.B) {
	const rows, in, out = 750, 64, 176
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 { return normals(rng, n) }
	x, w, dy := fill(rows*in), fill(in*out), fill(rows*out)
	y, g := make([]float32, rows*out), make([]float32, in*out)
	for _, bc := range []struct {
		name       string
		gonum, new func()
	}{
		{"forward", func() {
			blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, rows, out, in, 1, x, in, w, out, 1, y, out)
		}, func() { mulAcc(rows, out, in, x, in, 1, w, out, y, out) }},
		{"weight_gradient", func() {
			blasImpl.Sgemm(blas.Trans, blas.NoTrans, in, out, rows, 1, x, in, dy, out, 1, g, out)
		}, func() { mulAcc(in, out, rows, x, 1, in, dy, out, g, out) }},
		{"input_gradient", func() {
			blasImpl.Sgemm(blas.NoTrans, blas.Trans, rows, in, out, 1, dy, out, w, out, 0, y, in)
		}, func() { mulAccT(rows, in, out, dy, out, w, out, 0, y, in) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var tg, tn time.Duration
			for b.Loop() {
				t0 := time.Now()
				bc.gonum()
				t1 := time.Now()
				bc.new()
				tn += time.Since(t1)
				tg += t1.Sub(t0)
			}
			b.ReportMetric(float64(tg)/float64(tn), "gonum/mulacc")
		})
	}
}

// TestMulAccTMatchesSgemm checks that mulAccT computes gonum's
// Sgemm(NoTrans, Trans) bit for bit: one dot product over all of k
// (fewer than 4 blocks of C) and k in blocks of 64 (4 or more), B at
// each alignment, leftover columns, beta 0 and 1, and special values.
func TestMulAccTMatchesSgemm(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		name      string
		m, n, k   int
		ldbPad    int // B's row stride is k + ldbPad
		beta      float32
		special   func(a, b, c []float32)
		wantSgemm bool // B's rows differ in alignment: Sgemm itself
	}{
		{name: "serial, one dot over k", m: 20, n: 64, k: 176},
		{name: "blocked k", m: 200, n: 64, k: 176},
		{name: "blocked k, beta 1", m: 200, n: 128, k: 130, beta: 1},
		{name: "short dots", m: 9, n: 8, k: 3},
		{name: "tails of 4 and 1", m: 7, n: 12, k: 16 + 7},
		{name: "leftover columns", m: 70, n: 198, k: 64},
		{name: "leftover columns, serial", m: 5, n: 6, k: 100},
		{name: "no terms, beta 0", m: 4, n: 8, k: 0},
		{name: "no terms, beta 1", m: 4, n: 8, k: 0, beta: 1},
		{name: "a demo backward", m: 750, n: 64, k: 176},
		{name: "padded rows", m: 30, n: 16, k: 50, ldbPad: 2},
		{name: "rows of differing alignment", m: 30, n: 16, k: 50, ldbPad: 1, wantSgemm: true},
		{name: "non-finite values", m: 8, n: 8, k: 40, beta: 1, special: func(a, b, c []float32) {
			a[3], b[50], b[81], c[2] = inf, -inf, nan, inf
		}},
	} {
		for _, offset := range []int{0, 1, 2, 3} { // B's first element's alignment
			t.Run(fmt.Sprintf("%s/offset=%d", tc.name, offset), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(tc.m*1000+tc.n), uint64(tc.k)))
				fill := func(n int) []float32 { return normals(rng, n) }
				ldb := max(tc.k, 1) + tc.ldbPad
				lda := max(tc.k, 1)
				a, c := fill(tc.m*lda), fill(tc.m*tc.n)
				b := fill(offset + tc.n*ldb)[offset:]
				if tc.special != nil {
					tc.special(a, b, c)
				}
				want := append([]float32(nil), c...)
				got := append([]float32(nil), c...)
				blasImpl.Sgemm(blas.NoTrans, blas.Trans, tc.m, tc.n, tc.k, 1, a, lda, b, ldb, tc.beta, want, tc.n)
				mulAccT(tc.m, tc.n, tc.k, a, lda, b, ldb, tc.beta, got, tc.n)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("c[%d][%d] = %v (%#08x), gonum's Sgemm %v (%#08x)", i/tc.n, i%tc.n, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			})
		}
	}
}

// normals returns n standard normal values.
func normals(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}
