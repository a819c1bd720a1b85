package qdot

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzKernels feeds arbitrary bytes to every kernel as a row and as
// activations (any float32 bits, NaN and infinities included): no panic,
// and the assembly gives the Go kernel's bits.
func FuzzKernels(f *testing.F) {
	f.Add(byte(0), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(byte(3), []byte{0xff, 0x7f, 0x80, 0x00, 0x7c, 0x00, 0xfc, 0x01})
	f.Add(byte(9), make([]byte, 300))
	types := Types()
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		if len(data) == 0 {
			return
		}
		k := For(types[int(which)%len(types)])
		nb := 1 + int(which)/len(types)%3
		w := make([]byte, nb*k.bytes)
		for i := range w {
			w[i] = data[i%len(data)]
		}
		x := make([]float32, nb*k.block)
		for i := range x {
			var b [4]byte
			for j := range b {
				b[j] = data[(4*i+j+7)%len(data)]
			}
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
		}
		var a Acts
		a.Quantize(k.Act, x)
		got := k.Dot(w, &a)
		if want := k.goDot(w, &a); !sameFloat(got, want) {
			t.Fatalf("%s: %s kernel %g (%#x), Go %g (%#x)", k.Weight, k.Impl(), got, math.Float32bits(got), want, math.Float32bits(want))
		}
	})
}

// FuzzMulBatch feeds arbitrary bytes to each type with a batch kernel as
// rows and as activations (any float32 bits): no panic, and MulBatch
// gives Dot's bits, for 1 to 20 inputs and 1 to 13 rows.
func FuzzMulBatch(f *testing.F) {
	f.Add(byte(0), byte(3), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(byte(2), byte(16), []byte{0xff, 0x7f, 0x80, 0x00, 0x7c, 0x00, 0xfc, 0x01})
	f.Add(byte(14), byte(255), make([]byte, 300))
	f.Fuzz(func(t *testing.T, which, shape byte, data []byte) {
		if len(data) == 0 {
			return
		}
		k := For(batchTypes[int(which)%len(batchTypes)])
		nb := 1 + int(which)/len(batchTypes)%3
		rows, n := 1+int(shape)%13, 1+int(shape)/13%20
		w := make([]byte, rows*nb*k.bytes)
		for i := range w {
			w[i] = data[(i+3*rows)%len(data)]
		}
		acts := make([]Acts, n)
		x := make([]float32, nb*k.block)
		for tk := range acts {
			for i := range x {
				var b [4]byte
				for j := range b {
					b[j] = data[(4*i+j+7*tk+11)%len(data)]
				}
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
			}
			acts[tk].Quantize(k.Act, x)
		}
		var s BatchScratch
		mulBatchCheckActs(t, k, &s, nil, "fuzz", w, acts)
	})
}
