package quant

import "testing"

// BenchmarkDequantize decodes a 1 Mi-element row of each type: MB/s counts
// the quantized bytes read, Melem/s the floats written.
func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	x := gaussian(20, n, 0.02)
	for _, typ := range Readable() {
		b.Run(typ.String(), func(b *testing.B) {
			q, _ := roundTrip(b, typ, x)
			f, _ := Lookup(typ)
			y := make([]float32, n)
			b.SetBytes(int64(len(q)))
			for b.Loop() {
				f.Dequantize(y, q)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
		})
	}
}

// BenchmarkQuantize encodes a 256 Ki-element row of each writable type, the
// cost `ringlm quantize` pays per weight; MB/s counts the float32 input.
func BenchmarkQuantize(b *testing.B) {
	const n = 1 << 18
	x := gaussian(21, n, 0.02)
	for _, typ := range Writable() {
		b.Run(typ.String(), func(b *testing.B) {
			size, _ := typ.RowBytes(n)
			f, _ := Lookup(typ)
			q := make([]byte, size)
			b.SetBytes(4 * n)
			for b.Loop() {
				f.Quantize(q, x)
			}
		})
	}
}
