package tiny

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
)

// mulAcc adds A·B to C: C[i][j] += Σ_l a(i, l)·B[l][j], m × n outputs
// over k terms, with a(i, l) = a[i·ars + l·acs] (ars = k, acs = 1 for a
// row-major A; ars = 1, acs = m for Aᵀ stored row-major), B and C
// row-major with row strides ldb and ldc.
//
// Every element is summed the way gonum's Sgemm sums it when neither B
// nor C is transposed (Sgemm(NoTrans or Trans, NoTrans, …, alpha 1,
// beta 1)): l = 0, 1, …, k−1 in order, the product rounded to float32
// and then the sum, a zero a(i, l) skipped. So it computes the same bits
// — zeros' signs, infinities and NaNs included — only faster: the
// assembly keeps a tile of 4 × 16 outputs (1 × 16 for the last m mod 4
// rows) in registers across all of l (gonum adds one row of B into C at
// a time, loading and storing C for each l). Without AVX it is gonum's Sgemm itself. A must be one of
// the two layouts (acs = 1, or ars = 1).
func mulAcc(m, n, k int, a []float32, ars, acs int, b []float32, ldb int, c []float32, ldc int) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	if need := (m-1)*ars + (k-1)*acs + 1; len(a) < need {
		panic(fmt.Sprintf("tiny: mulAcc: a has %d values, %d × %d needs %d", len(a), m, k, need))
	}
	if need := (k-1)*ldb + n; len(b) < need || ldb < n {
		panic(fmt.Sprintf("tiny: mulAcc: b has %d values (row stride %d), %d × %d needs %d", len(b), ldb, k, n, need))
	}
	if need := (m-1)*ldc + n; len(c) < need || ldc < n {
		panic(fmt.Sprintf("tiny: mulAcc: c has %d values (row stride %d), %d × %d needs %d", len(c), ldc, m, n, need))
	}
	if !haveTile {
		if acs == 1 {
			blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, ars, b, ldb, 1, c, ldc)
		} else {
			blasImpl.Sgemm(blas.Trans, blas.NoTrans, m, n, k, 1, a, acs, b, ldb, 1, c, ldc)
		}
		return
	}
	m4, n16 := m&^3, n&^15
	// Columns outer: a panel of B (k × 16) stays in cache while the tiles
	// of its rows go by.
	for j := 0; j < n16; j += 16 {
		for i := 0; i < m4; i += 4 {
			mulTile4x16(k, &a[i*ars], ars, acs, &b[j], ldb, &c[i*ldc+j], ldc)
		}
		for i := m4; i < m; i++ { // the last m mod 4 rows, one at a time
			mulTile1x16(k, &a[i*ars], acs, &b[j], ldb, &c[i*ldc+j])
		}
	}
	// What the tiles leave: the last n mod 16 columns.
	mulAccScalar(0, m, n16, n, k, a, ars, acs, b, ldb, c, ldc)
}

// mulAccScalar is mulAcc for rows [i0, i1) and columns [j0, j1), one
// element at a time in the same order.
func mulAccScalar(i0, i1, j0, j1, k int, a []float32, ars, acs int, b []float32, ldb int, c []float32, ldc int) {
	if j0 >= j1 {
		return
	}
	for i := i0; i < i1; i++ {
		cr := c[i*ldc+j0 : i*ldc+j1]
		for l := 0; l < k; l++ {
			v := a[i*ars+l*acs]
			if v == 0 {
				continue
			}
			br := b[l*ldb+j0 : l*ldb+j1]
			for j := range cr {
				// The conversion rounds the product: no fused multiply-add.
				cr[j] += float32(v * br[j])
			}
		}
	}
}

// mulAccT computes C = A·Bᵀ + beta·C for A [m, k], B [n, k] and C [m, n],
// row-major with row strides lda, ldb and ldc, and beta 0 or 1: what
// gonum's Sgemm(NoTrans, Trans, …, alpha 1, beta) computes, to the bit.
// That Sgemm takes each element as dot products of rows (f32.DotUnitary,
// whose lanes depend on B's alignment), over all of k when C has fewer
// than 4 blocks of 64 × 64 and over k in blocks of 64 otherwise, adding
// each to C in turn; mulAccT does the same with dot4, which computes four
// of those dot products at once against one row of A (loaded once, and
// one call, not four). Without SSE3, with a B whose rows differ in
// alignment (ldb not a multiple of 4), or for the last n mod 4 columns,
// it calls Sgemm.
func mulAccT(m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !haveDot4 || ldb%4 != 0 || (beta != 0 && beta != 1) {
		blasImpl.Sgemm(blas.NoTrans, blas.Trans, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if m == 0 || n == 0 {
		return
	}
	if need := (m-1)*lda + k; len(a) < need || lda < max(k, 1) {
		panic(fmt.Sprintf("tiny: mulAccT: a has %d values (row stride %d), %d × %d needs %d", len(a), lda, m, k, need))
	}
	if need := (n-1)*ldb + k; len(b) < need || ldb < max(k, 1) {
		panic(fmt.Sprintf("tiny: mulAccT: b has %d values (row stride %d), %d × %d needs %d", len(b), ldb, n, k, need))
	}
	if need := (m-1)*ldc + n; len(c) < need || ldc < n {
		panic(fmt.Sprintf("tiny: mulAccT: c has %d values (row stride %d), %d × %d needs %d", len(c), ldc, m, n, need))
	}
	if beta == 0 {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
	}
	if k == 0 {
		return
	}
	const block, minParBlock = 64, 4 // gonum's blockSize and minParBlock
	kb := k
	if ((m+block-1)/block)*((n+block-1)/block) >= minParBlock {
		kb = block
	}
	n4 := n &^ 3
	var out [4]float32
	for l := 0; l < k; l += kb {
		L := min(kb, k-l)
		for i := 0; i < m; i++ {
			ar, cr := a[i*lda+l:], c[i*ldc:i*ldc+n]
			for j := 0; j < n4; j += 4 {
				dot4(L, &ar[0], &b[j*ldb+l], ldb, &out)
				cr[j] += out[0]
				cr[j+1] += out[1]
				cr[j+2] += out[2]
				cr[j+3] += out[3]
			}
		}
		if n4 < n {
			// A block of at most 64 terms (or all of k, when Sgemm
			// does not block it: then neither does this smaller call).
			blasImpl.Sgemm(blas.NoTrans, blas.Trans, m, n-n4, L, 1, a[l:], lda, b[n4*ldb+l:], ldb, 1, c[n4:], ldc)
		}
	}
}
