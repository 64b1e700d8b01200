//go:build !purego

#include "textflag.h"

// TILEROW adds one row's term to its two accumulators (ACC0, ACC1) of
// mulTile4x16: the element of A at ADDR times B's 16 values in Y8 and
// Y9, unless that element is a zero of either sign (then to SKIP).
#define TILEROW(ADDR, T, P0, P1, ACC0, ACC1, SKIP) \
	MOVL         ADDR, BX \
	TESTL        $0x7fffffff, BX \
	JZ           SKIP \
	VBROADCASTSS ADDR, T \
	VMULPS       T, Y8, P0 \
	VMULPS       T, Y9, P1 \
	VADDPS       ACC0, P0, ACC0 \
	VADDPS       ACC1, P1, ACC1

// DOT16, DOT4 and DOT1 are dot4's steps for the row of y at Y: 16 terms
// (x in X8–X11) into the lanes of S and P as DotUnitary's main loop adds
// them, 4 terms (x in X8) into S, one term (x in X8's lane 0) into S's
// lane 0.
#define DOT16(Y, S, P) \
	MOVUPS X8, X12 \
	MULPS  (Y)(AX*4), X12 \
	MOVUPS X9, X13 \
	MULPS  16(Y)(AX*4), X13 \
	MOVUPS X10, X14 \
	MULPS  32(Y)(AX*4), X14 \
	MOVUPS X11, X15 \
	MULPS  48(Y)(AX*4), X15 \
	ADDPS  X12, S \
	ADDPS  X13, P \
	ADDPS  X14, S \
	ADDPS  X15, P

#define DOT4(Y, S) \
	MOVUPS X8, X12 \
	MULPS  (Y)(AX*4), X12 \
	ADDPS  X12, S

#define DOT1(Y, S) \
	MOVSS X8, X12 \
	MULSS (Y)(AX*4), X12 \
	ADDSS X12, S

// ONETERM adds x's next term to lane 0 of the four sums and moves on.
#define ONETERM \
	MOVSS (SI)(AX*4), X8 \
	DOT1(R8, X0) \
	DOT1(R9, X1) \
	DOT1(R10, X2) \
	DOT1(R11, X3) \
	INCQ  AX

// func mulTile4x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int)
//
// C[i][j] += a(i, l)·B[l][j] for a tile of 4 rows × 16 columns of C, l
// from 0 to k−1 in order, where a(i, l) is at a + (i·ars + l·acs)
// elements; a zero a(i, l) (either sign) adds nothing. Each element gets
// a product rounded to float32 and then a sum rounded to float32, one l
// after the other: VMULPS then VADDPS, never a fused multiply-add, so the
// bits are those of gonum's Sgemm (f32.AxpyUnitary per l). Strides are
// in elements.
TEXT ·mulTile4x16(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ ars+16(FP), R8
	SHLQ $2, R8
	MOVQ acs+24(FP), R9
	SHLQ $2, R9
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), R10
	SHLQ $2, R10
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R11
	SHLQ $2, R11

	// The tile of C in Y0–Y7, row r in Y(2r) and Y(2r+1).
	MOVQ    DX, R12
	VMOVUPS (R12), Y0
	VMOVUPS 32(R12), Y1
	ADDQ    R11, R12
	VMOVUPS (R12), Y2
	VMOVUPS 32(R12), Y3
	ADDQ    R11, R12
	VMOVUPS (R12), Y4
	VMOVUPS 32(R12), Y5
	ADDQ    R11, R12
	VMOVUPS (R12), Y6
	VMOVUPS 32(R12), Y7

	TESTQ CX, CX
	JZ    store

loop:
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	LEAQ    (SI)(R8*2), AX // row 2; row 3 is AX+ars

	TILEROW((SI), Y10, Y11, Y12, Y0, Y1, row1)

row1:
	TILEROW((SI)(R8*1), Y13, Y14, Y15, Y2, Y3, row2)

row2:
	TILEROW((AX), Y10, Y11, Y12, Y4, Y5, row3)

row3:
	TILEROW((AX)(R8*1), Y13, Y14, Y15, Y6, Y7, next)

next:
	ADDQ R9, SI
	ADDQ R10, DI
	DECQ CX
	JNZ  loop

