package model

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/model/qdot"
)

// randMatrix is rows×cols of t filled with random bytes (scales included:
// NaN and infinite products are fine for comparing bits).
func randMatrix(rng *rand.Rand, t gguf.Type, rows, cols int) Matrix {
	rb, err := t.RowBytes(uint64(cols))
	if err != nil {
		panic(err)
	}
	data := make([]byte, rows*int(rb))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return Matrix{Name: t.String(), Type: t, Rows: rows, Cols: cols, Data: data, rowBytes: int(rb), kern: qdot.For(t)}
}

// On the integer path, a product's output element is the kernel's dot of
// its row with its own input quantized, whether the input runs alone or
// with others (n = 1 and n = 5 agree bit for bit), on any pool size.
func TestInt8MatmulBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, typ := range qdot.Types() {
		info, _ := typ.Info()
		cols := 3 * int(info.BlockSize)
		if info.BlockSize == 32 {
			cols = 896
		}
		m := randMatrix(rng, typ, 300, cols)
		const n = 5
		xs := randVec(rng, n*cols)
		outN := make([]float32, n*m.Rows)
		newPool(2).matmul(outN, &m, xs, n)
		for tk := range n {
			x := xs[tk*cols : (tk+1)*cols]
			out1 := make([]float32, m.Rows)
			newPool(1).matmul(out1, &m, x, 1)
			sameBits(t, fmt.Sprintf("%s input %d", typ, tk), out1, outN[tk*m.Rows:(tk+1)*m.Rows])
			var a qdot.Acts
			a.Quantize(m.kern.Act, x)
			want := make([]float32, m.Rows)
			for r := range want {
				want[r] = m.kern.Dot(m.Data[r*m.rowBytes:(r+1)*m.rowBytes], &a)
			}
			sameBits(t, fmt.Sprintf("%s input %d against the kernel", typ, tk), out1, want)
		}
	}
}

// newMatrix reads every type of WeightTypes, takes the integer path for
// the quantized ones with a kernel (the float path after
// SetActivations(FloatActivations)), and refuses any other type in one
// line naming the tensor, its type and the types read.
func TestNewMatrixTypes(t *testing.T) {
	for _, typ := range WeightTypes() {
		info, _ := typ.Info()
		ti := &gguf.TensorInfo{Name: "w", Type: typ, Dims: []uint64{2 * info.BlockSize, 3}}
		m, err := newMatrix("blk.0.ffn_up.weight", ti, nil)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		float := typ == gguf.TypeF32 || typ == gguf.TypeF16 || typ == gguf.TypeBF16
		if (m.kern != nil) != (!float && qdot.For(typ) != nil) {
			t.Errorf("%s: integer path %v", typ, m.kern != nil)
		}
		m.setActivations(FloatActivations)
		if m.kern != nil {
			t.Errorf("%s: integer path after FloatActivations", typ)
		}
	}
	ti := &gguf.TensorInfo{Name: "w", Type: gguf.TypeIQ2_XXS, Dims: []uint64{256, 3}}
	_, err := newMatrix("blk.3.attn_q.weight", ti, nil)
	if err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), `"blk.3.attn_q.weight" has type IQ2_XXS; the CPU device reads F32, F16,`) ||
		!strings.Contains(err.Error(), "Q8_0") {
		t.Errorf("IQ2_XXS: %v", err)
	}
}

// TestMatmulsMatchMatmul: products of one input run together (matmuls: one
// region, the inputs quantized once) give each product's bits from matmul
// alone, on the float path and the integer path (MulFew's 1 to 8 inputs,
// MulBatch's more), for parts whose rows are and are not whole tiles,
// and for matrices of different kernels, which run one by one.
func TestMatmulsMatchMatmul(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const cols = 256
	for _, c := range []struct {
		name  string
		types []gguf.Type
	}{
		{"F16", []gguf.Type{gguf.TypeF16, gguf.TypeF16, gguf.TypeF16}},
		{"Q8_0", []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0}},
		{"Q4_K", []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ4_K}},
		{"mixed", []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeF16}},
	} {
		ms := make([]Matrix, len(c.types))
		for i, typ := range c.types {
			ms[i] = randMatrix(rng, typ, []int{200, 40, 17}[i], cols)
			if typ == gguf.TypeF16 {
				ms[i].kern = nil
				gguf.EncodeF32(typ, ms[i].Data, randVec(rng, ms[i].Rows*cols))
			}
		}
		for _, n := range []int{1, 3, 8, 20} {
			x := randVec(rng, n*cols)
			ps := make([]product, len(ms))
			for i := range ms {
				ps[i] = product{make([]float32, n*ms[i].Rows), &ms[i]}
			}
			newPool(2).matmuls(x, n, ps...)
			for i := range ms {
				want := make([]float32, n*ms[i].Rows)
				newPool(1).matmul(want, &ms[i], x, n)
				sameBits(t, fmt.Sprintf("%s n=%d part %d", c.name, n, i), ps[i].out, want)
			}
		}
	}
}
