//go:build cgo

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/quant"
)

// qpTypes are the types the device keeps at their own bit width (qpack.h);
// Q8_0 too, which a stack mixing it with them keeps in that layout.
var qpTypes = []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0, gguf.TypeQ2_K,
	gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4}

// f16Fields are the byte offsets of a block's f16 scales (d, and dmin or
// m) and the block's size, per type: where random blocks get their
// extreme scales. MXFP4's E8M0 byte takes any value.
func f16Fields(t gguf.Type) (offs []int, size int) {
	ti, _ := t.Info()
	size = int(ti.BlockBytes)
	switch t {
	case gguf.TypeQ4_1, gguf.TypeQ5_1, gguf.TypeQ4_K, gguf.TypeQ5_K:
		return []int{0, 2}, size
	case gguf.TypeQ2_K:
		return []int{80, 82}, size
	case gguf.TypeQ3_K:
		return []int{108}, size
	case gguf.TypeQ6_K:
		return []int{208}, size
	case gguf.TypeMXFP4:
		return nil, size
	}
	return []int{0}, size
}

// extremeF16 are scales at the edges of f16: the largest finite values,
// the smallest subnormals, zeros of both signs, one, the largest
// subnormal and the smallest normal, infinities.
var extremeF16 = []uint16{0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x0000, 0x8000, 0x3C00, 0x03FF, 0x0400, 0x7C00, 0xFC00}

// qpRow is one row of cols values of type t: quantized from normal values
// with outliers (kind 0), or random bytes with random finite scales (1),
// or with extreme scales (2).
func qpRow(r *rand.Rand, t gguf.Type, cols, kind int) []byte {
	n, _ := t.RowBytes(uint64(cols))
	b := make([]byte, n)
	if kind == 0 {
		x := make([]float32, cols)
		scale := math.Pow(10, float64(r.IntN(9)-6))
		for i := range x {
			x[i] = float32(r.NormFloat64() * scale)
			if r.IntN(50) == 0 {
				x[i] *= 100
			}
		}
		if err := quant.Quantize(t, b, x); err != nil {
			panic(err)
		}
		return b
	}
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	offs, size := f16Fields(t)
	for blk := 0; blk < len(b); blk += size {
		for _, o := range offs {
			h := uint16(r.Uint32())
			if kind == 2 {
				h = extremeF16[r.IntN(len(extremeF16))]
			} else if h&0x7C00 == 0x7C00 { // no infinities or NaNs among the random ones
				h &^= 0x4000
			}
			binary.LittleEndian.PutUint16(b[blk+o:], h)
		}
	}
	return b
}

// sameFloat: the same bits, or both NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// checkUnpack holds every run of the packed rows, dequantized by qpack.h's
// qp_run as the device reads it, to package quant's dequantization of the
// file's row, bit for bit; a zero row (nil) to zeros.
func checkUnpack(t *testing.T, cols int, rows [][]byte, types []gguf.Type) *qpPacked {
	t.Helper()
	p, err := qpPack(cols, rows, types)
	if err != nil {
		t.Fatal(err)
	}
	got := p.unpack()
	want := make([]float32, cols)
	for r, b := range rows {
		clear(want)
		if b != nil {
			if err := quant.Dequantize(types[r], want, b); err != nil {
				t.Fatal(err)
			}
		}
		for c := range cols {
			g := got[r*cols+c]
			if b == nil && g == 0 {
				continue
			}
			if !sameFloat(g, want[c]) {
				t.Fatalf("row %d (%s) column %d: packed run gives %v (%#08x), quant %v (%#08x)", r, types[r], c, g,
					math.Float32bits(g), want[c], math.Float32bits(want[c]))
			}
		}
	}
	return p
}

// TestQuantPackMatchesCPU: for every type the device keeps at its own bit
// width, matrices of several shapes (partial tiles, one super-block to
// eight) of quantized rows, random blocks and blocks with extreme scales,
// packed as rlm_create packs them and dequantized run by run with the
// kernel's own code (qpack.h, compiled here by gcc), equal package quant's
// dequantization bit for bit; and the VRAM bytes stay within 2% of the
// file's (rows padded to whole tiles; plus the tile records and alignment).
func TestQuantPackMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, typ := range qpTypes {
		ti, _ := typ.Info()
		shapes := [][2]int{{16, 256}, {37, 512}, {8, 768}, {64, 2048}, {3, 256}}
		if ti.BlockSize == 32 {
			shapes = append(shapes, [2]int{5, 32}, [2]int{33, 96})
		}
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh[0], sh[1]), func(t *testing.T) {
				rows := make([][]byte, sh[0])
				types := make([]gguf.Type, sh[0])
				for i := range rows {
					rows[i] = qpRow(r, typ, sh[1], i%3)
					types[i] = typ
				}
				p := checkUnpack(t, sh[1], rows, types)
				file, _ := typ.RowBytes(uint64(sh[0] * sh[1]))
				tiles := (sh[0] + 15) / 16
				if limit := int(1.02*float64(file)*float64(tiles*16)/float64(sh[0])) + tiles*(32+2*16); p.vramBytes() > limit {
					t.Errorf("%d bytes in VRAM for %d in the file (limit %d)", p.vramBytes(), file, limit)
				}
			})
		}
	}
}