store:
	MOVQ    DX, R12
	VMOVUPS Y0, (R12)
	VMOVUPS Y1, 32(R12)
	ADDQ    R11, R12
	VMOVUPS Y2, (R12)
	VMOVUPS Y3, 32(R12)
	ADDQ    R11, R12
	VMOVUPS Y4, (R12)
	VMOVUPS Y5, 32(R12)
	ADDQ    R11, R12
	VMOVUPS Y6, (R12)
	VMOVUPS Y7, 32(R12)
	VZEROUPPER
	RET

// func dot4(n int, x, y *float32, ldy int, out *[4]float32)
//
// out[j] = gonum's f32.DotUnitary(x[:n], y[j·ldy:][:n]) for j < 4, bit
// for bit: the same lanes summed in the same order. The rows of y must
// share their alignment (ldy a multiple of 4), as DotUnitary's
// structure depends on it: scalar terms until y is 16-byte aligned
// (into lane 0), then 16 terms a turn into two 4-lane sums (lanes
// 0–3 and 8–11 into the first, 4–7 and 12–15 into the second) added
// together after the loop, then 4 terms a turn into the first, then
// scalar terms into lane 0, and the lanes added pairwise at the end:
// (s0+s1)+(s2+s3). x is shared by the four products.
TEXT ·dot4(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), R8
	MOVQ ldy+24(FP), R12
	SHLQ $2, R12
	LEAQ (R8)(R12*1), R9
	LEAQ (R9)(R12*1), R10
	LEAQ (R10)(R12*1), R11

	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3
	XORQ  AX, AX
	TESTQ CX, CX
	JE    end

	MOVQ R8, DX
	ANDQ $0xF, DX
	JZ   notrim
	SUBQ $16, DX

trim:
	ONETERM
	DECQ  CX
	JZ    end
	ADDQ  $4, DX
	JNZ   trim

notrim:
	XORPS X4, X4
	XORPS X5, X5
	XORPS X6, X6
	XORPS X7, X7
	MOVQ  CX, BX
	ANDQ  $0xF, BX
	SHRQ  $4, CX
	JZ    tail4start

loop:
	MOVUPS (SI)(AX*4), X8
	MOVUPS 16(SI)(AX*4), X9
	MOVUPS 32(SI)(AX*4), X10
	MOVUPS 48(SI)(AX*4), X11

	DOT16(R8, X0, X4)

	DOT16(R9, X1, X5)

	DOT16(R10, X2, X6)

	DOT16(R11, X3, X7)

	ADDQ $16, AX
	DECQ CX
	JNZ  loop

	ADDPS X4, X0
	ADDPS X5, X1
	ADDPS X6, X2
	ADDPS X7, X3
	CMPQ  BX, $0
	JE    end

tail4start:
	MOVQ BX, CX
	SHRQ $2, CX
	JZ   tail1start

tail4:
	MOVUPS (SI)(AX*4), X8
	DOT4(R8, X0)
	DOT4(R9, X1)
	DOT4(R10, X2)
	DOT4(R11, X3)
	ADDQ   $4, AX
	DECQ   CX
	JNZ    tail4

tail1start:
	ANDQ $3, BX
	JZ   end

tail1:
	ONETERM
	DECQ  BX
	JNZ   tail1

end:
	HADDPS X0, X0
	HADDPS X0, X0
	HADDPS X1, X1
	HADDPS X1, X1
	HADDPS X2, X2
	HADDPS X2, X2
	HADDPS X3, X3
	HADDPS X3, X3
	MOVQ   out+32(FP), DI
	MOVSS  X0, (DI)
	MOVSS  X1, 4(DI)
	MOVSS  X2, 8(DI)
	MOVSS  X3, 12(DI)
	RET

// func mulTile1x16(k int, a *float32, acs int, b *float32, ldb int, c *float32)
//
// mulTile4x16 for one row of C: C[j] += a(l)·B[l][j], a(l) at a + l·acs
// elements, in the same order with the same skips.
TEXT ·mulTile1x16(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ acs+16(FP), R9
	SHLQ $2, R9
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R10
	SHLQ $2, R10
	MOVQ c+40(FP), DX

	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	TESTQ   CX, CX
	JZ      store1

loop1:
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	TILEROW((SI), Y10, Y11, Y12, Y0, Y1, next1)

next1:
	ADDQ R9, SI
	ADDQ R10, DI
	DECQ CX
	JNZ  loop1

store1:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET
