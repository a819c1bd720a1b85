package quant

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ringlm/gguf"
)

var kTypes = []gguf.Type{gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeQ8_K}

func rowBytes(t testing.TB, typ gguf.Type, n int) int {
	t.Helper()
	nb, err := typ.RowBytes(uint64(n))
	if err != nil {
		t.Fatal(err)
	}
	return int(nb)
}

// quantize runs typ's codec itself: Quantize refuses NaN and ±Inf, and
// these tests hold the codec to ggml's bytes on such rows too.
func quantize(t testing.TB, typ gguf.Type, x []float32) []byte {
	t.Helper()
	b := make([]byte, rowBytes(t, typ, len(x)))
	f, ok := Lookup(typ)
	if !ok {
		t.Fatalf("%s not registered", typ)
	}
	f.Quantize(b, x)
	return b
}

func dequantize(t testing.TB, typ gguf.Type, b []byte) []float32 {
	t.Helper()
	info, _ := typ.Info()
	y := make([]float32, len(b)/int(info.BlockBytes)*int(info.BlockSize))
	if err := Dequantize(typ, y, b); err != nil {
		t.Fatal(err)
	}
	return y
}

func gaussianK(seed uint64, n int, sigma float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 17))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(sigma * r.NormFloat64())
	}
	return x
}

// ---- the layouts, pinned by hand-built super-blocks ----

// Each case is a super-block built from literal bytes: a header (super-block
// scales and sub-block scales) and a few probes, quant bits set at chosen
// positions. Every element a probe does not reach must decode to def(e),
// so a probe that lands on the wrong element shows twice. The expected
// values are worked out by hand from the format description in the
// comments, not by the decoder.
type layoutCase struct {
	typ    gguf.Type
	bytes  map[int][]byte // offset -> literal bytes
	def    func(e int) float32
	probes map[int]float32 // element -> value
}

func (c layoutCase) block() []byte {
	info, _ := c.typ.Info()
	b := make([]byte, info.BlockBytes)
	for off, v := range c.bytes {
		for i, x := range v {
			b[off+i] |= x
		}
	}
	return b
}

// Q4_K/Q5_K sub-block scales and mins, 6 bits each, packed in 12 bytes:
// bytes 0–3 hold sc0–sc3 in their low six bits and the top two bits of
// sc4–sc7 in bits 6–7; bytes 4–7 the same for the mins; bytes 8–11 hold
// the low nibbles of sc4–sc7 (low) and m4–m7 (high).
//
//	sc = 1, 2, 3, 4, 40 (10 1000), 50 (11 0010), 60 (11 1100), 63 (11 1111)
//	m  = 5, 6, 7, 8, 33 (10 0001), 17 (01 0001), 20 (01 0100), 63 (11 1111)
var (
	k4Scales = []byte{
		1 | 2<<6, 2 | 3<<6, 3 | 3<<6, 4 | 3<<6, // 0x81 0xC2 0xC3 0xC4
		5 | 2<<6, 6 | 1<<6, 7 | 1<<6, 8 | 3<<6, // 0x85 0x46 0x47 0xC8
		0x8 | 0x1<<4, 0x2 | 0x1<<4, 0xC | 0x4<<4, 0xF | 0xF<<4, // 0x18 0x12 0x4C 0xFF
	}
	k4Sc = [8]uint8{1, 2, 3, 4, 40, 50, 60, 63}
	k4M  = [8]uint8{5, 6, 7, 8, 33, 17, 20, 63}
)

