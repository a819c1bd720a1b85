package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"ringlm/gguf"
)

// Tests shared by the legacy, IQ4 and MXFP4 types: quantize → dequantize
// error, determinism, re-quantizing what was decoded, and special inputs.

func uniform(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(2*r.Float64() - 1)
	}
	return x
}

func gaussian(seed uint64, n int, sigma float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(sigma * r.NormFloat64())
	}
	return x
}

// roundTrip quantizes x as typ and decodes it again.
func roundTrip(t testing.TB, typ gguf.Type, x []float32) ([]byte, []float32) {
	t.Helper()
	n, err := typ.RowBytes(uint64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, n)
	if err := Quantize(typ, q, x); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, y, q); err != nil {
		t.Fatal(err)
	}
	return q, y
}

// uniformMSE is the mean squared error of rounding to a grid of step h.
func uniformMSE(h float64) float64 { return h * h / 12 }

func blockAmax(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

func blockRange(x []float32) float64 {
	lo, hi := minMax(x)
	return float64(hi) - float64(lo)
}

// mxfp4ElementMSE is the expected squared error of one element: rounding
// to the E2M1 grid at scale s (steps s/2 below 2s, s below 4s, 2s up to
// 6s), or clipping to 6s above it.
func mxfp4ElementMSE(x, s float64) float64 {
	a := math.Abs(x)
	switch {
	case a > 6*s:
		return (a - 6*s) * (a - 6*s)
	case a >= 4*s:
		return uniformMSE(2 * s)
	case a >= 2*s:
		return uniformMSE(s)
	}
	return uniformMSE(s / 2)
}

// iq4GridMSE predicts rounding to IQ4NLValues·d with d = -max/127 (max
// signed), the largest element on the grid's long end: the step is the gap
// between the two levels around x/d, and beyond the short end (113) the
// element clips.
func iq4GridMSE(x []float32) float64 {
	d := -float64(signedMax(x)) / 127
	if d == 0 {
		return 0
	}
	sum := 0.0
	for _, v := range x {
		u := float64(v) / d
		if u >= 113 {
			sum += (u - 113) * (u - 113) * d * d
			continue
		}
		for i := 1; i < 16; i++ {
			if u < float64(IQ4NLValues[i]) {
				sum += uniformMSE(float64(int(IQ4NLValues[i])-int(IQ4NLValues[i-1])) * d)
				break
			}
		}
	}
	return sum
}

// A model of each type's error on data spread over its blocks: the mean
// squared error per element that rounding to the type's grid predicts, and
// the slack allowed over it.
var errorModels = []struct {
	typ gguf.Type
	// mse returns the predicted sum of squared errors over one block.
	mse func(x []float32) float64
	// slack covers the f16 rounding of the scale (2^-11 of up to 127 steps
	// for Q8_0, 6%) and, for the symmetric types, the clip of the grid's
	// short side (+7·d for Q4_0, +15·d for Q5_0) when the opposite extreme
	// is nearly as large as the maximum.
	slack float64
	why   string
}{
	{gguf.TypeQ8_0, func(x []float32) float64 { return 32 * uniformMSE(blockAmax(x)/127) }, 1.10, "step amax/127"},
	{gguf.TypeQ4_0, func(x []float32) float64 { return 32 * uniformMSE(blockAmax(x)/8) }, 1.25, "step amax/8"},
	{gguf.TypeQ5_0, func(x []float32) float64 { return 32 * uniformMSE(blockAmax(x)/16) }, 1.25, "step amax/16"},
	{gguf.TypeQ4_1, func(x []float32) float64 { return 32 * uniformMSE(blockRange(x)/15) }, 1.10, "step (max-min)/15"},
	{gguf.TypeQ5_1, func(x []float32) float64 { return 32 * uniformMSE(blockRange(x)/31) }, 1.10, "step (max-min)/31"},
	// The IQ4 grid at the scale that puts the largest element on -127, one
	// of the 15 the search tries: the scale it keeps must do no worse
	// (measured 0.90–0.93 of it; IQ4_XS's 6-bit block scales cost ~1%).
	{gguf.TypeIQ4_NL, iq4GridMSE, 1.0, "IQ4 grid steps at scale -max/127"},
	{gguf.TypeIQ4_XS, iq4GridMSE, 1.0, "IQ4 grid steps at scale -max/127"},
	{gguf.TypeMXFP4, func(x []float32) float64 {
		amax := blockAmax(x)
		if amax == 0 {
			return 0
		}
		s := math.Exp2(math.Floor(math.Log2(amax)) - 2)
		sum := 0.0
		for _, v := range x {
			sum += mxfp4ElementMSE(float64(v), s)
		}
		return sum
	}, 1.20, "E2M1 steps at scale 2^(floor(log2 amax)-2), clip above 6·scale"},
}

func TestRoundTripError(t *testing.T) {
	data := map[string][]float32{
		"uniform":  uniform(1, 8192),
		"gaussian": gaussian(2, 8192, 1),
		"weights":  gaussian(3, 8192, 0.02),
	}
	for _, m := range errorModels {
		for name, x := range data {
			_, y := roundTrip(t, m.typ, x)
			var got, want float64
			for b := 0; b < len(x); b += qk {
				want += m.mse(x[b : b+qk])
				for i := b; i < b+qk; i++ {
					d := float64(y[i]) - float64(x[i])
					got += d * d
				}
			}
			got, want = math.Sqrt(got/float64(len(x))), math.Sqrt(want/float64(len(x)))
			t.Logf("%-6s %-8s RMSE %.4g, model %.4g (%s), ratio %.3f", m.typ, name, got, want, m.why, got/want)
			if got > m.slack*want {
				t.Errorf("%s on %s data: RMSE %.4g over %.2f × the model's %.4g (%s)", m.typ, name, got, m.slack, want, m.why)
			}
		}
	}
}

// myTypes are the types of this family.
var myTypes = []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4}

