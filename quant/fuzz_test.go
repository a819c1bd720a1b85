package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// FuzzDequantize decodes arbitrary bytes as every registered type: any
// block content is valid input (scales may be NaN or infinite), so a whole
// number of blocks must decode without panicking, and a length that is not
// one must give an error.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(0), []byte{})
	f.Add(uint8(3), bytes.Repeat([]byte{0xff}, 136))
	f.Add(uint8(7), bytes.Repeat([]byte{0x7c, 0x00, 0x88}, 60))
	types := Readable()
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		typ := types[int(sel)%len(types)]
		info, _ := typ.Info()
		nb := len(data) / int(info.BlockBytes)
		n := nb * int(info.BlockSize)
		if err := Dequantize(typ, make([]float32, n), data[:nb*int(info.BlockBytes)]); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if len(data)%int(info.BlockBytes) != 0 {
			if err := Dequantize(typ, make([]float32, n+int(info.BlockSize)), data); err == nil {
				t.Fatalf("%s: %d bytes accepted for %d elements", typ, len(data), n+int(info.BlockSize))
			}
		}
	})
}

// FuzzQuantize encodes arbitrary float32 bit patterns (NaN, infinities,
// subnormals included) with every writable type's codec: it must not
// panic, must give the same bytes twice, and its output must decode.
func FuzzQuantize(f *testing.F) {
	seed := make([]byte, 4*256)
	for i := range 256 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i%17)-8))
	}
	f.Add(uint8(2), seed)
	binary.LittleEndian.PutUint32(seed, 0x7fc00000)
	f.Add(uint8(5), seed)
	types := Writable()
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		typ := types[int(sel)%len(types)]
		fm, _ := Lookup(typ)
		info, _ := typ.Info()
		n := len(data) / 4 / int(info.BlockSize) * int(info.BlockSize)
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		size, _ := typ.RowBytes(uint64(n))
		q1, q2 := make([]byte, size), make([]byte, size)
		fm.Quantize(q1, x)
		fm.Quantize(q2, x)
		if !bytes.Equal(q1, q2) {
			t.Fatalf("%s: not deterministic", typ)
		}
		fm.Dequantize(make([]float32, n), q1)
	})
}