// Q3_K's sixteen 6-bit scales (bias 32) in 12 bytes: the low nibble of
// scale j is nibble j/8 of byte j%8; its top two bits are bits 2(j/4)..+1
// of byte 8+j%4.
//
//	low nibbles: bytes 0–7 = 0x10 0x32 … 0xFE give j0..7 = 0,2,…,14 and
//	             j8..15 = 1,3,…,15
//	top bits:    byte 8 = 0xE4 = 11 10 01 00: j0=0, j4=1, j8=2, j12=3
//	             byte 9 = 0x1B = 00 01 10 11: j1=3, j5=2, j9=1, j13=0
//	             byte 10 = 0x00: j2, j6, j10, j14 = 0
//	             byte 11 = 0xFF: j3, j7, j11, j15 = 3
var (
	q3Scales = []byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0xE4, 0x1B, 0x00, 0xFF}
	// raw 0, 50, 4, 54, 24, 42, 12, 62, 33, 19, 5, 55, 57, 11, 13, 63, less 32:
	q3Sc = [16]int32{-32, 18, -28, 22, -8, 10, -20, 30, 1, -13, -27, 23, 25, -21, -19, 31}
)

// Q6_K's int8 sub-block scales.
var q6Sc = [16]int8{3, -2, 5, -7, 1, 9, -1, 4, 2, -3, 6, -5, 8, -4, 7, -6}

func int8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

var (
	f16Half    = []byte{0x00, 0x38} // 0.5
	f16Quarter = []byte{0x00, 0x34} // 0.25
	f16Eighth  = []byte{0x00, 0x30} // 0.125
)

