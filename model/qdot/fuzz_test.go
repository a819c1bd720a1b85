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
