package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"ringlm/gguf"
	"ringlm/internal/cpufeat"
	"ringlm/internal/fma"
	"ringlm/model/qdot"
)

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// levels are the kernel levels this machine runs: Go and every
// instruction set up to the one detected.
func levels() []cpufeat.Level {
	var ls []cpufeat.Level
	for l := cpufeat.Go; l <= cpufeat.Detected; l++ {
		ls = append(ls, l)
	}
	return ls
}

// atLevel runs fn with the float path's kernels of level l.
func atLevel(l cpufeat.Level, fn func()) {
	old := kernelLevel
	kernelLevel = l
	defer func() { kernelLevel = old }()
	fn()
}

// tileDot is a·b through the float path's product: a one-row F32
// matrix viewing a in place, times b.
func tileDot(a, b []float32) float32 {
	var data []byte
	if len(a) > 0 {
		data = unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 4*len(a))
	}
	m := Matrix{Name: "a", Type: gguf.TypeF32, Rows: 1, Cols: len(a), Data: data, rowBytes: 4 * len(a)}
	var out [1]float32
	m.mulFloat(out[:], 1, b, 1, 0, 1, new(tileScratch))
	return out[0]
}

// TestDotOrder holds a one-row product, at every kernel level, to the
// order of tiles.go: dotGo's bits (NaNs as NaN), for every length up to
// 300 and a few long ones, at every alignment.
func TestDotOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lengths := []int{896, 4864, 12345}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, l := range levels() {
		atLevel(l, func() {
			for _, n := range lengths {
				a, b := randVec(rng, n+8), randVec(rng, n+8)
				if n%7 == 3 {
					a[n/2] = float32(math.Inf(1))
				}
				for off := range 8 {
					// Unaligned subslices of the random data itself.
					x, y := a[off:n+off], b[8-off:n+8-off]
					if got, want := tileDot(x, y), dotGo(x, y); !sameFloat(got, want) {
						t.Fatalf("%s n=%d off=%d: product = %g (%#x), want %g (%#x)", l, n, off, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		})
	}
}

// TestDotGoOrder spells the order out one operation at a time, against
// dotGo.
func TestDotGoOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 15, 16, 17, 64, 100} {
		a, b := randVec(rng, n), randVec(rng, n)
		var lane [16]float32
		for i := range n {
			lane[i%16] = fma.F32(a[i], b[i], lane[i%16])
		}
		var t8 [8]float32
		for l := range 8 {
			t8[l] = lane[l] + lane[l+8]
		}
		var t4 [4]float32
		for l := range 4 {
			t4[l] = t8[l] + t8[l+4]
		}
		t2 := [2]float32{t4[0] + t4[2], t4[1] + t4[3]}
		if got, want := dotGo(a, b), t2[0]+t2[1]; math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d: dotGo %g, the order spelled out %g", n, got, want)
		}
	}
}

func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %#x, want %#x", what, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

// checkRow runs conv and ref on src at several element offsets, byte
// misalignments and lengths (the whole rest, and 0..40), comparing bits.
func checkRow(t *testing.T, name string, elemBytes int, src []byte, conv, ref func([]float32, []byte)) {
	t.Helper()
	total := len(src) / elemBytes
	for _, off := range []int{0, 1, 3, 8, 17} {
		for _, mis := range []int{0, 1} {
			s := src[off*elemBytes+mis:]
			avail := (len(s)) / elemBytes
			lengths := []int{avail, avail - 1}
			for n := 0; n <= 40 && n <= avail; n++ {
				lengths = append(lengths, n)
			}
			for _, n := range lengths {
				if n < 0 || n > total {
					continue
				}
				got, want := make([]float32, n+1), make([]float32, n+1)
				got[n], want[n] = 42, 42 // must stay untouched
				conv(got[:n], s)
				ref(want[:n], s)
				sameBits(t, fmt.Sprintf("%s off=%d mis=%d n=%d", name, off, mis, n), got, want)
			}
		}
	}
}

func TestRowF16AllHalves(t *testing.T) {
	all := make([]byte, 2<<16)
	var finite []byte
	for h := range 1 << 16 {
		binary.LittleEndian.PutUint16(all[2*h:], uint16(h))
		if h&0x7c00 != 0x7c00 {
			finite = binary.LittleEndian.AppendUint16(finite, uint16(h))
		}
	}
	// Every finite half (zeros, subnormals, normals) stays on the fast
	// path; rows with infinities or NaNs are redone in Go.
	checkRow(t, "F16 finite", 2, finite, rowF16, rowF16Go)
	checkRow(t, "F16 all", 2, all, rowF16, rowF16Go)
	// A lone NaN or infinity at each place of a row.
	rng := rand.New(rand.NewPCG(5, 6))
	for _, special := range []uint16{0x7c00, 0xfc00, 0x7c01, 0x7e00, 0xfdff, 0x7fff} {
		for n := 1; n <= 40; n++ {
			for p := range n {
				src := make([]byte, 2*n)
				for i := range n {
					binary.LittleEndian.PutUint16(src[2*i:], uint16(rng.IntN(0x7c00))|uint16(rng.IntN(2))<<15)
				}
				binary.LittleEndian.PutUint16(src[2*p:], special)
				got, want := make([]float32, n), make([]float32, n)
				rowF16(got, src)
				rowF16Go(want, src)
				sameBits(t, fmt.Sprintf("F16 special %#x n=%d at %d", special, n, p), got, want)
			}
		}
	}
}

