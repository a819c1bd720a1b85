package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// fma32 is a*b+c rounded once to float32 (ties to even), in portable Go:
// the product is exact in float64, the float64 sum's error is recovered
// exactly (TwoSum), and the one case where rounding that sum to float32
// would round twice (the sum lands exactly on a float32 midpoint) is
// settled by the sign of the error.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24+24 significant bits
	cc := float64(c)
	s := p + cc
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	bv := s - p
	e := (p - (s - bv)) + (cc - bv) // p+cc == s+e exactly
	r := float32(s)
	if e == 0 || math.IsInf(float64(r), 0) || float64(r) == s {
		return r
	}
	o := math.Nextafter32(r, float32(math.Inf(1)))
	if float64(r) > s {
		o = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if float64(o)-s != s-float64(r) {
		return r // not a midpoint: s rounds as the exact value does
	}
	if (e > 0) == (o > r) {
		return o
	}
	return r
}

// dotFMARef replays the assembly dot's summation order (simd_amd64.go)
// one scalar operation at a time.
func dotFMARef(a, b []float32) float32 {
	n := len(a)
	var acc [8][8]float32
	i := 0
	for ; i+64 <= n; i += 64 {
		for k := range 8 {
			for l := range 8 {
				acc[k][l] = fma32(a[i+8*k+l], b[i+8*k+l], acc[k][l])
			}
		}
	}
	for j := 0; i+8 <= n; i, j = i+8, j+1 {
		for l := range 8 {
			acc[j][l] = fma32(a[i+l], b[i+l], acc[j][l])
		}
	}
	var v [8]float32
	for l := range 8 {
		v[l] = ((acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l])) + ((acc[4][l] + acc[5][l]) + (acc[6][l] + acc[7][l]))
	}
	w0, w1, w2, w3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	s := (w0 + w2) + (w1 + w3)
	for ; i < n; i++ {
		s = fma32(a[i], b[i], s)
	}
	return s
}

// dotWant is the dot product this process must compute.
func dotWant(a, b []float32) float32 {
	if simdKernel == "go" {
		return dotGo(a, b)
	}
	return dotFMARef(a, b)
}

func TestFMA32(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(600).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	// a*b+c = 1+2^-23 + 2^-24 - 2^-54: the float64 sum is the float32
	// midpoint 1+2^-23+2^-24, which rounds to even (up); the exact value
	// rounds down.
	a := float32(math.Ldexp(1+1.0/(1<<15), -24))
	b := float32(1 - 1.0/(1<<15))
	c := float32(1 + 1.0/(1<<23))
	if got, want := fma32(a, b, c), exact(a, b, c); got != want || want != c {
		t.Fatalf("midpoint case: fma32 = %v, exact %v, want %v", got, want, c)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		a := float32(rng.NormFloat64())
		b := float32(math.Ldexp(rng.NormFloat64(), rng.IntN(60)-30))
		c := float32(rng.NormFloat64())
		if i%2 == 0 { // near ties: a*b around half an ulp of c
			b = float32(math.Ldexp(float64(b), -24-rng.IntN(40)))
		}
		if got, want := fma32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, exact %g", a, b, c, got, want)
		}
	}
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestDotOrder checks dot bit for bit against the order it promises, for
// every length up to 300 and a few long ones, at every alignment.
func TestDotOrder(t *testing.T) {
	t.Logf("kernel %s", simdKernel)
	rng := rand.New(rand.NewPCG(3, 4))
	lengths := []int{896, 4864, 12345}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		a, b := randVec(rng, n+8), randVec(rng, n+8)
		var first uint32
		for off := range 8 {
			// The same values at another alignment: copy them there.
			ao, bo := make([]float32, n+off+1)[off+1:], make([]float32, n+2*off)[2*off:]
			copy(ao, a[:n])
			copy(bo, b[:n])
			got := dot(ao, bo)
			if off == 0 {
				first = math.Float32bits(got)
				if want := dotWant(a[:n], b[:n]); first != math.Float32bits(want) {
					t.Fatalf("n=%d: dot = %g (%#x), want %g (%#x)", n, got, first, want, math.Float32bits(want))
				}
			} else if math.Float32bits(got) != first {
				t.Fatalf("n=%d: dot at offsets %d/%d = %#x, at 0 %#x", n, off+1, 2*off, math.Float32bits(got), first)
			}
			// Unaligned subslices of the random data itself.
			if got, want := dot(a[off:n+off], b[8-off:n+8-off]), dotWant(a[off:n+off], b[8-off:n+8-off]); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("n=%d off=%d: dot = %#x, want %#x", n, off, math.Float32bits(got), math.Float32bits(want))
			}
		}
	}
}

func TestDotBoundsCheck(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("dot with len(b) < len(a) did not panic")
		}
	}()
	dot(make([]float32, 9), make([]float32, 8))
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

