package rewards

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// poolAllocator is an Arrow allocator that recycles the buffers Arrow
// frees. Decoding a batch of completions grows a multi-megabyte buffer by
// doubling; with the Go allocator every batch allocates, zeroes and
// garbage-collects it again, which costs more than decoding. Buffers are
// powers of two from 64 bytes, 64-byte aligned, and zeroed when handed
// out, as the Go allocator's are.
//
// A buffer is reused once Arrow releases it: strings viewed from a batch
// must not be kept after the batch is released.
type poolAllocator struct {
	pools [64]sync.Pool // by log2 of the capacity
}

var _ memory.Allocator = (*poolAllocator)(nil)

const minPoolClass = 6 // 64 bytes

func sizeClass(n int) int {
	if n <= 1<<minPoolClass {
		return minPoolClass
	}
	return bits.Len(uint(n - 1))
}

func (a *poolAllocator) Allocate(size int) []byte {
	if size <= 0 {
		return []byte{}
	}
	b := a.get(size, sizeClass(size))
	clear(b)
	return b
}

// growClass is the size class from which a buffer that grows skips a
// class: Arrow's builders double a buffer each time it fills, and a
// batch's completions (megabytes) would otherwise be copied once per
// doubling.
const growClass = 18 // 256 KiB

// get returns a buffer of length size and capacity 1<<c, not cleared.
func (a *poolAllocator) get(size, c int) []byte {
	if p, ok := a.pools[c].Get().(*[]byte); ok {
		return (*p)[:size]
	}
	b := make([]byte, 1<<c+64)
	shift := int(-uintptr(unsafe.Pointer(&b[0])) & 63)
	return b[shift : shift+size : shift+1<<c]
}

func (a *poolAllocator) Reallocate(size int, b []byte) []byte {
	old := len(b)
	if cap(b) >= size {
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	c := sizeClass(size)
	if c >= growClass && c < 40 {
		c++
	}
	nb := a.get(size, c)
	copy(nb, b)
	clear(nb[old:])
	a.Free(b)
	return nb
}

func (a *poolAllocator) Free(b []byte) {
	c := cap(b)
	if c < 1<<minPoolClass || c&(c-1) != 0 {
		return // not one of ours
	}
	b = b[:0]
	a.pools[bits.Len(uint(c))-1].Put(&b)
}
