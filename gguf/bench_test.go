package gguf

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"unsafe"
)

// modelSpec is a llama-style layout: the tensor names, kinds and
// metadata llama.cpp writes for Llama 3.2 1B, with sizes as parameters.
type modelSpec struct {
	vocab, dim, kvDim, ffn, layers int
	pattern                        bool // fill data with a position-dependent pattern (else zeros)
}

// bench1GB keeps Llama 3.2 1B's vocabulary (128256 tokens), 16 layers
// and 148 tensors, with the width narrowed from 2048 to 1536 (FFN 3072)
// so the F16 weights total about 1 GB rather than 2.5.
var bench1GB = modelSpec{vocab: 128256, dim: 1536, kvDim: 384, ffn: 3072, layers: 16}

// small is the same layout at test size.
var small = modelSpec{vocab: 1000, dim: 64, kvDim: 16, ffn: 96, layers: 2, pattern: true}

type specTensor struct {
	name string
	typ  Type
	dims []uint64
}

func (s modelSpec) tensors() []specTensor {
	d, kv, ff := uint64(s.dim), uint64(s.kvDim), uint64(s.ffn)
	ts := []specTensor{
		{"rope_freqs.weight", TypeF32, []uint64{32}},
		{"token_embd.weight", TypeF16, []uint64{d, uint64(s.vocab)}},
	}
	for l := range s.layers {
		p := "blk." + strconv.Itoa(l) + "."
		ts = append(ts,
			specTensor{p + "attn_norm.weight", TypeF32, []uint64{d}},
			specTensor{p + "attn_q.weight", TypeF16, []uint64{d, d}},
			specTensor{p + "attn_k.weight", TypeF16, []uint64{d, kv}},
			specTensor{p + "attn_v.weight", TypeF16, []uint64{d, kv}},
			specTensor{p + "attn_output.weight", TypeF16, []uint64{d, d}},
			specTensor{p + "ffn_norm.weight", TypeF32, []uint64{d}},
			specTensor{p + "ffn_gate.weight", TypeF16, []uint64{d, ff}},
			specTensor{p + "ffn_up.weight", TypeF16, []uint64{d, ff}},
			specTensor{p + "ffn_down.weight", TypeF16, []uint64{ff, d}},
		)
	}
	return append(ts, specTensor{"output_norm.weight", TypeF32, []uint64{d}})
}

// tokens makes a BPE-like vocabulary: byte-level pieces, words with the
// "Ġ" space marker, special tokens at the end.
func (s modelSpec) tokens() []string {
	toks := make([]string, s.vocab)
	for i := range toks {
		switch {
		case i < 256:
			toks[i] = string(rune(0x100 + i))
		case i >= s.vocab-256:
			toks[i] = "<|reserved_special_token_" + strconv.Itoa(i-(s.vocab-256)) + "|>"
		case i%3 == 0:
			toks[i] = "Ġ" + strconv.FormatInt(int64(i)*7919, 36)
		default:
			toks[i] = strconv.FormatInt(int64(i)*104729, 36)
		}
	}
	return toks
}

func (s modelSpec) write(path string) error {
	w := NewWriter()
	w.Set("general.architecture", String("llama"))
	w.Set("general.name", String("Llama-3.2-1B layout (gguf benchmark)"))
	w.Set("general.file_type", Uint32(1))
	w.Set("llama.block_count", Uint32(uint32(s.layers)))
	w.Set("llama.context_length", Uint32(131072))
	w.Set("llama.embedding_length", Uint32(uint32(s.dim)))
	w.Set("llama.feed_forward_length", Uint32(uint32(s.ffn)))
	w.Set("llama.attention.head_count", Uint32(32))
	w.Set("llama.attention.head_count_kv", Uint32(uint32(32*s.kvDim/s.dim)))
	w.Set("llama.rope.freq_base", Float32(500000))
	w.Set("llama.attention.layer_norm_rms_epsilon", Float32(1e-5))
	w.Set("llama.vocab_size", Uint32(uint32(s.vocab)))
	w.Set("tokenizer.ggml.model", String("gpt2"))
	w.Set("tokenizer.ggml.pre", String("llama-bpe"))
	toks := s.tokens()
	w.Set("tokenizer.ggml.tokens", Strings(toks))
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = 1
		if i >= len(toks)-256 {
			types[i] = 3
		}
	}
	w.Set("tokenizer.ggml.token_type", Int32s(types))
	w.Set("tokenizer.ggml.bos_token_id", Uint32(uint32(s.vocab-256)))
	w.Set("tokenizer.ggml.eos_token_id", Uint32(uint32(s.vocab-255)))
	w.Set("tokenizer.chat_template", String("{% for m in messages %}{{ m.content }}{% endfor %}"))

	zeros := make([]byte, 1<<20)
	for _, t := range s.tensors() {
		n := uint64(1)
		for _, d := range t.dims {
			n *= d
		}
		size, err := t.typ.RowBytes(n)
		if err != nil {
			return err
		}
		seed := byte(len(t.name))
		fill := func(out io.Writer) error {
			for left := size; left > 0; {
				chunk := zeros[:min(left, uint64(len(zeros)))]
				if s.pattern {
					chunk = pattern(len(chunk), seed)
				}
				if _, err := out.Write(chunk); err != nil {
					return err
				}
				left -= uint64(len(chunk))
			}
			return nil
		}
		if err := w.AddTensorFunc(t.name, t.typ, t.dims, fill, size); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// cachedModel returns the path of the spec's file in the system temporary
// directory, writing it only when no complete copy is there already: the
// 1 GB file takes seconds to write and is reused across benchmark runs.
func cachedModel(tb testing.TB, s modelSpec) string {
	tb.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("ringlm-gguf-bench-v1-%d-%d-%d-%d-%d-%t.gguf",
		s.vocab, s.dim, s.kvDim, s.ffn, s.layers, s.pattern))
	if checkModel(path, s) == nil {
		return path
	}
	if err := s.write(path); err != nil {
		tb.Fatal(err)
	}
	if err := checkModel(path, s); err != nil {
		tb.Fatal(err)
	}
	return path
}