func TestRowBF16AllPatterns(t *testing.T) {
	all := make([]byte, 2<<16)
	for h := range 1 << 16 {
		binary.LittleEndian.PutUint16(all[2*h:], uint16(h))
	}
	checkRow(t, "BF16", 2, all, rowBF16, rowBF16Go)
}

func TestRowF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, 4*5000)
	for i := 0; i < len(src); i += 4 {
		v := rng.Uint32()
		if i%16 == 0 {
			v |= 0x7f800000 // infinities and NaNs of every payload
		}
		binary.LittleEndian.PutUint32(src[i:], v)
	}
	checkRow(t, "F32", 4, src, rowF32, rowF32Go)
}

// q8Blocks returns nb random Q8_0 blocks; with allScales the scales run
// through every half pattern in turn.
func q8Blocks(rng *rand.Rand, nb int, allScales bool) []byte {
	src := make([]byte, 34*nb)
	for b := range nb {
		blk := src[34*b:]
		d := gguf.F32ToF16(float32(rng.NormFloat64() * 0.01))
		if allScales {
			d = uint16(b)
		}
		binary.LittleEndian.PutUint16(blk, d)
		for i := 2; i < 34; i++ {
			blk[i] = byte(rng.Uint32())
		}
		blk[2], blk[3] = 0x80, 0x7f // -128, 127
	}
	return src
}

func TestRowQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	src := q8Blocks(rng, 1<<16, true)
	got, want := make([]float32, 32<<16), make([]float32, 32<<16)
	rowQ8_0(got, src)
	rowQ8_0Go(want, src)
	sameBits(t, "Q8_0 all scales", got, want)
	for nb := 0; nb <= 9; nb++ {
		for mis := range 3 {
			s := src[mis+34*1000:]
			for _, n := range []int{32 * nb, 32*nb + 5} { // a partial block is left alone
				got, want := make([]float32, n), make([]float32, n)
				for i := range got {
					got[i], want[i] = 7, 7
				}
				rowQ8_0(got, s)
				rowQ8_0Go(want, s)
				sameBits(t, fmt.Sprintf("Q8_0 n=%d mis=%d", n, mis), got, want)
			}
		}
	}
}

