//go:build amd64 && !purego

package model

import (
	"unsafe"

	"ringlm/gguf"
	"ringlm/internal/cpufeat"
)

// Dispatch of the CPU forward's inner loops on amd64. One decision per
// process, taken at init (package cpufeat): if the CPU (and OS) support
// AVX2, FMA and F16C, every dot product and row conversion runs in assembly
// (simd_amd64.s); otherwise every one runs in Go (simd_generic.go). The two
// paths never mix within a process, so bitwise batch invariance holds
// either way.
//
// The assembly dot product's summation order depends only on the length n
// (never on alignment or on the caller):
//
//   - eight 8-lane accumulators A0..A7, all +0;
//   - for each full 64-element chunk at i: Ak[l] = fma(a[i+8k+l], b[i+8k+l], Ak[l]);
//   - then the remaining full 8-element chunks (at most seven), the j-th
//     into Aj the same way;
//   - V = ((A0+A1)+(A2+A3)) + ((A4+A5)+(A6+A7)) lane by lane;
//   - W[l] = V[l]+V[l+4] (l<4); U0 = W0+W2, U1 = W1+W3; s = U0+U1;
//   - then the last n%8 elements in order: s = fma(a[i], b[i], s).
//
// fma rounds once (VFMADD231PS/SS). The fused row·x kernels (dotF16AVX2,
// dotBF16AVX2, dotQ8_0AVX2) convert each weight exactly as the row
// conversions do and follow this same order, so dotRows is bitwise equal to
// Row followed by dot.

// simdKernel names the kernels this process uses.
var simdKernel = "go"

var useAVX2 = cpufeat.AVX2

func init() {
	if useAVX2 {
		simdKernel = "avx2+fma+f16c"
	}
}

// Assembly kernels. Lengths are the callers' business: the wrappers below
// slice their arguments so that Go's bounds checks run first.

//go:noescape
func dotAVX2(a, b []float32) float32

//go:noescape
func dotF16AVX2(w []byte, x []float32) float32

//go:noescape
func dotBF16AVX2(w []byte, x []float32) float32

//go:noescape
func dotQ8_0AVX2(w []byte, x []float32) float32

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

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	if useAVX2 {
		return dotAVX2(a, b)
	}
	return dotGo(a, b)
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
	if !useAVX2 || rowF16AVX2(dst, src) {
		rowF16Go(dst, src)
	}
}

func rowBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	if useAVX2 {
		rowBF16AVX2(dst, src)
		return
	}
	rowBF16Go(dst, src)
}

func rowQ8_0(dst []float32, src []byte) {
	src = src[:len(dst)/32*34]
	if useAVX2 {
		rowQ8_0AVX2(dst, src)
		return
	}
	rowQ8_0Go(dst, src)
}

// dotRows sets out[i] to row lo+i of m dotted with x (len Cols), bitwise
// equal to m.Row(lo+i, row) followed by dot(row, x); row (len Cols) is
// scratch. With the assembly path each row is converted in registers,
// never written to the scratch row.
func (m *Matrix) dotRows(out []float32, lo int, x, row []float32) {
	cols, rb := m.Cols, m.rowBytes
	x = x[:cols]
	data := m.Data[lo*rb : (lo+len(out))*rb]
	if useAVX2 {
		switch m.Type {
		case gguf.TypeF32:
			for i := range out {
				out[i] = dotAVX2(f32s(data[i*rb:], cols), x)
			}
			return
		case gguf.TypeF16:
			for i := range out {
				out[i] = dotF16AVX2(data[i*rb:i*rb+2*cols], x)
			}
			return
		case gguf.TypeBF16:
			for i := range out {
				out[i] = dotBF16AVX2(data[i*rb:i*rb+2*cols], x)
			}
			return
		case gguf.TypeQ8_0:
			if cols%32 == 0 {
				for i := range out {
					out[i] = dotQ8_0AVX2(data[i*rb:i*rb+cols/32*34], x)
				}
				return
			}
		}
	}
	for i := range out {
		m.Row(lo+i, row)
		out[i] = dot(row, x)
	}
}