var layoutCases = []layoutCase{
	{
		// Q2_K: scales[16] at 0, qs[64] at 16, d at 80, dmin at 82.
		// scales[g] = (1 + g%15) | (15−g)<<4: scale 1+g%15, min 15−g.
		// Element e = 128h+32k+l is bit pair k of qs[32h+l], group e/16.
		typ: gguf.TypeQ2_K,
		bytes: map[int][]byte{
			0:  {0xF1, 0xE2, 0xD3, 0xC4, 0xB5, 0xA6, 0x97, 0x88, 0x79, 0x6A, 0x5B, 0x4C, 0x3D, 0x2E, 0x1F, 0x01},
			80: f16Half, 82: f16Quarter,
			16 + 37: {3 << 4}, // h=1 k=2 l=5: element 197, group 12
			16 + 20: {2 << 2}, // h=0 k=1 l=20: element 52, group 3
			16 + 31: {1 << 6}, // h=0 k=3 l=31: element 127, group 7
		},
		def: func(e int) float32 { return -0.25 * float32(15-e/16) },
		probes: map[int]float32{
			197: 0.5*13*3 - 0.25*3, // 18.75
			52:  0.5*4*2 - 0.25*12, // 1
			127: 0.5*8*1 - 0.25*8,  // 2
		},
	},
	{
		// Q3_K: hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108.
		// Element e: low bits as Q2_K, high bit hmask[e%32] bit e/32; the
		// quant is low−4 when that bit is clear, low when it is set.
		typ: gguf.TypeQ3_K,
		bytes: map[int][]byte{
			96: q3Scales, 108: f16Half,
			5:       {1 << 3},              // hmask: element 3*32+5 = 101 loses its −4
			32 + 39: {3 << 2},              // qs[39]: h=1 k=1 l=7: element 167, low 3
			32 + 40: {2 << 4}, 8: {1 << 6}, // qs[40] h=1 k=2 l=8 and hmask[8] bit 6: element 200
			32 + 0: {1}, 0: {1}, // element 0, low 1 and its high bit
		},
		def: func(e int) float32 { return 0.5 * float32(q3Sc[e/16]) * -4 },
		probes: map[int]float32{
			101: 0,                   // 0.5·(−20)·0
			167: 0.5 * -27 * (3 - 4), // 13.5
			200: 0.5 * 25 * 2,        // 25
			0:   0.5 * -32 * 1,       // −16
		},
	},
	{
		// Q4_K: d at 0, dmin at 2, scales[12] at 4, qs[128] at 16.
		// Sub-block s: nibble s%2 of qs[32(s/2)+l], x = d·sc·q − dmin·m.
		typ: gguf.TypeQ4_K,
		bytes: map[int][]byte{
			0: f16Half, 2: f16Eighth, 4: k4Scales,
			16 + 73:  {0xA3}, // qs[73]: element 137 (s4) = 3, element 169 (s5) = 10
			16 + 0:   {0xF0}, // qs[0]: element 32 (s1) = 15
			16 + 127: {0x07}, // qs[127]: element 223 (s6) = 7
		},
		def: func(e int) float32 { return -0.125 * float32(k4M[e/32]) },
		probes: map[int]float32{
			137: 0.5*40*3 - 0.125*33,  // 55.875
			169: 0.5*50*10 - 0.125*17, // 247.875
			32:  0.5*2*15 - 0.125*6,   // 14.25
			223: 0.5*60*7 - 0.125*20,  // 207.5
		},
	},
	{
		// Q5_K: d at 0, dmin at 2, scales[12] at 4, qh[32] at 16, qs[128]
		// at 48. Q4_K plus 16 when qh[e%32] bit e/32 is set.
		typ: gguf.TypeQ5_K,
		bytes: map[int][]byte{
			0: f16Half, 2: f16Eighth, 4: k4Scales,
			48 + 73: {0xA3}, 16 + 9: {0x30}, // elements 137 and 169, both +16
			16 + 0:  {0x80}, // element 224 (s7): 0+16
			16 + 31: {0x01}, // element 31 (s0): 0+16
		},
		def: func(e int) float32 { return -0.125 * float32(k4M[e/32]) },
		probes: map[int]float32{
			137: 0.5*40*19 - 0.125*33, // 375.875
			169: 0.5*50*26 - 0.125*17, // 647.875
			224: 0.5*63*16 - 0.125*63, // 496.125
			31:  0.5*1*16 - 0.125*5,   // 7.375
		},
	},
	{
		// Q6_K: ql[128] at 0, qh[64] at 128, int8 scales[16] at 192, d at
		// 208. Element e = 128h+32k+l: low nibble from ql[64h+32(k%2)+l]
		// (high nibble when k ≥ 2), top bits 2k..2k+1 of qh[32h+l], less 32.
		typ: gguf.TypeQ6_K,
		bytes: map[int][]byte{
			192: int8Bytes(q6Sc[:]), 208: f16Quarter,
			67: {0x50}, 128 + 35: {0x20}, // h=1 k=2 l=3: element 195 = 5|2<<4
			49: {0x0F}, 128 + 17: {0x0C}, // h=0 k=1 l=17: element 49 = 15|3<<4
			63: {0x10}, 128 + 31: {0x40}, // h=0 k=3 l=31: element 127 = 1|1<<4
		},
		def: func(e int) float32 { return 0.25 * float32(q6Sc[e/16]) * -32 },
		probes: map[int]float32{
			195: 0.25 * 8 * (37 - 32),  // 10
			49:  0.25 * -7 * (63 - 32), // −54.25
			127: 0.25 * 4 * (17 - 32),  // −15
		},
	},
	{
		// Q8_K: f32 d at 0, int8 qs[256] at 4, int16 bsums at 260 (not
		// read by dequantization, here set to garbage).
		typ: gguf.TypeQ8_K,
		bytes: map[int][]byte{
			0:   {0, 0, 0, 0xBF}, // −0.5
			4:   {0x7F, 0x80, 0x01},
			260: bytes.Repeat([]byte{0xFF}, 32),
		},
		def:    func(e int) float32 { return 0 },
		probes: map[int]float32{0: -63.5, 1: 64, 2: -0.5},
	},
}

func TestKQuantLayouts(t *testing.T) {
	for _, c := range layoutCases {
		t.Run(c.typ.String(), func(t *testing.T) {
			got := dequantize(t, c.typ, c.block())
			for e, g := range got {
				want, probed := c.probes[e]
				if !probed {
					want = c.def(e)
				}
				if g != want {
					t.Errorf("element %d: got %v, want %v (probe: %v)", e, g, want, probed)
				}
			}
		})
	}
}