// TestRowDot checks that dotRows (the fused row·x kernels) gives the bits
// of Row followed by dot, which is what makes a decode step (one input) agree
// with a batched one.
func TestRowDot(t *testing.T) {
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
			x := randVec(rng, cols+1)[1:]
			row, scratch := make([]float32, cols), make([]float32, cols)
			for r := range rows {
				m.Row(r, row)
				want := dot(row, x)
				var got [1]float32
				m.dotRows(got[:], r, x, scratch)
				if math.Float32bits(got[0]) != math.Float32bits(want) {
					t.Fatalf("%s cols=%d row %d mis=%d: dotRows = %g (%#x), Row+dot %g (%#x)", name, cols, r, mis, got[0], math.Float32bits(got[0]), want, math.Float32bits(want))
				}
			}
			// And the batched matmul against the n == 1 one.
			xs := randVec(rng, 3*cols)
			out1, outN := make([]float32, rows), make([]float32, 3*rows)
			p := &pool{workers: 2}
			p.matmul(outN, &m, xs, 3)
			for tk := range 3 {
				p.matmul(out1, &m, xs[tk*cols:(tk+1)*cols], 1)
				sameBits(t, fmt.Sprintf("%s cols=%d matmul input %d", name, cols, tk), out1, outN[tk*rows:(tk+1)*rows])
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
	for cols := 1; cols <= 140; cols++ {
		check("F16", gguf.TypeF16, cols, halves(cols*5, false))
		bf := halves(cols*5, false)
		for i := 0; i < len(bf); i += 2 {
			binary.LittleEndian.PutUint16(bf[i:], gguf.F32ToBF16(float32(rng.NormFloat64())))
		}
		check("BF16", gguf.TypeBF16, cols, bf)
		f := make([]byte, 4*cols*5)
		for i := 0; i < len(f); i += 4 {
			binary.LittleEndian.PutUint32(f[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		check("F32", gguf.TypeF32, cols, f)
	}
	for _, cols := range []int{896, 1000, 4864} {
		check("F16", gguf.TypeF16, cols, halves(cols*8, false))
	}
	// Every half pattern, NaNs and infinities included, in rows of 1000.
	check("F16 all patterns", gguf.TypeF16, 1000, halves(1<<16, true))
	check("BF16 all patterns", gguf.TypeBF16, 1000, halves(1<<16, true))
	for _, cols := range []int{32, 64, 96, 128, 160, 896, 4864} {
		check("Q8_0", gguf.TypeQ8_0, cols, q8Blocks(rng, 5*cols/32, false))
	}
	check("Q8_0 all scales", gguf.TypeQ8_0, 96, q8Blocks(rng, 1<<16, true))
}

func BenchmarkDot(b *testing.B) {
	for _, n := range []int{64, 896, 4864} {
		rng := rand.New(rand.NewPCG(1, 1))
		x, y := randVec(rng, n), randVec(rng, n)
		for _, k := range []struct {
			name string
			fn   func(a, b []float32) float32
		}{{simdKernel, dot}, {"go", dotGo}} {
			b.Run(fmt.Sprintf("%s/n=%d", k.name, n), func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				var s float32
				for b.Loop() {
					s += k.fn(x, y)
				}
				_ = s
			})
		}
	}
}

// BenchmarkRowDot times one weight row against one input: converted into
// the scratch row then dotted (the batched path) and fused (n == 1).
func BenchmarkRowDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0} {
		for _, cols := range []int{896, 4864} {
			rb, _ := typ.RowBytes(uint64(cols))
			f := randVec(rng, cols)
			data := make([]byte, rb)
			gguf.EncodeF32(typ, data, f)
			m := Matrix{Type: typ, Rows: 1, Cols: cols, Data: data, rowBytes: int(rb)}
			x, row := randVec(rng, cols), make([]float32, cols)
			var out [1]float32
			b.Run(fmt.Sprintf("%s/%d/row+dot", typ, cols), func(b *testing.B) {
				b.SetBytes(int64(rb))
				for b.Loop() {
					m.Row(0, row)
					_ = dot(row, x)
				}
			})
			b.Run(fmt.Sprintf("%s/%d/fused", typ, cols), func(b *testing.B) {
				b.SetBytes(int64(rb))
				for b.Loop() {
					m.dotRows(out[:], 0, x, row)
				}
			})
		}
	}
}

// BenchmarkMatmulStream streams a 256 MiB weight matrix through one
// matrix-vector product on every core, the shape of a decode step's
// weight traffic without the rest of the forward (compare with
// BenchmarkMemoryRead).
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
		m := Matrix{Type: typ, Rows: rows, Cols: cols, Data: data, rowBytes: int(rb)}
		x, out := randVec(rng, cols), make([]float32, rows)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				defaultPool.matmul(out, &m, x, 1)
			}
		})
	}
}
