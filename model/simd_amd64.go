//go:build amd64 && !purego

package model

import (
	"slices"
	"unsafe"

	"ringlm/gguf"
	"ringlm/internal/cpufeat"
)

//go:generate go run ./internal/tilegen

// Dispatch of the float path on amd64: the tile kernels of
// tiles_amd64.s (AVX-512 where the CPU has it, else AVX2; package
// cpufeat decides once per process), which follow the order of tiles.go
// bit for bit, for lengths that are multiples of 16; Go otherwise. The
// row conversions of simd_amd64.s give the Go conversions' bits.

// simdKernel names the kernels this process uses.
var simdKernel = kernelLevel.String()

// rowF16AVX2 reports whether src held a half with an all-ones exponent
// (infinity or NaN); the caller then redoes the row in Go, because
// VCVTPH2PS quiets signalling NaNs where the Go table keeps them.
//
//go:noescape
func rowF16AVX2(dst []float32, src []byte) (special bool)

//go:noescape
func rowBF16AVX2(dst []float32, src []byte)

//go:noescape
func rowQ8_0AVX2(dst []float32, src []byte)

// isaIndex is kernelLevel's index in tileKernels, or -1 for Go.
func isaIndex() int {
	switch {
	case kernelLevel >= cpufeat.LevelAVX512:
		return 1
	case kernelLevel >= cpufeat.LevelAVX2:
		return 0
	}
	return -1
}

// tileKernels are the kernels for products with m (by inputs per tile,
// 1..len), the rows of a tile, and whether the rows must be converted to
// float32 first (types without a kernel of their own); nil for the Go
// path.
func (m *Matrix) tileKernels() (ks []tileKernel, rows int, convert bool) {
	i := isaIndex()
	if i < 0 || m.Cols%16 != 0 || m.Cols == 0 {
		return nil, 0, false
	}
	w := slices.Index([]gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16}, m.Type)
	if w < 0 { // converted a tile at a time into the scratch rows, read from cache
		return tileKernels[i][0], tileRows[i], true
	}
	return tileKernels[i][w], tileRows[i], false
}

// kvIndex is the KV pool's element type's index in the kernel tables.
func kvIndex(kv *KVPool) int {
	if kv.f32 != nil {
		return 0
	}
	return 1
}

// kvTileKernels are the tile kernels for scores against the pool's keys
// of hd elements, and their rows per tile; nil for the Go path.
func kvTileKernels(kv *KVPool, hd int) ([]tileKernel, int) {
	i := isaIndex()
	if i < 0 || hd%16 != 0 {
		return nil, 0
	}
	return tileKernels[i][kvIndex(kv)], tileRows[i]
}

// kvPVKernels are the weighted-sum kernels over the pool's values of hd
// elements, the columns one call covers at most and the columns per unit
// of its w; nil for the Go path.
func kvPVKernels(kv *KVPool, hd int) (ks []pvKernel, cols, unit int) {
	i := isaIndex()
	if i < 0 || hd%16 != 0 {
		return nil, 0, 0
	}
	return pvKernels[i][kvIndex(kv)], pvCols[i], pvCols[i] / 4
}

// pvWidth is the queries a weighted-sum kernel takes at most.
func pvWidth(kv *KVPool, hd int) int {
	if ks, _, _ := kvPVKernels(kv, hd); ks != nil {
		return len(ks)
	}
	return 4
}

// f32s views the first n float32 values of src in place.
func f32s(src []byte, n int) []float32 {
	src = src[:4*n]
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), n)
}

func rowF32(dst []float32, src []byte) {
	copy(dst, f32s(src, len(dst))) // amd64 is little-endian
}

func rowF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	if !cpufeat.AVX2 || rowF16AVX2(dst, src) {
		rowF16Go(dst, src)
	}
}

func rowBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	if cpufeat.AVX2 {
		rowBF16AVX2(dst, src)
		return
	}
	rowBF16Go(dst, src)
}

func rowQ8_0(dst []float32, src []byte) {
	src = src[:len(dst)/32*34]
	if cpufeat.AVX2 {
		rowQ8_0AVX2(dst, src)
		return
	}
	rowQ8_0Go(dst, src)
}

//go:noescape
func softmaxAVX512(x *float32, n int, scale float32)

//go:noescape
func scaleMaxAVX2(x *float32, n int, scale float32) float32

//go:noescape
func expSumAVX2(x *float32, n int, mx float32, lanes *[16]float64)

// softmax is softmaxGo's bits: in assembly with AVX-512; with AVX2 the
// whole 16s in assembly and the rest in Go, each pass in the same order.
func softmax(x []float32, scale float32) {
	n := len(x)
	switch i := isaIndex(); {
	case n == 0:
	case i == 1:
		softmaxAVX512(&x[0], n, scale)
	case i == 0 && n >= 16:
		n16 := n &^ 15
		mx := scaleMaxAVX2(&x[0], n16, scale)
		for j := n16; j < n; j++ {
			x[j] *= scale
			mx = max(mx, x[j])
		}
		var s [16]float64
		expSumAVX2(&x[0], n16, mx, &s)
		for j := n16; j < n; j++ {
			x[j] = exp32(x[j] - mx)
			s[j%16] += float64(x[j])
		}
		inv := float32(1 / sum16(&s))
		for j := range x {
			x[j] *= inv
		}
	default:
		softmaxGo(x, scale)
	}
}

//go:noescape
func swigluAVX512(out, gate, up *float32, n int)

//go:noescape
func swigluAVX2(out, gate, up *float32, n int)

// swiglu is swigluGo's bits: whole vectors in assembly, the rest in Go.
func swiglu(out, gate, up []float32) {
	n := len(gate)
	up, out = up[:n], out[:n]
	v := 0
	switch isaIndex() {
	case 1:
		v = n &^ 15
		if v > 0 {
			swigluAVX512(&out[0], &gate[0], &up[0], v)
		}
	case 0:
		v = n &^ 7
		if v > 0 {
			swigluAVX2(&out[0], &gate[0], &up[0], v)
		}
	}
	swigluGo(out[v:], gate[v:], up[v:])
}