func TestScaleUnpacking(t *testing.T) {
	for j := range 8 {
		sc, m := scaleMinK4(j, k4Scales)
		if sc != k4Sc[j] || m != k4M[j] {
			t.Errorf("scaleMinK4(%d) = %d, %d; want %d, %d", j, sc, m, k4Sc[j], k4M[j])
		}
	}
	packed := make([]byte, 12)
	for j := range 8 {
		putScaleMinK4(j, packed, k4Sc[j], k4M[j])
	}
	if !bytes.Equal(packed, k4Scales) {
		t.Errorf("putScaleMinK4 packed % x, want % x", packed, k4Scales)
	}
	if got := q3KScales(q3Scales); got != q3Sc {
		t.Errorf("q3KScales = %v, want %v", got, q3Sc)
	}
}

// ---- agreement with ggml ----

// testdata/kquants holds what ggml's own functions produce (see its
// README): quantize_row_q*_K_ref of input.f32 (T.bin), of ggml's
// dequantization of T.bin (T.requant.bin), and SHA-256 digests of
// dequantize_row_q*_K over T.bin and over random blocks (T.random.bin).
// Run under GOAMD64=v3 too: a product left unrounded before a sum becomes
// an FMA there and shows here as differing bytes.
func TestKQuantsMatchGGML(t *testing.T) {
	dir := filepath.Join("testdata", "kquants")
	input := readF32(t, filepath.Join(dir, "input.f32"))
	digests := readDigests(t, filepath.Join(dir, "dequant.sha256"))
	for _, typ := range kTypes {
		t.Run(typ.String(), func(t *testing.T) {
			want := readFile(t, filepath.Join(dir, typ.String()+".bin"))
			got := quantize(t, typ, input)
			compareBlocks(t, typ, "quantize input.f32", got, want)

			deq := dequantize(t, typ, want)
			checkDigest(t, digests, typ.String()+".bin", deq)
			random := readFile(t, filepath.Join(dir, typ.String()+".random.bin"))
			checkDigest(t, digests, typ.String()+".random.bin", dequantize(t, typ, random))

			requant := readFile(t, filepath.Join(dir, typ.String()+".requant.bin"))
			compareBlocks(t, typ, "quantize its dequantization", quantize(t, typ, deq), requant)
		})
	}
}

