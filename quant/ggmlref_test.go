package quant

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"strings"
	"testing"

	"ringlm/gguf"
)

// refCase is one type's section of testdata/ggml_ref.txt.
type refCase struct {
	typ     gguf.Type
	quant   []byte    // ggml's quantization of the shared input
	bytes   []byte    // random blocks
	dequant []float32 // ggml's decoding of bytes
}

func floatsLE(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func loadGGMLRef(t *testing.T) (in []float32, cases []refCase, digests map[string]string) {
	t.Helper()
	f, err := os.Open("testdata/ggml_ref.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	digests = map[string]string{}
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), " ")
		if key == "digest" {
			name, sum, _ := strings.Cut(val, " ")
			digests[name] = sum
			continue
		}
		if key == "type" {
			typ, ok := gguf.ParseType(val)
			if !ok {
				t.Fatalf("unknown type %q", val)
			}
			cases = append(cases, refCase{typ: typ})
			continue
		}
		if key == "" || key == "#" {
			continue
		}
		b, err := hex.DecodeString(val)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		switch key {
		case "in":
			in = floatsLE(b)
		case "quant":
			cases[len(cases)-1].quant = b
		case "bytes":
			cases[len(cases)-1].bytes = b
		case "dequant":
			cases[len(cases)-1].dequant = floatsLE(b)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(in) == 0 || len(cases) != 8 {
		t.Fatalf("ggml_ref.txt: %d inputs, %d types", len(in), len(cases))
	}
	return in, cases, digests
}

// TestMatchesGGML holds every Quantize and Dequantize of this family to the
// bytes and floats ggml's reference functions produced for the same input.
func TestMatchesGGML(t *testing.T) {
	in, cases, _ := loadGGMLRef(t)
	for _, c := range cases {
		t.Run(c.typ.String(), func(t *testing.T) {
			got := make([]byte, len(c.quant))
			if err := Quantize(c.typ, got, in); err != nil {
				t.Fatal(err)
			}
			info, _ := c.typ.Info()
			bs := int(info.BlockBytes)
			for b := 0; b < len(got); b += bs {
				if string(got[b:b+bs]) != string(c.quant[b:b+bs]) {
					t.Errorf("block %d:\n got %x\nwant %x", b/bs, got[b:b+bs], c.quant[b:b+bs])
				}
			}
			y := make([]float32, len(c.dequant))
			if err := Dequantize(c.typ, y, c.bytes); err != nil {
				t.Fatal(err)
			}
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(c.dequant[i]) && !(y[i] != y[i] && c.dequant[i] != c.dequant[i]) {
					t.Errorf("dequantize element %d: got %v, want %v", i, y[i], c.dequant[i])
				}
			}
		})
	}
}

// refDigestInput builds the row behind the digests of ggml_ref.txt: blocks
// of 32 of four kinds (uniform, a sum of four uniforms, 5% outliers of 30×,
// halves on a grid), each at a scale 2^-16…2^7 times 1…1.9375. Every
// operation is exact or correctly rounded (xorshift64, 24-bit draws whose
// sums are exact, one float64→float32 conversion, one float32 product) and
// the draws come in one fixed order, so the harness that ran ggml built the
// same floats.
func refDigestInput(n int) []float32 {
	s := uint64(0x2545F4914F6CDD1D)
	next := func() uint64 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return s
	}
	u := func() float64 { return float64(next()>>40) * 0x1p-24 }
	x := make([]float32, n)
	for i := 0; i < n; i += 32 {
		kind := next() % 4
		m := 1 + float32(next()%16)/16
		scale := float32(math.Ldexp(float64(m), int(next()%24)-16))
		for j := range 32 {
			var v float64
			switch kind {
			case 0:
				v = 2*u() - 1
			case 1:
				a := u()
				a += u()
				a += u()
				a += u()
				v = a - 2
			case 2:
				if u() < 0.05 {
					v = 30 * (2*u() - 1)
				} else {
					v = 2*u() - 1
				}
			default:
				v = float64(int(next()%33)-16) * 0.5
			}
			x[i+j] = float32(float32(v) * scale)
		}
	}
	return x
}

// TestMatchesGGMLDigest quantizes a row of 2^18 elements with every type
// and compares the SHA-256 of the bytes with ggml's: a difference in a
// single block, however rare the rounding case that causes it, shows.
func TestMatchesGGMLDigest(t *testing.T) {
	_, _, digests := loadGGMLRef(t)
	x := refDigestInput(1 << 18)
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	if got := sha256.Sum256(raw); hex.EncodeToString(got[:]) != digests["input"] {
		t.Fatalf("the input row differs from the harness's: %x", got)
	}
	for _, typ := range myTypes {
		q, _ := roundTrip(t, typ, x)
		if got := sha256.Sum256(q); hex.EncodeToString(got[:]) != digests[typ.String()] {
			t.Errorf("%s: quantized bytes differ from ggml's (sha256 %x)", typ, got)
		}
	}
}
