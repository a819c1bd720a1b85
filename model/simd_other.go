//go:build !amd64 || purego

package model

// The portable path: no assembly on this architecture (or built with the
// purego tag). Same entry points as simd_amd64.go.

// simdKernel names the kernels this process uses.
const simdKernel = "go"

func dot(a, b []float32) float32 { return dotGo(a, b) }

func rowF32(dst []float32, src []byte)  { rowF32Go(dst, src) }
func rowF16(dst []float32, src []byte)  { rowF16Go(dst, src) }
func rowBF16(dst []float32, src []byte) { rowBF16Go(dst, src) }
func rowQ8_0(dst []float32, src []byte) { rowQ8_0Go(dst, src) }

// dotRows sets out[i] to row lo+i of m dotted with x (len Cols), using
// row (len Cols) as scratch: by definition m.Row then dot.
func (m *Matrix) dotRows(out []float32, lo int, x, row []float32) {
	for i := range out {
		m.Row(lo+i, row)
		out[i] = dot(row, x)
	}
}
