package model

import (
	"fmt"
	"runtime"
	"sync"

	"ringlm/gguf"
)

// Matrix is a weight matrix viewed in place in the mapped GGUF file:
// Rows rows of Cols elements each (ggml Dims = {Cols, Rows}). Rows are
// dequantized on the fly; there is no F32 copy of the model.
type Matrix struct {
	Name     string
	Type     gguf.Type
	Rows     int
	Cols     int
	Data     []byte
	rowBytes int
}

// SupportedWeightTypes are the types the CPU forward dequantizes.
var SupportedWeightTypes = []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0}

func newMatrix(name string, t *gguf.TensorInfo, data []byte) (Matrix, error) {
	switch t.Type {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0:
	default:
		return Matrix{}, fmt.Errorf("model: tensor %q has type %s; the CPU device reads F32, F16, BF16 and Q8_0", name, t.Type)
	}
	if len(t.Dims) > 2 {
		return Matrix{}, fmt.Errorf("model: tensor %q has %d dimensions, want a matrix", name, len(t.Dims))
	}
	rows := 1
	if len(t.Dims) == 2 {
		rows = int(t.Dims[1])
	}
	rb, err := t.Type.RowBytes(t.Dims[0])
	if err != nil {
		return Matrix{}, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	return Matrix{Name: name, Type: t.Type, Rows: rows, Cols: int(t.Dims[0]), Data: data, rowBytes: int(rb)}, nil
}

// Row dequantizes row r into dst (len Cols).
func (m *Matrix) Row(r int, dst []float32) {
	src := m.Data[r*m.rowBytes : (r+1)*m.rowBytes]
	switch m.Type {
	case gguf.TypeF32:
		rowF32(dst, src)
	case gguf.TypeF16:
		rowF16(dst, src)
	case gguf.TypeBF16:
		rowBF16(dst, src)
	case gguf.TypeQ8_0:
		rowQ8_0(dst, src)
	}
}

// Vector reads a 1-D F32 tensor (norm weights, biases, rope factors).
func vector(f *gguf.File, name string, n int) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", name)
	}
	if t.Elements() != uint64(n) || len(t.Dims) != 1 {
		return nil, fmt.Errorf("model: tensor %q has shape %v, want [%d]", name, t.Dims, n)
	}
	out := make([]float32, n)
	if !gguf.DecodeF32(t.Type, out, f.Data(t)) {
		return nil, fmt.Errorf("model: tensor %q has type %s, want F32, F16 or BF16", name, t.Type)
	}
	return out, nil
}

// pool runs row ranges of a matrix product on every core. Work is split
// by output rows only, so the arithmetic for each output element is the
// same whatever the split.
type pool struct {
	workers int
}

var defaultPool = &pool{workers: runtime.GOMAXPROCS(0)}

// parallelRows calls fn(lo, hi) over [0, rows) in chunks, on up to
// p.workers goroutines; small products run inline.
func (p *pool) parallelRows(rows, costPerRow int, fn func(lo, hi int)) {
	w := p.workers
	if w <= 1 || rows*costPerRow < 1<<18 {
		fn(0, rows)
		return
	}
	chunk := (rows + w - 1) / w
	var wg sync.WaitGroup
	for lo := 0; lo < rows; lo += chunk {
		hi := min(lo+chunk, rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// matmul computes out[t][r] = W[r] · x[t] for n input vectors x (n×Cols,
// row-major) into out (n×Rows). Each weight row is dequantized once per
// call and dotted with every input: weights are read once per step.
func (p *pool) matmul(out []float32, m *Matrix, x []float32, n int) {
	cols, rows := m.Cols, m.Rows
	p.parallelRows(rows, cols*n, func(lo, hi int) {
		row := getScratch(cols)
		if n == 1 { // bitwise equal to the loop below
			m.dotRows(out[lo:hi], lo, x, row)
			putScratch(row)
			return
		}
		for r := lo; r < hi; r++ {
			m.Row(r, row)
			for t := 0; t < n; t++ {
				out[t*rows+r] = dot(row, x[t*cols:(t+1)*cols])
			}
		}
		putScratch(row)
	})
}

var scratchPool sync.Pool

func getScratch(n int) []float32 {
	if b, ok := scratchPool.Get().(*[]float32); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]float32, n)
}

func putScratch(b []float32) { scratchPool.Put(&b) }
