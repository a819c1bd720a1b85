package quant

import (
	"strings"
	"testing"

	"ringlm/gguf"
)

func TestPlainTypesRoundTrip(t *testing.T) {
	src := []float32{0, 1, -2.5, 3.140625, -65504, 1e-3}
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16} {
		n, _ := typ.RowBytes(uint64(len(src)))
		buf := make([]byte, n)
		if err := Quantize(typ, buf, src); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(src))
		if err := Dequantize(typ, got, buf); err != nil {
			t.Fatal(err)
		}
		for i := range src {
			want := src[i]
			switch typ {
			case gguf.TypeF16:
				want = gguf.F16ToF32(gguf.F32ToF16(want))
			case gguf.TypeBF16:
				want = gguf.BF16ToF32(gguf.F32ToBF16(want))
			}
			if got[i] != want {
				t.Errorf("%s[%d]: got %v, want %v", typ, i, got[i], want)
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	if err := Dequantize(gguf.TypeIQ1_S, make([]float32, 256), make([]byte, 50)); err == nil || !strings.Contains(err.Error(), "IQ1_S is not read") {
		t.Errorf("IQ1_S: %v", err)
	}
	if err := Dequantize(gguf.TypeF16, make([]float32, 4), make([]byte, 7)); err == nil || !strings.Contains(err.Error(), "take 8 bytes") {
		t.Errorf("short F16: %v", err)
	}
	if err := Quantize(gguf.Type(99), nil, nil); err == nil {
		t.Error("unknown type accepted")
	}
}
