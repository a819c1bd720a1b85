package model

import (
	"fmt"
	"unsafe"

	"ringlm/internal/cpufeat"
	"ringlm/internal/fma"
)

// The float path's products (F32, F16 and BF16 weights, and every
// quantized type on FloatActivations) and the dot products of attention
// all sum in one order, which every implementation reproduces bit for bit
// (the portable Go here, AVX2 and AVX-512 in tiles_amd64.s):
//
//   - sixteen lanes S[0..15], all +0;
//   - each element i, in increasing order, goes to lane i mod 16:
//     S[i%16] = fma(w[i], x[i], S[i%16]), rounded once;
//   - T8[l] = S[l] + S[l+8] (l < 8), T4[l] = T8[l] + T8[l+4],
//     T2[l] = T4[l] + T4[l+2], and the sum is T2[0] + T2[1].
//
// Weights are first converted to float32 exactly as Row converts them.
// AVX-512 keeps the sixteen lanes in one register, AVX2 in two (lanes
// 0-7, 8-15); a tile kernel keeps one such accumulator per (row, input)
// pair of its tile, so a pair's result never depends on the tile it
// landed in, on the other rows and inputs of the step, or on the
// instruction set: a process may mix the implementations (the assembly
// takes lengths that are multiples of 16, Go the rest) and batch
// invariance still holds bit for bit. NaN results are NaN in every
// implementation, their payloads not compared.
//
// Why sixteen lanes of one accumulator each, where the dot product of
// issue 4 kept 64 partial sums: a tile of 4 rows × 6 inputs needs 24
// accumulators, which fit AVX-512's 32 registers only at one register a
// pair; the tile's pairs are the independent chains that hide the FMA's
// latency.

// tileKernel computes one tile of a product: for the rows at w[0..R)
// (the kernel's rows per tile) and the inputs at x, x+ldx, … (bytes),
// out[t*ldo + r*rs] (bytes) = row r · input t over k elements (a
// multiple of 16), in the order above.
type tileKernel func(w *[4]*byte, x *float32, ldx uintptr, out *float32, ldo uintptr, rs uintptr, k int)

// tilePanelBytes bounds the inputs a product keeps in the L2 cache while
// every weight row of a worker's range passes over them.
const tilePanelBytes = 384 << 10

// dotGo is the dot product in the order above.
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s [16]float32
	for i, v := range a {
		s[i%16] = fma.F32(v, b[i], s[i%16])
	}
	return sum16(&s)
}

// sum16 folds sixteen lanes in the order above (float64 lanes too, for
// softmax's sum).
func sum16[T float32 | float64](s *[16]T) T {
	var t8 [8]T
	for l := range t8 {
		t8[l] = s[l] + s[l+8]
	}
	t4 := [4]T{t8[0] + t8[4], t8[1] + t8[5], t8[2] + t8[6], t8[3] + t8[7]}
	return (t4[0] + t4[2]) + (t4[1] + t4[3])
}

// tileScratch is one worker's buffers for mulFloat.
type tileScratch struct {
	row  []float32 // weight rows converted to float32
	edge []float32 // a tile's outputs when it has fewer rows than the kernel
	ptrs [4]*byte  // a tile's rows (here, not on the stack: a kernel called through a func value makes its arguments escape)
}

// mulFloat sets out[t*ldo + r] to row r of m dotted with input t (x[t*Cols:])
// for rows [lo, hi) and inputs [0, n), on the float path.
func (m *Matrix) mulFloat(out []float32, ldo int, x []float32, n, lo, hi int, s *tileScratch) {
	cols := m.Cols
	if n == 0 || lo >= hi {
		return
	}
	if len(x) < n*cols || len(out) < (n-1)*ldo+hi || hi > m.Rows || lo < 0 {
		panic(fmt.Sprintf("model: product of %s rows [%d,%d) with %d inputs: x of %d, out of %d", m.Name, lo, hi, n, len(x), len(out)))
	}
	ks, rows, conv := m.tileKernels()
	if ks == nil {
		buf(&s.row, cols)
		for r := lo; r < hi; r++ {
			m.Row(r, s.row)
			for t := range n {
				out[t*ldo+r] = dotGo(s.row, x[t*cols:(t+1)*cols])
			}
		}
		return
	}
	maxN := len(ks)
	// Panels of inputs as even as whole tiles allow.
	panel := max(maxN, tilePanelBytes/(4*cols))
	panel = (n + (n+panel-1)/panel - 1) / ((n + panel - 1) / panel)
	panel = (panel + maxN - 1) / maxN * maxN
	if conv {
		buf(&s.row, rows*cols)
	}
	buf(&s.edge, rows*maxN)
	ptrs := &s.ptrs
	// Tile i takes rows lo+i, lo+i+q, lo+i+2q, …: each of its rows walks
	// its quarter of the range from tile to tile, a long stream the
	// hardware prefetcher follows (adjacent rows would be four short
	// streams per tile).
	q := (hi - lo + rows - 1) / rows
	for t0 := 0; t0 < n; t0 += panel {
		t1 := min(n, t0+panel)
		for i := range q {
			nr := 0 // the tile's rows in range; the rest repeat its last
			for j := range rows {
				if r := lo + i + j*q; r < hi {
					nr = j + 1
				}
			}
			for j := range rows {
				r := lo + i + min(j, nr-1)*q
				if conv {
					if j < nr {
						m.Row(r, s.row[j*cols:(j+1)*cols])
					}
					ptrs[j] = (*byte)(unsafe.Pointer(&s.row[min(j, nr-1)*cols]))
				} else {
					ptrs[j] = &m.Data[r*m.rowBytes]
				}
			}
			for t := t0; t < t1; t += maxN {
				nn := min(maxN, t1-t)
				k := ks[nn-1]
				if nr == rows {
					k(ptrs, &x[t*cols], uintptr(4*cols), &out[t*ldo+lo+i], uintptr(4*ldo), uintptr(4*q), cols)
					continue
				}
				k(ptrs, &x[t*cols], uintptr(4*cols), &s.edge[0], uintptr(4*rows), 4, cols)
				for tt := range nn {
					for j := range nr {
						out[(t+tt)*ldo+lo+i+j*q] = s.edge[tt*rows+j]
					}
				}
			}
		}
	}
}

// kernelLevel is the instruction set the float path's kernels use; the
// tests set it to each level the machine has.
var kernelLevel = cpufeat.Use