// TestQuantRecMatchesAB: the K-quants' records unpacked once a super-block
// (qp_rec_load, qp_rec_ab: what the kernel keeps in registers) give every
// group's A and B bit for bit as qp_ab reads them from the record, for
// random and extreme super-blocks and every lane quarter.
func TestQuantRecMatchesAB(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, typ := range []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K} {
		for i := range 300 {
			row := qpRow(r, typ, 256, i%3)
			if s, q, ok := qpRecCheck(typ, row); !ok {
				t.Fatalf("%s super-block %d: group %d, quarter %d: A or B differs from qp_ab's", typ, i, s, q)
			}
		}
	}
}

// TestQuantPackMixedStack: stacks whose parts differ in type, as rlm_create
// builds them: Q, K and V parts of three types meeting at tile boundaries,
// with zero rows between (the QKV permutation's padding); gate and up of
// two types interleaved by eights (the gate/up permutation), so every tile
// mixes its halves; Q8_0 among them. Every run equals package quant's
// dequantization, and a half whose rows differ in type is refused.
func TestQuantPackMixedStack(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const cols = 512
	var rows [][]byte
	var types []gguf.Type
	add := func(typ gguf.Type, n int, zero bool) {
		for i := range n {
			if zero && i%5 == 3 {
				rows = append(rows, nil)
			} else {
				rows = append(rows, qpRow(r, typ, cols, i%3))
			}
			types = append(types, typ)
		}
	}
	add(gguf.TypeQ4_K, 64, true)
	add(gguf.TypeQ5_K, 32, false)
	add(gguf.TypeQ6_K, 48, true)
	add(gguf.TypeQ8_0, 16, false)
	add(gguf.TypeIQ4_XS, 8, false) // a tile's low half
	add(gguf.TypeQ2_K, 8, false)   // and its high half
	p := checkUnpack(t, cols, rows, types)
	if h := p.halfTypes[len(p.halfTypes)-1]; h != [2]gguf.Type{gguf.TypeIQ4_XS, gguf.TypeQ2_K} {
		t.Fatalf("last tile's halves %v", h)
	}

	// gate/up interleaved by eights: gate rows Q4_K, up rows Q6_K, and a
	// last partial tile.
	rows, types = nil, nil
	for i := range 5 {
		add(gguf.TypeQ4_K, 8, false)
		add(gguf.TypeMXFP4, 8, i == 2)
	}
	add(gguf.TypeQ3_K, 5, false)
	p = checkUnpack(t, cols, rows, types)
	for i, h := range p.halfTypes[:5] {
		if h != [2]gguf.Type{gguf.TypeQ4_K, gguf.TypeMXFP4} {
			t.Fatalf("tile %d's halves %v", i, h)
		}
	}

	// An 8-row half of two types is refused, naming the row.
	rows, types = nil, nil
	add(gguf.TypeQ4_0, 12, false)
	add(gguf.TypeQ4_1, 4, false)
	if _, err := qpPack(cols, rows, types); err == nil || !strings.Contains(err.Error(), "row 12") {
		t.Fatalf("a half of Q4_0 and Q4_1 rows: %v", err)
	}
	// A K-quant row of 288 columns is not whole super-blocks.
	if _, err := qpPack(288, [][]byte{make([]byte, 0)}, []gguf.Type{gguf.TypeQ4_K}); err == nil {
		t.Fatal("Q4_K rows of 288 columns were packed")
	}
}

// TestQuantModelsDescribe: the tiny block-quantized models the GPU tests
// run (greedyCases) load and are described to the library with their
// types, and the Q4_K_M one stacks QKV from parts of two types (Q/K in
// Q4_K, V in Q6_K in some layers), the case the mixed layout exists for.
func TestQuantModelsDescribe(t *testing.T) {
	mixed := false
	for _, tc := range greedyCases(t) {
		if tc.mix == "" && !slices.Contains(qpTypes, tc.typ) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t, 11)
			v := describe(t, m, Options{}).view()
			if v.Embed.Type != uint32(m.Embed.Type) || v.LayerViews[0].Down.Type != uint32(m.Layers[0].Down.Type) {
				t.Fatalf("described types %d, %d; the model's %s, %s", v.Embed.Type, v.LayerViews[0].Down.Type, m.Embed.Type, m.Layers[0].Down.Type)
			}
			if tc.mix == "" && m.Layers[0].Q.Type != tc.typ {
				t.Fatalf("attn_q is %s, want %s", m.Layers[0].Q.Type, tc.typ)
			}
			for _, L := range m.Layers {
				if L.Q.Type == gguf.TypeQ4_K && L.V.Type == gguf.TypeQ6_K {
					mixed = true
				}
			}
		})
	}
	if !mixed {
		t.Error("no tiny model stacks Q4_K and Q6_K in one QKV matrix")
	}
}
