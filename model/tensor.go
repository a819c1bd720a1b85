package model

import (
	"fmt"
	"slices"
	"sync"

	"ringlm/gguf"
	"ringlm/model/qdot"
	"ringlm/quant"
)

// Matrix is a weight matrix viewed in place in the mapped GGUF file:
// Rows rows of Cols elements each (ggml Dims = {Cols, Rows}). Rows are
// dequantized on the fly, or (quantized types with a qdot kernel, unless
// the model was switched to FloatActivations) dotted in integers with the
// quantized input; there is no F32 copy of the model.
type Matrix struct {
	Name     string
	Type     gguf.Type
	Rows     int
	Cols     int
	Data     []byte
	rowBytes int
	// kern is the integer dot product products with this matrix use; nil
	// for the float path.
	kern *qdot.Kernel
}

// floatTypes are read by the float path only, with kernels of their own.
var floatTypes = []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16}

// WeightTypes lists the matrix types the CPU forward reads, in id order:
// F32, F16, BF16 and Q8_0 (converted by this package) and every type
// package quant decodes.
func WeightTypes() []gguf.Type {
	ts := append(quant.Readable(), append(floatTypes, gguf.TypeQ8_0)...)
	slices.Sort(ts)
	return slices.Compact(ts)
}

func newMatrix(name string, t *gguf.TensorInfo, data []byte) (Matrix, error) {
	if !slices.Contains(WeightTypes(), t.Type) {
		return Matrix{}, fmt.Errorf("model: tensor %q has type %s; the CPU device reads %s", name, t.Type, quant.Names(WeightTypes()))
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
	m := Matrix{Name: name, Type: t.Type, Rows: rows, Cols: int(t.Dims[0]), Data: data, rowBytes: int(rb)}
	m.setActivations(Int8Activations)
	return m, nil
}

// Activations chooses the arithmetic of the products with quantized
// weight matrices.
type Activations int

const (
	// Int8Activations quantizes each input vector to 8 bits per block and
	// takes integer dot products, as ggml's CPU backend does (package
	// qdot): the default, faster, and what llama.cpp's perplexities are
	// measured with. Types without a qdot kernel stay on the float path.
	Int8Activations Activations = iota
	// FloatActivations dequantizes weight rows to float32 and keeps the
	// input in float32: the reference the HF oracle and the GPU are held to.
	FloatActivations
)

func (m *Matrix) setActivations(a Activations) {
	m.kern = nil
	if a == Int8Activations && !slices.Contains(floatTypes, m.Type) {
		m.kern = qdot.For(m.Type)
	}
}

// SetActivations switches every quantized matrix of the model to the
// integer or the float path (F32, F16 and BF16 are always on the float
// path). Not to be called while Forward runs.
func (m *Model) SetActivations(a Activations) {
	m.Embed.setActivations(a)
	m.Output.setActivations(a)
	for i := range m.Layers {
		L := &m.Layers[i]
		for _, mm := range []*Matrix{&L.Q, &L.K, &L.V, &L.Out, &L.Gate, &L.Up, &L.Down} {
			mm.setActivations(a)
		}
	}
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
	default:
		// newMatrix checked that quant reads the type and that a row is
		// whole blocks, so this cannot fail.
		_ = quant.Dequantize(m.Type, dst, src)
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

// matmul computes out[t][r] = W[r] · x[t] for n input vectors x (n×Cols,
// row-major) into out (n×Rows). Each worker takes a range of rows and
// runs them in tiles (tiles.go): a tile's weights are read once for many
// inputs while they are in cache.
func (p *pool) matmul(out []float32, m *Matrix, x []float32, n int) {
	p.matmuls(x, n, product{out, m})
}

// product is one matrix of a matmuls call and its output (n×Rows).
type product struct {
	out []float32
	m   *Matrix
}

// matmuls computes several products of the same inputs x (n×Cols), as
// matmul does each (the same bits: an output element depends only on its
// row and its input), in one parallel region, the inputs quantized once:
// a layer's Q, K and V, or its gate and up. Matrices of different
// kernels or widths run one by one.
func (p *pool) matmuls(x []float32, n int, ps ...product) {
	m0 := ps[0].m
	for _, q := range ps[1:] {
		if q.m.kern != m0.kern || q.m.Cols != m0.Cols {
			for _, q := range ps {
				p.matmuls(x, n, q)
			}
			return
		}
	}
	rows := make([]int, len(ps))
	for i, q := range ps {
		rows[i] = q.m.Rows
	}
	if m0.kern != nil {
		p.matmulInt8(x, n, ps, rows)
		return
	}
	p.parallelParts(rows, m0.Cols*n, 4, func(i, lo, hi int) {
		s, _ := tileScratchPool.Get().(*tileScratch)
		if s == nil {
			s = new(tileScratch)
		}
		m := ps[i].m
		m.mulFloat(ps[i].out, m.Rows, x, n, lo, hi, s)
		tileScratchPool.Put(s)
	})
}

var tileScratchPool sync.Pool

// matmulInt8 is matmuls on the integer path: each input vector is
// quantized once to the kernel's activation blocks, then each weight row is
// dotted with every quantized input, by a kernel that takes a tile of rows
// against all the inputs at once where there is one (qdot.Kernel.MulFew
// for up to 8 inputs, MulBatch for more, in 16s). An output element
// depends only on its row and its own input, however many inputs share
// the call.
func (p *pool) matmulInt8(x []float32, n int, ps []product, rows []int) {
	kern, cols := ps[0].m.kern, ps[0].m.Cols
	ab := getActs(n)
	defer actsPool.Put(ab)
	acts := ab.a[:n]
	p.parallelRows(n, 8*cols, 1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			acts[t].Quantize(kern.Act, x[t*cols:(t+1)*cols])
		}
	})
	if kern.HasFew() && n <= qdot.FewInputs {
		// A decode step: the kernel whose lanes are rows, all the inputs
		// against each tile of 16 rows.
		f := &ab.f
		f.Set(acts)
		p.parallelParts(rows, cols*n, 16, func(i, lo, hi int) {
			m := ps[i].m
			kern.MulFew(ps[i].out[lo:], m.Rows, m.Data[lo*m.rowBytes:hi*m.rowBytes], acts, f)
		})
		return
	}
	if kern.BatchPays(n) {
		const g = qdot.BatchInputs
		groups := (n + g - 1) / g
		if len(ab.b) < groups {
			ab.b = append(ab.b, make([]qdot.Batch, groups-len(ab.b))...)
		}
		bts := ab.b[:groups]
		p.parallelRows(groups, g*cols, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				bts[i].Set(acts[i*g : min(n, (i+1)*g)])
			}
		})
		panel := max(1, tilePanelBytes/(g*cols)) // batches that stay in L2 while the rows pass
		p.parallelParts(rows, cols*n, 12, func(i, lo, hi int) {
			s, _ := batchScratchPool.Get().(*qdot.BatchScratch)
			if s == nil {
				s = new(qdot.BatchScratch)
			}
			m, rb := ps[i].m, ps[i].m.rowBytes
			for j := 0; j < groups; j += panel {
				k := min(groups, j+panel)
				kern.MulBatch(ps[i].out[j*g*m.Rows+lo:], m.Rows, m.Data[lo*rb:hi*rb], acts[j*g:min(n, k*g)], bts[j:k], s)
			}
			batchScratchPool.Put(s)
		})
		return
	}
	p.parallelParts(rows, cols*n, 1, func(i, lo, hi int) {
		m, rb := ps[i].m, ps[i].m.rowBytes
		for t := range acts {
			kern.DotRows(ps[i].out[t*m.Rows+lo:t*m.Rows+hi], m.Data[lo*rb:hi*rb], &acts[t])
		}
	})
}

var batchScratchPool sync.Pool

// actsBuf holds quantized inputs between products (their buffers grow to
// the largest step and stay).
type actsBuf struct {
	a []qdot.Acts
	b []qdot.Batch
	f qdot.Few
}

var actsPool sync.Pool

func getActs(n int) *actsBuf {
	ab, _ := actsPool.Get().(*actsBuf)
	if ab == nil {
		ab = new(actsBuf)
	}
	if len(ab.a) < n {
		ab.a = append(ab.a, make([]qdot.Acts, n-len(ab.a))...)
	}
	return ab
}
