package quantize

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"

	"ringlm/gguf"
)

// seedModel is a one-layer llama small enough to fuzz: F16 matrices of
// width 32, an F32 norm, its own output head.
func seedModel(tb testing.TB, nan bool) []byte {
	tb.Helper()
	w := gguf.NewWriter()
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: gguf.String("llama")},
		{Key: "llama.context_length", Value: gguf.Uint32(64)},
		{Key: "llama.embedding_length", Value: gguf.Uint32(32)},
		{Key: "llama.block_count", Value: gguf.Uint32(1)},
		{Key: "llama.feed_forward_length", Value: gguf.Uint32(64)},
		{Key: "llama.attention.head_count", Value: gguf.Uint32(2)},
		{Key: "general.file_type", Value: gguf.Uint32(1)},
	} {
		w.Set(kv.Key, kv.Value)
	}
	add := func(name string, typ gguf.Type, dims ...uint64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(math.Sin(float64(i))) / 4
		}
		if nan {
			x[len(x)-1] = float32(math.NaN())
		}
		b := make([]byte, n*uint64(map[gguf.Type]int{gguf.TypeF16: 2, gguf.TypeF32: 4}[typ]))
		gguf.EncodeF32(typ, b, x)
		if err := w.AddTensor(name, typ, dims, b); err != nil {
			tb.Fatal(err)
		}
	}
	add("token_embd.weight", gguf.TypeF16, 32, 8)
	add("blk.0.attn_norm.weight", gguf.TypeF32, 32)
	add("blk.0.attn_v.weight", gguf.TypeF16, 32, 32)
	add("blk.0.ffn_down.weight", gguf.TypeF16, 64, 32)
	add("output.weight", gguf.TypeF16, 32, 8)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Whatever the input, planning and writing return an error of one line or
// a file that reads back; nothing panics.
func FuzzQuantize(f *testing.F) {
	good := seedModel(f, false)
	f.Add(good, "Q8_0")
	f.Add(good, "BF16")
	f.Add(seedModel(f, true), "Q8_0")
	for _, n := range []int{0, 4, 24, len(good) / 2, len(good) - 1} {
		f.Add(good[:n], "Q8_0")
	}
	// Flip the F16 type of a tensor info to Q8_0, IQ2_XXS and an unknown id.
	for _, typ := range []uint32{8, 16, 99} {
		b := bytes.Clone(good)
		if i := bytes.Index(b, []byte("blk.0.attn_v.weight")); i >= 0 {
			binary.LittleEndian.PutUint32(b[i+len("blk.0.attn_v.weight")+4+16:], typ)
		}
		f.Add(b, "Q8_0")
	}
	f.Fuzz(func(t *testing.T, b []byte, mixName string) {
		mix, ok := ParseMix(mixName)
		if !ok {
			return
		}
		pf, err := gguf.Parse(b)
		if err != nil {
			return // gguf's own fuzzing covers its errors
		}
		p, err := NewPlan(pf, Options{Mix: mix, Threads: 2})
		oneLine(t, err)
		if err != nil {
			return
		}
		w, err := p.Writer(context.Background())
		oneLine(t, err)
		if err != nil {
			return
		}
		var out bytes.Buffer
		_, err = w.WriteTo(&out)
		oneLine(t, err)
		if err != nil {
			return
		}
		if _, err := gguf.Parse(out.Bytes()); err != nil {
			t.Fatalf("the output does not read back: %v", err)
		}
		io.Discard.Write(out.Bytes())
	})
}

func oneLine(t *testing.T, err error) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), "\n") || err.Error() == "") {
		t.Fatalf("error of several lines: %q", err)
	}
}

// The seeds themselves: the good model converts, the NaN one and the
// flipped types are refused with one line.
func TestFuzzSeeds(t *testing.T) {
	pf, err := gguf.Parse(seedModel(t, false))
	if err != nil {
		t.Fatal(err)
	}
	mix, _ := ParseMix("Q8_0")
	p, err := NewPlan(pf, Options{Mix: mix})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := p.Writer(context.Background())
	if _, err := w.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	pf, _ = gguf.Parse(seedModel(t, true))
	p, err = NewPlan(pf, Options{Mix: mix})
	if err != nil {
		t.Fatal(err)
	}
	w, _ = p.Writer(context.Background())
	if _, err := w.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "holds NaN") {
		t.Errorf("NaN: %v", err)
	}
}