func compareBlocks(t *testing.T, typ gguf.Type, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, ggml %d", what, len(got), len(want))
	}
	info, _ := typ.Info()
	bs := int(info.BlockBytes)
	var bad []string
	for i := 0; i < len(got); i += bs {
		if j := firstDiff(got[i:i+bs], want[i:i+bs]); j >= 0 {
			bad = append(bad, fmt.Sprintf("block %d byte %d: %#02x, ggml %#02x", i/bs, j, got[i+j], want[i+j]))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: %d of %d blocks differ from ggml: %s", what, len(bad), len(got)/bs, strings.Join(bad, "; "))
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func checkDigest(t *testing.T, digests map[string]string, name string, y []float32) {
	t.Helper()
	h := sha256.New()
	_ = binary.Write(h, binary.LittleEndian, y)
	if got, want := hex.EncodeToString(h.Sum(nil)), digests[name]; got != want {
		t.Errorf("dequantize %s: digest %s, ggml %s", name, got, want)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readF32(t *testing.T, path string) []float32 {
	b := readFile(t, path)
	x := make([]float32, len(b)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

func readDigests(t *testing.T, path string) map[string]string {
	out := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	return out
}

// ---- round trips ----

// Relative RMSE (RMSE over the data's RMS) of quantize → dequantize on
// N(0,1) data, 256 super-blocks. Measured: Q2_K 0.295, Q3_K 0.151, Q4_K
// 0.0713, Q5_K 0.0362, Q6_K 0.0177, Q8_K 0.0070; the bounds leave ~5%.
var roundTripBound = map[gguf.Type]float64{
	gguf.TypeQ2_K: 0.31, gguf.TypeQ3_K: 0.16, gguf.TypeQ4_K: 0.075,
	gguf.TypeQ5_K: 0.038, gguf.TypeQ6_K: 0.0186, gguf.TypeQ8_K: 0.0074,
}

func relRMSE(x, y []float32) float64 {
	var se, ss float64
	for i := range x {
		d := float64(y[i]) - float64(x[i])
		se += d * d
		ss += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(se / ss)
}

func TestKQuantRoundTrip(t *testing.T) {
	for _, sigma := range []float64{1, 0.02} { // unit and weight-like scales
		x := gaussianK(1, 256*qkK, sigma)
		prev := 0.0
		for _, typ := range []gguf.Type{gguf.TypeQ8_K, gguf.TypeQ6_K, gguf.TypeQ5_K, gguf.TypeQ4_K, gguf.TypeQ3_K, gguf.TypeQ2_K} {
			e := relRMSE(x, dequantize(t, typ, quantize(t, typ, x)))
			t.Logf("σ=%g %s: relative RMSE %.4f", sigma, typ, e)
			if e > roundTripBound[typ] {
				t.Errorf("σ=%g %s: relative RMSE %.4f above %.4f", sigma, typ, e, roundTripBound[typ])
			}
			if e <= prev {
				t.Errorf("σ=%g %s: relative RMSE %.4f not above the finer type's %.4f", sigma, typ, e, prev)
			}
			prev = e
		}
	}
}

func TestQ8KBlockSums(t *testing.T) {
	b := quantize(t, gguf.TypeQ8_K, gaussianK(2, 4*qkK, 1))
	for blk := 0; blk < len(b); blk += q8KBytes {
		for g := range 16 {
			var sum int
			for _, q := range b[blk+4+16*g : blk+4+16*g+16] {
				sum += int(int8(q))
			}
			if got := int(int16(binary.LittleEndian.Uint16(b[blk+260+2*g:]))); got != sum {
				t.Errorf("block %d bsums[%d] = %d, want %d", blk/q8KBytes, g, got, sum)
			}
		}
	}
}

// Quantizing an already dequantized row: Q4_K and Q6_K give back exactly
// the same values (their searches find the grid the values lie on), Q8_K
// the same quants with d recomputed to within an ulp. ggml's searches do
// not promise it for the others, and they do not deliver: Q2_K moves a few
// values, Q5_K some, and Q3_K many (make_q3_quants' element-by-element
// moves start from −4/max and need not return to the grid). For those the
// test holds the second pass to the first pass's error budget.
func TestKQuantRequantize(t *testing.T) {
	x := gaussianK(3, 64*qkK, 1)
	for _, typ := range kTypes {
		y := dequantize(t, typ, quantize(t, typ, x))
		y2 := dequantize(t, typ, quantize(t, typ, y))
		switch typ {
		case gguf.TypeQ4_K, gguf.TypeQ6_K:
			for i := range y {
				if y2[i] != y[i] {
					t.Fatalf("%s: element %d requantizes to %v, was %v", typ, i, y2[i], y[i])
				}
			}
		case gguf.TypeQ8_K:
			for i := range y {
				if d := math.Abs(float64(y2[i] - y[i])); d > 2*ulp(y[i]) {
					t.Fatalf("%s: element %d requantizes to %v, was %v", typ, i, y2[i], y[i])
				}
			}
		default:
			if e := relRMSE(y, y2); e > roundTripBound[typ] {
				t.Errorf("%s: requantization moves the values by %.4f (relative RMSE)", typ, e)
			}
		}
	}
}

func ulp(f float32) float64 {
	a := math.Abs(float64(f))
	return float64(math.Nextafter32(float32(a), float32(math.Inf(1)))) - a
}

// ---- awkward input ----

func TestKQuantAwkwardInput(t *testing.T) {
	zeros := make([]float32, 2*qkK)
	outlier := make([]float32, 2*qkK)
	outlier[77] = 100
	tiny := gaussianK(4, 2*qkK, 1e-30) // below f16 and GROUP_MAX_EPS
	nan := gaussianK(5, 2*qkK, 1)
	nan[3], nan[300] = float32(math.NaN()), float32(math.Inf(-1))
	inf := make([]float32, 2*qkK)
	inf[10] = float32(math.Inf(1))
	huge := gaussianK(6, 2*qkK, 1e38)

	for _, typ := range kTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for i, v := range dequantize(t, typ, quantize(t, typ, zeros)) {
				if v != 0 {
					t.Fatalf("zeros: element %d decodes to %v", i, v)
				}
			}
			for i, v := range dequantize(t, typ, quantize(t, typ, tiny)) {
				if math.Abs(float64(v)) > 1e-29 {
					t.Fatalf("tiny: element %d decodes to %v", i, v)
				}
			}
			y := dequantize(t, typ, quantize(t, typ, outlier))
			for i, v := range y {
				want := float64(outlier[i])
				if math.Abs(float64(v)-want) > 100*0.17 { // at worst half a Q2_K step
					t.Errorf("outlier row: element %d decodes to %v, want about %v", i, v, want)
				}
			}
			// Non-finite and out-of-range rows quantize to something; the
			// point is that nothing panics and the lengths hold.
			for _, x := range [][]float32{nan, inf, huge} {
				if got := dequantize(t, typ, quantize(t, typ, x)); len(got) != len(x) {
					t.Fatalf("got %d values", len(got))
				}
			}
		})
	}
}

func TestKQuantLengthErrors(t *testing.T) {
	if err := Quantize(gguf.TypeQ4_K, make([]byte, 144), make([]float32, 255)); err == nil || !strings.Contains(err.Error(), "not a multiple of Q4_K's block of 256") {
		t.Errorf("255 elements: %v", err)
	}
	if err := Dequantize(gguf.TypeQ6_K, make([]float32, 256), make([]byte, 209)); err == nil || !strings.Contains(err.Error(), "take 210 bytes") {
		t.Errorf("short Q6_K block: %v", err)
	}
	// Called directly with mismatched lengths, a codec does what fits.
	f, _ := Lookup(gguf.TypeQ2_K)
	f.Dequantize(make([]float32, 512), make([]byte, 100))
	f.Quantize(make([]byte, 100), make([]float32, 600))
}

func TestKQuantsRegistered(t *testing.T) {
	sizes := []int{q2KBytes, q3KBytes, q4KBytes, q5KBytes, q6KBytes, q8KBytes}
	for i, typ := range kTypes {
		f, ok := Lookup(typ)
		if !ok || f.Quantize == nil || f.Dequantize == nil {
			t.Errorf("%s: not registered for both directions", typ)
		}
		if info, _ := typ.Info(); info.BlockSize != qkK || int(info.BlockBytes) != sizes[i] {
			t.Errorf("%s: gguf says %d elements in %d bytes, this file %d in %d", typ, info.BlockSize, info.BlockBytes, qkK, sizes[i])
		}
	}
	if w := Names(Writable()); !strings.Contains(w, "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K") {
		t.Errorf("Writable() = %s", w)
	}
}

// ---- fuzzing ----

// FuzzKQuants decodes arbitrary bytes as every k-quant and quantizes
// arbitrary float32 bit patterns; neither may panic.
func FuzzKQuants(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0xFF}, 292))
	f.Add(bytes.Repeat([]byte{0x7C, 0x00}, 512))
	f.Add(make([]byte, 1024))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range kTypes {
			info, _ := typ.Info()
			bs := int(info.BlockBytes)
			n := len(data) / bs
			y := make([]float32, n*qkK)
			if err := Dequantize(typ, y, data[:n*bs]); err != nil {
				t.Fatal(err)
			}

			x := make([]float32, (len(data)/4+qkK-1)/qkK*qkK)
			for i := 0; i+4 <= len(data); i += 4 {
				x[i/4] = math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
			}
			b := make([]byte, len(x)/qkK*bs)
			f, _ := Lookup(typ)
			f.Quantize(b, x) // the codec itself: random bits include NaN and ±Inf
		}
	})
}

// Speed: BenchmarkDequantize and BenchmarkQuantize (bench_test.go) cover
// every registered type, the k-quants included.