// checkModel opens path and checks it holds the spec's tensors, whole.
func checkModel(path string, s modelSpec) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	want := s.tensors()
	if len(f.Tensors) != len(want) {
		return fmt.Errorf("%s: %d tensors, want %d", path, len(f.Tensors), len(want))
	}
	for i, t := range want {
		if got := f.Tensors[i]; got.Name != t.name || got.Type != t.typ || fmt.Sprint(got.Dims) != fmt.Sprint(t.dims) {
			return fmt.Errorf("%s: tensor %d is %s %s %v, want %s %s %v", path, i, got.Name, got.Type, got.Dims, t.name, t.typ, t.dims)
		}
	}
	return nil
}

// openAndIndex is what the benchmark times: map the file, parse its
// header, look up every tensor by name and take its data view.
func openAndIndex(path string, names []string) (int, error) {
	f, err := Open(path)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range names {
		ti, ok := f.Tensor(name)
		if !ok {
			f.Close()
			return 0, fmt.Errorf("tensor %q missing", name)
		}
		total += len(f.Data(ti))
	}
	return total, f.Close()
}

func benchmarkOpen(b *testing.B, s modelSpec) {
	path := cachedModel(b, s)
	var names []string
	for _, t := range s.tensors() {
		names = append(names, t.name)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		n, err := openAndIndex(path, names)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 || int64(n) > st.Size() {
			b.Fatalf("%d tensor bytes in a %d-byte file", n, st.Size())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
	b.ReportMetric(float64(st.Size())/1e9, "GB-file")
}

// BenchmarkOpen1GB: goal < 50 ms per Open + index + Close of a 1 GB model.
func BenchmarkOpen1GB(b *testing.B) { benchmarkOpen(b, bench1GB) }

func BenchmarkOpenSmall(b *testing.B) { benchmarkOpen(b, small) }

// TestOpenModelLayout runs the benchmark's layout at test size and checks
// what the benchmark takes on trust: every tensor found, its bytes the
// ones written, and Data a view into the mapping, not a copy.
func TestOpenModelLayout(t *testing.T) {
	s := small
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := s.write(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || !slices.Equal(toks, s.tokens()) {
		t.Fatalf("tokens: %v", err)
	}
	h, err := f.Hparams()
	if err != nil || h.BlockCount != uint32(s.layers) || h.HeadCountKV != 8 || h.VocabSize != uint32(s.vocab) {
		t.Fatalf("hparams %+v: %v", h, err)
	}
	lo, hi := uintptr(unsafe.Pointer(&f.buf[0])), uintptr(unsafe.Pointer(&f.buf[len(f.buf)-1]))
	for _, want := range s.tensors() {
		ti, ok := f.Tensor(want.name)
		if !ok {
			t.Fatalf("tensor %q missing", want.name)
		}
		d := f.Data(ti)
		if p := uintptr(unsafe.Pointer(&d[0])); p < lo || p > hi || p != lo+uintptr(f.DataOffset+ti.Offset) {
			t.Fatalf("tensor %q: data is not a view of the mapping", want.name)
		}
		// The fill restarts its pattern every 1 MiB chunk.
		if exp := pattern(min(len(d), 1<<20), byte(len(want.name))); !bytes.Equal(d[:len(exp)], exp) {
			t.Fatalf("tensor %q: data differs from what was written", want.name)
		}
	}
	names := make([]string, 0, len(f.Tensors))
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	if _, err := openAndIndex(path, names); err != nil {
		t.Fatal(err)
	}
}