// TestQuantizeDeterministic: the same input gives the same bytes, and the
// blocks are independent, so a row quantized in pieces (as a parallel
// quantizer would) equals the row quantized whole.
func TestQuantizeDeterministic(t *testing.T) {
	x := gaussian(4, 2048, 0.5)
	for _, typ := range myTypes {
		info, _ := typ.Info()
		q1, _ := roundTrip(t, typ, x)
		q2, _ := roundTrip(t, typ, x)
		if !bytes.Equal(q1, q2) {
			t.Errorf("%s: two quantizations differ", typ)
		}
		var pieces []byte
		for b := 0; b < len(x); b += int(info.BlockSize) {
			q, _ := roundTrip(t, typ, x[b:b+int(info.BlockSize)])
			pieces = append(pieces, q...)
		}
		if !bytes.Equal(q1, pieces) {
			t.Errorf("%s: block by block differs from the whole row", typ)
		}
	}
}

// TestRequantizeStable: a row that was quantized and decoded re-quantizes
// to the same bytes, for the types whose quantizer maps its own grid onto
// itself. For these the largest element lands exactly on the grid's end
// again (-8·d, 127·d, the minimum and maximum), so the scale comes back to
// the same f16 and every element to its own level. (IQ4 and MXFP4 only do
// so for blocks of a given shape: their own tests.)
func TestRequantizeStable(t *testing.T) {
	x := append(uniform(5, 1024), gaussian(6, 1024, 0.03)...)
	for _, typ := range []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0} {
		q1, y := roundTrip(t, typ, x)
		q2, _ := roundTrip(t, typ, y)
		if !bytes.Equal(q1, q2) {
			t.Errorf("%s: re-quantizing the decoded row changed it", typ)
		}
	}
}

