package qdot

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ringlm/gguf"
)

// blocksFor returns how many weight blocks a row of cols elements of t has.
func blocksFor(t gguf.Type, cols int) int {
	info, _ := t.Info()
	return cols / int(info.BlockSize)
}

// testCols are row lengths for t: every count of blocks up to 19 (the
// assembly works in groups of 8 blocks or per super-block, so every tail
// is covered), and the decode shapes.
func testCols(t gguf.Type) []int {
	info, _ := t.Info()
	var out []int
	for nb := 1; nb <= 19; nb++ {
		out = append(out, nb*int(info.BlockSize))
	}
	for _, c := range []int{896, 2048, 4864, 8192} {
		if c%int(info.BlockSize) == 0 {
			out = append(out, c)
		}
	}
	return out
}

// TestKernelsMatchReference holds each Go kernel to the float64 dot
// product of the tests' own dequantization of the row with the
// dequantized activations: within the float32 rounding of its terms.
func TestKernelsMatchReference(t *testing.T) {
	want := []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
		gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
		gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4}
	slices.Sort(want)
	if got := Types(); !slices.Equal(got, want) {
		t.Fatalf("kernels for %v, want %v", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var a Acts
	for _, typ := range Types() {
		k := For(typ)
		for _, cols := range testCols(typ) {
			for range 4 {
				w := randBlocks(rng, typ, blocksFor(typ, cols))
				a.Quantize(k.Act, randActs(rng, cols))
				got := k.goDot(w, &a)
				ref, mag := refDot(typ, w, &a)
				// Each block (or lane) adds a few roundings of at most
				// 2^-24 of the magnitude of what it sums.
				tol := float64(blocksFor(typ, cols)+16) * 0x1p-22 * mag
				if math.Abs(float64(got)-ref) > tol {
					t.Fatalf("%s cols=%d: Go kernel %g, reference %g (tolerance %.3g)", typ, cols, got, ref, tol)
				}
			}
		}
	}
}

func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestAVX2MatchesGo: the assembly kernels give the Go kernels' bits on
// random rows of every length class, and on rows with extreme scales
// (subnormal, huge, infinite F16 scales; every MXFP4 exponent).
func TestAVX2MatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this machine (or built with purego): only the Go kernels run")
	}
	for _, typ := range Types() {
		if For(typ).asmDot == nil {
			t.Errorf("%s has no AVX2 kernel", typ)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var a Acts
	for _, typ := range Types() {
		k := For(typ)
		if k.asmDot == nil {
			continue
		}
		info, _ := typ.Info()
		check := func(what string, w []byte, x []float32) {
			t.Helper()
			a.Quantize(k.Act, x)
			// The same row one byte off its allocation.
			buf := make([]byte, len(w)+1)[1:]
			copy(buf, w)
			got, want := k.asmDot(buf, &a), k.goDot(w, &a)
			if !sameFloat(got, want) {
				t.Fatalf("%s %s cols=%d: AVX2 %g (%#x), Go %g (%#x)", typ, what, len(x), got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
		for _, cols := range testCols(typ) {
			for range 8 {
				check("random", randBlocks(rng, typ, blocksFor(typ, cols)), randActs(rng, cols))
			}
		}
		// Extreme scales: every F16 scale field (or MXFP4 exponent) set
		// to a pattern from the whole range, finite or not.
		cols := 64 * int(info.BlockSize)
		for round := range 64 {
			w := randBlocks(rng, typ, 64)
			for b := range 64 {
				blk := w[b*int(info.BlockBytes):]
				if typ == gguf.TypeMXFP4 {
					blk[0] = byte(4*round + b%4)
					continue
				}
				for o := range blk[:info.BlockBytes] {
					if rng.IntN(4) == 0 && o+1 < int(info.BlockBytes) {
						blk[o+1] = byte(rng.Uint32())
					}
				}
			}
			x := randActs(rng, cols)
			if round%8 == 0 {
				x[rng.IntN(cols)] = float32(math.Inf(1))
			}
			check(fmt.Sprintf("extreme round %d", round), w, x)
		}
	}
}

func TestQuantizeQ8_0(t *testing.T) {
	x := make([]float32, 64)
	for i := range 32 {
		x[i] = float32(i) - 16 // amax 16: d = 16/127
	}
	x[0], x[1], x[2] = 127, 2.5, -2.5 // amax 127: d = 1, halves go away from zero
	x[32+5] = float32(math.NaN())
	var a Acts
	a.Quantize(gguf.TypeQ8_0, x)
	if a.d[0] != 1 || a.q[0] != 127 || a.q[1] != 3 || a.q[2] != -3 || a.q[3] != -13 {
		t.Errorf("block 0: d %g, q %v", a.d[0], a.q[:4])
	}
	var sum int16
	for _, v := range a.q[:32] {
		sum += int16(v)
	}
	if a.sums[0] != sum {
		t.Errorf("sum %d, want %d", a.sums[0], sum)
	}
	if !math.IsNaN(float64(a.d[1])) {
		t.Errorf("block with a NaN: d = %g, want NaN", a.d[1])
	}
	// d = 0.3/127 rounds to F16 when stored; the quants use 1/d unrounded.
	y := make([]float32, 32)
	y[0], y[1] = 0.3, 0.1
	a.Quantize(gguf.TypeQ8_1, y)
	d := float32(0.3) / 127
	if a.d[0] != gguf.F16ToF32(gguf.F32ToF16(d)) || a.q[0] != 127 || a.q[1] != int8(math.Round(float64(0.1*(1/d)))) {
		t.Errorf("Q8_1: d %g q %v", a.d[0], a.q[:2])
	}
	if want := gguf.F16ToF32(gguf.F32ToF16(float32(int(a.q[0])+int(a.q[1])) * d)); a.s[0] != want {
		t.Errorf("Q8_1: s %g, want %g", a.s[0], want)
	}
}

func TestQuantizeQ8_K(t *testing.T) {
	x := make([]float32, 512)
	x[0], x[1], x[2], x[3] = -127, 2.5, 3.5, -0.5 // max -127: iscale 1, halves to even
	x[20] = 127                                   // as large, but not first
	var a Acts
	a.Quantize(gguf.TypeQ8_K, x)
	if a.d[0] != 1 || a.q[0] != -127 || a.q[1] != 2 || a.q[2] != 4 || a.q[3] != 0 || a.q[20] != 127 {
		t.Errorf("block 0: d %g, q %v %d", a.d[0], a.q[:4], a.q[20])
	}
	if a.sums[0] != -127+2+4 || a.sums[1] != 127 {
		t.Errorf("bsums %v", a.sums[:2])
	}
	if a.d[1] != 0 || slices.ContainsFunc(a.q[256:], func(v int8) bool { return v != 0 }) {
		t.Errorf("zero block: d %g", a.d[1])
	}
	x[300] = 50 // max 50: iscale -127/50, d = 1/iscale; quants negated
	x[301] = -25
	a.Quantize(gguf.TypeQ8_K, x)
	iscale := float32(-127) / 50
	if a.d[1] != 1/iscale || a.q[256+44] != -127 || a.q[256+45] != int8(math.RoundToEven(float64(iscale*-25))) {
		t.Errorf("block 1: d %g q %d %d", a.d[1], a.q[300], a.q[301])
	}
	x[400] = float32(math.Inf(-1))
	a.Quantize(gguf.TypeQ8_K, x)
	if !math.IsNaN(float64(a.d[1])) {
		t.Errorf("block with -Inf: d %g", a.d[1])
	}
}

func TestDotRejectsMismatch(t *testing.T) {
	var a Acts
	a.Quantize(gguf.TypeQ8_0, make([]float32, 64))
	for _, c := range []struct {
		k *Kernel
		w []byte
	}{{For(gguf.TypeQ8_0), make([]byte, 34)}, {For(gguf.TypeQ4_K), make([]byte, 144)}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: a %d-byte row against 64 %s activations was accepted", c.k.Weight, len(c.w), a.typ)
				}
			}()
			c.k.Dot(c.w, &a)
		}()
	}
}

// roundAway is C's roundf and nearestInt rounds halves to even, over the
// range the quantizers use: every half and quarter, and random values.
func TestRounding(t *testing.T) {
	check := func(v float32) {
		if got, want := roundAway(v), int8(math.Round(float64(v))); got != want {
			t.Fatalf("roundAway(%g) = %d, want %d", v, got, want)
		}
		if got, want := nearestInt(v), int32(math.RoundToEven(float64(v))); got != want {
			t.Fatalf("nearestInt(%g) = %d, want %d", v, got, want)
		}
	}
	for i := -510; i <= 510; i++ {
		check(float32(i) / 4)
		check(math.Nextafter32(float32(i)/4, 200))
		check(math.Nextafter32(float32(i)/4, -200))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		check(float32(rng.Float64()*255 - 127.5))
	}
}

// TestDotRows: DotRows gives, row by row, Dot's bits, in the
// implementation this process runs, for every type.
func TestDotRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var a Acts
	for _, typ := range Types() {
		k := For(typ)
		for _, cols := range testCols(typ) {
			const rows = 5
			nb := blocksFor(typ, cols)
			rb := nb * k.bytes
			w := randBlocks(rng, typ, rows*nb)
			a.Quantize(k.Act, randActs(rng, cols))
			out := make([]float32, rows)
			k.DotRows(out, w, &a)
			for r := range rows {
				if want := k.Dot(w[r*rb:(r+1)*rb], &a); !sameFloat(out[r], want) {
					t.Fatalf("%s cols=%d row %d: DotRows %g, Dot %g", typ, cols, r, out[r], want)
				}
			}
		}
	}
}
