//go:build !amd64 || purego

package tiny

const haveTile = false

func mulTile4x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int) {
	panic("tiny: mulTile4x16 without its assembly")
}

const haveDot4 = false

func dot4(n int, x, y *float32, ldy int, out *[4]float32) {
	panic("tiny: dot4 without its assembly")
}

func mulTile1x16(k int, a *float32, acs int, b *float32, ldb int, c *float32) {
	panic("tiny: mulTile1x16 without its assembly")
}