// TestTiles holds the products of the float path, at every kernel level,
// every tile shape and every split into row ranges, to Row followed by
// dotGo for each (row, input) pair: a pair's bits do not depend on the
// tile it lands in, which is what makes a decode step (one input) agree
// with a batched one.
func TestTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	check := func(name string, typ gguf.Type, cols int, data []byte) {
		t.Helper()
		rb, err := typ.RowBytes(uint64(cols))
		if err != nil {
			t.Fatal(err)
		}
		rows := len(data) / int(rb)
		// View the rows one byte off their allocation too.
		for _, mis := range []int{0, 1} {
			buf := make([]byte, rows*int(rb)+mis)
			copy(buf[mis:], data[:rows*int(rb)])
			m := Matrix{Name: name, Type: typ, Rows: rows, Cols: cols, Data: buf[mis:], rowBytes: int(rb)}
			const n = 13
			xs := randVec(rng, n*cols+1)[1:]
			want := make([]float32, n*rows)
			row := make([]float32, cols)
			for r := range rows {
				m.Row(r, row)
				for tk := range n {
					want[tk*rows+r] = dotGo(row, xs[tk*cols:(tk+1)*cols])
				}
			}
			for _, l := range levels() {
				atLevel(l, func() {
					var s tileScratch
					for _, nn := range []int{1, 2, 3, 5, 6, 7, n} {
						// Rows in ranges that split tiles unevenly.
						got := make([]float32, nn*rows)
						for lo := 0; lo < rows; {
							hi := min(rows, lo+1+(lo*7)%5)
							m.mulFloat(got, rows, xs, nn, lo, hi, &s)
							lo = hi
						}
						for tk := range nn {
							for r := range rows {
								if g, w := got[tk*rows+r], want[tk*rows+r]; !sameFloat(g, w) {
									t.Fatalf("%s %s cols=%d mis=%d n=%d: row %d input %d = %g (%#x), want %g (%#x)",
										l, name, cols, mis, nn, r, tk, g, math.Float32bits(g), w, math.Float32bits(w))
								}
							}
						}
					}
				})
			}
		}
	}
	halves := func(n int, all bool) []byte {
		b := make([]byte, 2*n)
		for i := range n {
			h := gguf.F32ToF16(float32(rng.NormFloat64()))
			if all {
				h = uint16(i)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	for _, cols := range []int{1, 7, 15, 16, 17, 32, 48, 80, 100, 128, 144} {
		check("F16", gguf.TypeF16, cols, halves(cols*9, false))
		bf := halves(cols*9, false)
		for i := 0; i < len(bf); i += 2 {
			binary.LittleEndian.PutUint16(bf[i:], gguf.F32ToBF16(float32(rng.NormFloat64())))
		}
		check("BF16", gguf.TypeBF16, cols, bf)
		f := make([]byte, 4*cols*9)
		for i := 0; i < len(f); i += 4 {
			binary.LittleEndian.PutUint32(f[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		check("F32", gguf.TypeF32, cols, f)
	}
	for _, cols := range []int{896, 1000} {
		check("F16", gguf.TypeF16, cols, halves(cols*11, false))
	}
	// Every half pattern, NaNs and infinities included, in rows of 1024.
	check("F16 all patterns", gguf.TypeF16, 1024, halves(1<<16, true))
	check("BF16 all patterns", gguf.TypeBF16, 1024, halves(1<<16, true))
	for _, cols := range []int{32, 64, 96, 128, 160, 896} {
		check("Q8_0", gguf.TypeQ8_0, cols, q8Blocks(rng, 9*cols/32, false))
	}
	check("Q8_0 all scales", gguf.TypeQ8_0, 96, q8Blocks(rng, 3*1024, true))
	q4 := make([]byte, 7*144)
	for i := range q4 {
		q4[i] = byte(rng.Uint32())
	}
	for b := 0; b < len(q4); b += 144 { // finite super-block scales
		binary.LittleEndian.PutUint16(q4[b:], gguf.F32ToF16(0.01))
		binary.LittleEndian.PutUint16(q4[b+2:], gguf.F32ToF16(0.002))
	}
	check("Q4_K", gguf.TypeQ4_K, 256, q4)
}

// BenchmarkTiles times the float path's product of a 4864×896 matrix
// (a Qwen2.5-0.5B FFN's width) with n inputs, on one core.
func BenchmarkTiles(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 4864, 896
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0} {
		rb, _ := typ.RowBytes(cols)
		data := make([]byte, rows*int(rb))
		gguf.EncodeF32(typ, data, randVec(rng, rows*cols))
		m := Matrix{Type: typ, Rows: rows, Cols: cols, Data: data, rowBytes: int(rb)}
		for _, n := range []int{1, 8, 64, 128} {
			x, out := randVec(rng, n*cols), make([]float32, n*rows)
			for _, l := range levels() {
				b.Run(fmt.Sprintf("%s/n=%d/%s", typ, n, l), func(b *testing.B) {
					atLevel(l, func() {
						var s tileScratch
						for b.Loop() {
							m.mulFloat(out, rows, x, n, 0, rows, &s)
						}
					})
					b.ReportMetric(float64(rows*cols*n)*2*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkMatmulStream streams a 256 MiB weight matrix through one
// product with n inputs on every core, the shape of a decode step's
// weight traffic without the rest of the forward (compare with
// BenchmarkMemoryRead): the float path, and Q8_0 on the integer path.
func BenchmarkMatmulStream(b *testing.B) {
	const cols = 896
	rng := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0} {
		rb, _ := typ.RowBytes(cols)
		rows := (256 << 20) / int(rb)
		data := make([]byte, rows*int(rb))
		for i := 0; i < len(data); i += 4096 { // sparse: values do not matter, pages do
			data[i] = byte(rng.Uint32())
		}
		if typ == gguf.TypeQ8_0 {
			for r := 0; r < rows*cols/32; r++ {
				binary.LittleEndian.PutUint16(data[34*r:], 0x2000) // finite scales
			}
		}
		for _, n := range []int{1, 8} {
			for _, path := range []string{"float", "int8"} {
				m := Matrix{Type: typ, Rows: rows, Cols: cols, Data: data, rowBytes: int(rb)}
				if path == "int8" {
					if m.kern = qdot.For(typ); m.kern == nil {
						continue
					}
				}
				x, out := randVec(rng, n*cols), make([]float32, n*rows)
				b.Run(fmt.Sprintf("%s/%s/n=%d", typ, path, n), func(b *testing.B) {
					b.SetBytes(int64(len(data)))
					for b.Loop() {
						defaultPool.matmul(out, &m, x, n)
					}
				})
			}
		}
	}
}
