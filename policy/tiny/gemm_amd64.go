//go:build !purego

package tiny

import "golang.org/x/sys/cpu"

// haveTile says whether mulTile4x16 can run: it needs AVX (the OS
// saving the YMM registers included).
var haveTile = cpu.X86.HasAVX

//go:noescape
func mulTile4x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int)

// haveDot4 says whether dot4 can run: it needs SSE3 (HADDPS).
var haveDot4 = cpu.X86.HasSSE3

//go:noescape
func dot4(n int, x, y *float32, ldy int, out *[4]float32)

//go:noescape
func mulTile1x16(k int, a *float32, acs int, b *float32, ldb int, c *float32)
