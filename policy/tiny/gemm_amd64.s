//go:build !purego

#include "textflag.h"

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

	MOVL         (SI), BX
	TESTL        $0x7fffffff, BX
	JZ           row1
	VBROADCASTSS (SI), Y10
	VMULPS       Y10, Y8, Y11
	VMULPS       Y10, Y9, Y12
	VADDPS       Y0, Y11, Y0
	VADDPS       Y1, Y12, Y1

row1:
	MOVL         (SI)(R8*1), BX
	TESTL        $0x7fffffff, BX
	JZ           row2
	VBROADCASTSS (SI)(R8*1), Y13
	VMULPS       Y13, Y8, Y14
	VMULPS       Y13, Y9, Y15
	VADDPS       Y2, Y14, Y2
	VADDPS       Y3, Y15, Y3

row2:
	MOVL         (AX), BX
	TESTL        $0x7fffffff, BX
	JZ           row3
	VBROADCASTSS (AX), Y10
	VMULPS       Y10, Y8, Y11
	VMULPS       Y10, Y9, Y12
	VADDPS       Y4, Y11, Y4
	VADDPS       Y5, Y12, Y5

row3:
	MOVL         (AX)(R8*1), BX
	TESTL        $0x7fffffff, BX
	JZ           next
	VBROADCASTSS (AX)(R8*1), Y13
	VMULPS       Y13, Y8, Y14
	VMULPS       Y13, Y9, Y15
	VADDPS       Y6, Y14, Y6
	VADDPS       Y7, Y15, Y7

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
	MOVSS (SI)(AX*4), X8
	MOVSS X8, X12
	MULSS (R8)(AX*4), X12
	ADDSS X12, X0
	MOVSS X8, X12
	MULSS (R9)(AX*4), X12
	ADDSS X12, X1
	MOVSS X8, X12
	MULSS (R10)(AX*4), X12
	ADDSS X12, X2
	MOVSS X8, X12
	MULSS (R11)(AX*4), X12
	ADDSS X12, X3
	INCQ  AX
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

	MOVUPS X8, X12
	MULPS  (R8)(AX*4), X12
	MOVUPS X9, X13
	MULPS  16(R8)(AX*4), X13
	MOVUPS X10, X14
	MULPS  32(R8)(AX*4), X14
	MOVUPS X11, X15
	MULPS  48(R8)(AX*4), X15
	ADDPS  X12, X0
	ADDPS  X13, X4
	ADDPS  X14, X0
	ADDPS  X15, X4

	MOVUPS X8, X12
	MULPS  (R9)(AX*4), X12
	MOVUPS X9, X13
	MULPS  16(R9)(AX*4), X13
	MOVUPS X10, X14
	MULPS  32(R9)(AX*4), X14
	MOVUPS X11, X15
	MULPS  48(R9)(AX*4), X15
	ADDPS  X12, X1
	ADDPS  X13, X5
	ADDPS  X14, X1
	ADDPS  X15, X5

	MOVUPS X8, X12
	MULPS  (R10)(AX*4), X12
	MOVUPS X9, X13
	MULPS  16(R10)(AX*4), X13
	MOVUPS X10, X14
	MULPS  32(R10)(AX*4), X14
	MOVUPS X11, X15
	MULPS  48(R10)(AX*4), X15
	ADDPS  X12, X2
	ADDPS  X13, X6
	ADDPS  X14, X2
	ADDPS  X15, X6

	MOVUPS X8, X12
	MULPS  (R11)(AX*4), X12
	MOVUPS X9, X13
	MULPS  16(R11)(AX*4), X13
	MOVUPS X10, X14
	MULPS  32(R11)(AX*4), X14
	MOVUPS X11, X15
	MULPS  48(R11)(AX*4), X15
	ADDPS  X12, X3
	ADDPS  X13, X7
	ADDPS  X14, X3
	ADDPS  X15, X7

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
	MOVUPS X8, X12
	MULPS  (R8)(AX*4), X12
	ADDPS  X12, X0
	MOVUPS X8, X12
	MULPS  (R9)(AX*4), X12
	ADDPS  X12, X1
	MOVUPS X8, X12
	MULPS  (R10)(AX*4), X12
	ADDPS  X12, X2
	MOVUPS X8, X12
	MULPS  (R11)(AX*4), X12
	ADDPS  X12, X3
	ADDQ   $4, AX
	DECQ   CX
	JNZ    tail4

tail1start:
	ANDQ $3, BX
	JZ   end

tail1:
	MOVSS (SI)(AX*4), X8
	MOVSS X8, X12
	MULSS (R8)(AX*4), X12
	ADDSS X12, X0
	MOVSS X8, X12
	MULSS (R9)(AX*4), X12
	ADDSS X12, X1
	MOVSS X8, X12
	MULSS (R10)(AX*4), X12
	ADDSS X12, X2
	MOVSS X8, X12
	MULSS (R11)(AX*4), X12
	ADDSS X12, X3
	INCQ  AX
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