func TestSpecialInputs(t *testing.T) {
	const n = 256
	for _, typ := range myTypes {
		f, _ := Lookup(typ)
		// All zeros decode to zeros.
		_, y := roundTrip(t, typ, make([]float32, n))
		for i, v := range y {
			if v != 0 {
				t.Fatalf("%s: zeros decode to %v at %d", typ, v, i)
			}
		}
		// One outlier among small values keeps its magnitude (within the
		// coarsest type's relative step, MXFP4's 4 → 6) and the rest stay
		// finite.
		x := gaussian(7, n, 0.01)
		x[37] = -1e4
		_, y = roundTrip(t, typ, x)
		if math.Abs(float64(y[37]-x[37])) > 0.25*1e4 {
			t.Errorf("%s: outlier -1e4 decodes to %v", typ, y[37])
		}
		for i, v := range y {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: element %d decodes to %v", typ, i, v)
			}
		}
		// Tiny values (scales below f16's range) and huge ones (an f16 scale
		// that overflows, as in ggml) must not panic; tiny ones decode near 0.
		for _, scale := range []float64{1e-30, 1e30} {
			_, y = roundTrip(t, typ, gaussian(8, n, scale))
			if scale < 1 {
				for i, v := range y {
					if math.Abs(float64(v)) > 1e-6 {
						t.Fatalf("%s: %g-sized element %d decodes to %v", typ, scale, i, v)
					}
				}
			}
		}
		// NaN and infinities: the registry refuses them with the element's
		// index; the codec itself, called directly, must not panic and must
		// give the same bytes every time.
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			x := gaussian(9, n, 1)
			x[100] = bad
			q := make([]byte, mustRowBytes(t, typ, n))
			err := Quantize(typ, q, x)
			if err == nil || !strings.Contains(err.Error(), "element 100") {
				t.Errorf("%s: %v accepted or unclear error: %v", typ, bad, err)
			}
			f.Quantize(q, x)
			q2 := make([]byte, len(q))
			f.Quantize(q2, x)
			if !bytes.Equal(q, q2) {
				t.Errorf("%s: quantizing %v is not deterministic", typ, bad)
			}
			f.Dequantize(make([]float32, n), q)
		}
	}
}

func mustRowBytes(t testing.TB, typ gguf.Type, n int) int {
	t.Helper()
	b, err := typ.RowBytes(uint64(n))
	if err != nil {
		t.Fatal(err)
	}
	return int(b)
}

func TestNearestInt(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want int
	}{
		{0.5, 0}, {1.5, 2}, {2.5, 2}, {-0.5, 0}, {-1.5, -2}, {-2.4999998, -2},
		{4194303, 4194303}, {1e30, 4194303}, {-1e30, -4194303}, {float32(math.NaN()), 0},
	} {
		if got := nearestInt(c.in); got != c.want {
			t.Errorf("nearestInt(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestTruncClamp(t *testing.T) {
	for _, c := range []struct {
		in     float32
		lo, hi int
		want   int
	}{
		{8.5, 0, 15, 8}, {15.99, 0, 15, 15}, {16.5, 0, 15, 15}, {-0.7, 0, 15, 0},
		{-3.9, -8, 7, -3}, {float32(math.NaN()), 0, 15, 0}, {float32(math.Inf(-1)), 0, 31, 0},
		{float32(math.Inf(1)), 0, 31, 31},
	} {
		if got := truncClamp(c.in, c.lo, c.hi); got != c.want {
			t.Errorf("truncClamp(%v, %d, %d) = %d, want %d", c.in, c.lo, c.hi, got, c.want)
		}
	}
}

// blockOf assembles a block from little-endian fields: a uint16 (an f16's
// bits), a uint32, single bytes, or byte runs.
func blockOf(fields ...any) []byte {
	var b []byte
	for _, f := range fields {
		switch v := f.(type) {
		case uint16:
			b = append(b, byte(v), byte(v>>8))
		case uint32:
			b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		case byte:
			b = append(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic("blockOf: unexpected field")
		}
	}
	return b
}

func repeat(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// checkDecode decodes blk as typ and compares every element with want(i).
func checkDecode(t *testing.T, typ gguf.Type, blk []byte, want func(i int) float32) {
	t.Helper()
	info, _ := typ.Info()
	n := len(blk) / int(info.BlockBytes) * int(info.BlockSize)
	y := make([]float32, n)
	if err := Dequantize(typ, y, blk); err != nil {
		t.Fatal(err)
	}
	for i, v := range y {
		if w := want(i); v != w {
			t.Errorf("%s element %d: got %v, want %v", typ, i, v, w)
		}
	}
}
