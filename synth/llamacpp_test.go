package synth

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/quantize"
	"ringlm/tokenizer"
)

// openHeader writes w's header to a sparse file (the tensor data left a
// hole: CheckLlamaCpp reads metadata and tensor infos only) and opens it.
func openHeader(t *testing.T, w *gguf.Writer) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	size, err := w.WriteHeader(fh)
	if err == nil {
		err = fh.Truncate(size)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Every file synth writes passes llama.cpp's loading rules (CheckLlamaCpp):
// tiny of each architecture in float, Q8_0 and a Q4_K_M mix, phi3 with a
// window shorter than its context and with none, and every named preset.
func TestLlamaCppLoadsSynth(t *testing.T) {
	type tc struct {
		name string
		o    Options
	}
	var cases []tc
	for _, arch := range Archs {
		s, _ := Lookup("tiny", arch)
		cases = append(cases,
			tc{"tiny-" + arch + "-f32", Options{Shape: s, Type: gguf.TypeF32}},
			tc{"tiny-" + arch + "-q8_0", Options{Shape: s, Type: gguf.TypeQ8_0}},
			tc{"tiny-" + arch + "-Q4_K_M", Options{Shape: s, Mix: "Q4_K_M"}})
	}
	for _, win := range []int{0, 8} {
		s, _ := Lookup("tiny", "phi3")
		s.SlidingWindow = win
		cases = append(cases, tc{fmt.Sprintf("tiny-phi3-window-%d", win), Options{Shape: s, Type: gguf.TypeF16}})
	}
	for _, name := range PresetNames()[1:] {
		s, _ := Lookup(name, "")
		cases = append(cases, tc{name, Options{Shape: s, Type: gguf.TypeF16}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Build(c.o)
			if err != nil {
				t.Fatal(err)
			}
			f := openHeader(t, w)
			if err := CheckLlamaCpp(f); err != nil {
				t.Fatal(err)
			}
			if c.o.Shape.Arch == "phi3" {
				v, _ := f.Get("phi3.attention.sliding_window")
				want := c.o.Shape.SlidingWindow
				if want == 0 {
					want = c.o.Shape.Context
				}
				if u, _ := v.Raw().(uint32); int(u) != want {
					t.Fatalf("phi3.attention.sliding_window %v, want %d", v, want)
				}
			}
		})
	}
}

// ringlm quantize's output of a synth file passes the same rules, and
// carries the input's metadata with llama-quantize's two changes: the
// input's keys in order with their types, then general.quantization_version
// 2 and general.file_type.
func TestLlamaCppLoadsQuantized(t *testing.T) {
	for _, arch := range Archs {
		t.Run(arch, func(t *testing.T) {
			s, _ := Lookup("tiny", arch)
			_, in := writeModel(t, Options{Shape: s, Type: gguf.TypeF16, Seed: 3})
			src, err := gguf.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			for _, mix := range []string{"Q4_K_M", "Q8_0"} {
				m, _ := quantize.ParseMix(mix)
				out := filepath.Join(t.TempDir(), mix+".gguf")
				if _, err := quantize.Run(context.Background(), in, out, quantize.Options{Mix: m}); err != nil {
					t.Fatal(err)
				}
				f, err := gguf.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				if err := CheckLlamaCpp(f); err != nil {
					t.Fatalf("%s: %v", mix, err)
				}
				var want []gguf.KV
				for _, kv := range src.KVs {
					if kv.Key != "general.file_type" && kv.Key != "general.quantization_version" {
						want = append(want, kv)
					}
				}
				want = append(want, gguf.KV{Key: "general.quantization_version", Value: gguf.Uint32(2)},
					gguf.KV{Key: "general.file_type", Value: gguf.Uint32(m.FileType)})
				if !reflect.DeepEqual(f.KVs, want) {
					t.Fatalf("%s: metadata is not the input's with llama-quantize's two keys", mix)
				}
				f.Close()
			}
		})
	}
}

// CheckLlamaCpp finds each way a file breaks llama.cpp's rules, in one
// line naming the key or tensor.
func TestCheckLlamaCppCatches(t *testing.T) {
	shape := func(arch string) Shape {
		s, _ := Lookup("tiny", arch)
		s.Layers = 1
		return s
	}
	tokens := func(w *gguf.Writer) []string {
		for _, kv := range w.KVs() {
			if kv.Key == "tokenizer.ggml.tokens" {
				s, _ := kv.Value.StringSlice()
				return slices.Clone(s)
			}
		}
		return nil
	}
	for _, arch := range Archs {
		w, err := Build(Options{Shape: shape(arch), Type: gguf.TypeF16})
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckLlamaCpp(openHeader(t, w)); err != nil {
			t.Fatalf("%s unedited: %v", arch, err)
		}
	}
	cases := []struct {
		name  string
		shape Shape
		edit  func(w *gguf.Writer)
		want  string
	}{
		{"phi3 without its window", shape("phi3"), func(w *gguf.Writer) { w.Delete("phi3.attention.sliding_window") },
			"phi3 without phi3.attention.sliding_window"},
		{"window as i32", shape("phi3"), func(w *gguf.Writer) { w.Set("phi3.attention.sliding_window", gguf.Int32(64)) },
			"phi3.attention.sliding_window is i32, want u32"},
		{"context as u64", shape("llama"), func(w *gguf.Writer) { w.Set("llama.context_length", gguf.Uint64(2048)) },
			"llama.context_length is u64, want u32"},
		{"no norm epsilon", shape("qwen2"), func(w *gguf.Writer) { w.Delete("qwen2.attention.layer_norm_rms_epsilon") },
			"missing qwen2.attention.layer_norm_rms_epsilon"},
		{"no architecture", shape("llama"), func(w *gguf.Writer) { w.Delete("general.architecture") },
			"general.architecture \"\""},
		{"unknown architecture", shape("llama"), func(w *gguf.Writer) { w.Set("general.architecture", gguf.String("llama4")) },
			"general.architecture \"llama4\""},
		{"add_bos_token as u8", shape("llama"), func(w *gguf.Writer) { w.Set("tokenizer.ggml.add_bos_token", gguf.Uint8(1)) },
			"tokenizer.ggml.add_bos_token is u8, want bool"},
		{"bos id as i32", shape("llama"), func(w *gguf.Writer) { w.Set("tokenizer.ggml.bos_token_id", gguf.Int32(1)) },
			"tokenizer.ggml.bos_token_id is i32, want u32"},
		{"token types as u8", shape("llama"), func(w *gguf.Writer) { w.Set("tokenizer.ggml.token_type", gguf.Uint8s(make([]uint8, 512))) },
			"tokenizer.ggml.token_type is arr of u8, want an array of i32"},
		{"no merges", shape("llama"), func(w *gguf.Writer) { w.Delete("tokenizer.ggml.merges") },
			"without tokenizer.ggml.merges"},
		{"no tokens", shape("llama"), func(w *gguf.Writer) { w.Delete("tokenizer.ggml.tokens") },
			"missing tokenizer.ggml.tokens"},
		{"duplicate token", shape("llama"), func(w *gguf.Writer) {
			tk := tokens(w)
			tk[300] = tk[299]
			w.Set("tokenizer.ggml.tokens", gguf.Strings(tk))
		}, "is token 299 and 300"},
		{"short token types", shape("llama"), func(w *gguf.Writer) { w.Set("tokenizer.ggml.token_type", gguf.Int32s(make([]int32, 10))) },
			"tokenizer.ggml.token_type has 10 entries for 512 tokens"},
		{"eos out of range", shape("qwen2"), func(w *gguf.Writer) { w.Set("tokenizer.ggml.eos_token_id", gguf.Uint32(512)) },
			"tokenizer.ggml.eos_token_id = 512 is outside the 512 tokens"},
		{"llama rope dims", shape("llama"), func(w *gguf.Writer) { w.Set("llama.rope.dimension_count", gguf.Uint32(16)) },
			"invalid n_rot"},
		{"vocab size", shape("llama"), func(w *gguf.Writer) { w.Set("llama.vocab_size", gguf.Uint32(600)) },
			"llama.vocab_size 600, but 512 tokens"},
		{"qwen2 without biases", func() Shape { s := shape("qwen2"); s.QKVBias = false; return s }(), func(*gguf.Writer) {},
			"missing tensor blk.0.attn_q.bias"},
		{"extra tensor", shape("llama"), func(w *gguf.Writer) {
			if err := w.AddTensor("blk.0.ffn_gate_inp.weight", gguf.TypeF32, []uint64{256, 8}, make([]byte, 256*8*4)); err != nil {
				t.Fatal(err)
			}
		}, "tensor blk.0.ffn_gate_inp.weight is not one llama.cpp's llama loader uses"},
		{"misshapen tensor", shape("phi3"), func(w *gguf.Writer) {
			if err := w.AddTensor("rope_factors_long.weight", gguf.TypeF32, []uint64{7}, make([]byte, 28)); err != nil {
				t.Fatal(err)
			}
		}, "tensor rope_factors_long.weight has shape [7], llama.cpp creates it as [16]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Build(Options{Shape: c.shape, Type: gguf.TypeF16})
			if err != nil {
				t.Fatal(err)
			}
			c.edit(w)
			err = CheckLlamaCpp(openHeader(t, w))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a line containing %q", err, c.want)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "llama.cpp: ") {
					t.Fatalf("line %q does not start with llama.cpp:", line)
				}
			}
		})
	}
}

// The rules hold llama.cpp's own files: the metadata and vocabulary of
// its test vocabularies (ggml-vocab-*.gguf, written by its converter) of
// the architectures synth writes pass checkMeta and checkVocab.
func TestLlamaCppRulesOnItsOwnFiles(t *testing.T) {
	paths, _ := filepath.Glob("../../shared/testdata/llamacpp/vocab/ggml-vocab-*.gguf")
	if len(paths) == 0 {
		t.Skip("../shared/testdata/llamacpp/vocab is absent")
	}
	checked := 0
	for _, p := range paths {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := f.Architecture()
		if slices.Contains(Archs, a) {
			var errs []error
			bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
			if checkMeta(f, bad) {
				checkVocab(f, bad)
			}
			if err := errors.Join(errs...); err != nil {
				t.Errorf("%s: %v", filepath.Base(p), err)
			}
			checked++
		}
		f.Close()
	}
	if checked == 0 {
		t.Fatal("no llama, qwen2 or phi3 vocabulary among", paths)
	}
	t.Logf("%d of llama.cpp's vocabularies checked", checked)
}

// Real vocabularies imported from HuggingFace (tokenizer.FromHFJSON, as
// `ringlm synth --tokenizer` does) make files that pass too.
func TestLlamaCppLoadsImportedVocab(t *testing.T) {
	for _, c := range []struct{ dir, preset string }{{"llama3", "llama-3.2-1b"}, {"mistral", "mistral-7b"}, {"qwen3", "qwen2.5-0.5b"}} {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join("../../shared/testdata/tokenizers", c.dir)
			fh, err := os.Open(filepath.Join(dir, "tokenizer.json.gz"))
			if errors.Is(err, os.ErrNotExist) {
				t.Skipf("%s is absent", dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			zr, err := gzip.NewReader(fh)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := tokenizer.FromHFJSON(data, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := Lookup(c.preset, "")
			w, err := Build(Options{Shape: s, Type: gguf.TypeF16, Tokenizer: v.Metadata()})
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckLlamaCpp(openHeader(t, w)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// <arch>.attention.sliding_window is written when a shape has a window,
// and always for phi3 (its context length when it has none); a negative
// window is refused.
func TestSlidingWindowKey(t *testing.T) {
	for _, c := range []struct {
		arch   string
		window int
		want   uint32 // 0: no key
	}{{"llama", 0, 0}, {"llama", 100, 100}, {"qwen2", 7, 7}, {"phi3", 0, 2048}, {"phi3", 64, 64}} {
		s, _ := Lookup("tiny", c.arch)
		s.SlidingWindow = c.window
		w, err := Build(Options{Shape: s, Type: gguf.TypeF16})
		if err != nil {
			t.Fatal(err)
		}
		var got uint32
		for _, kv := range w.KVs() {
			if kv.Key == c.arch+".attention.sliding_window" {
				got, _ = kv.Value.Raw().(uint32)
			}
		}
		if got != c.want {
			t.Errorf("%s window %d: key %d, want %d", c.arch, c.window, got, c.want)
		}
	}
	s, _ := Lookup("tiny", "llama")
	s.SlidingWindow = -1
	if _, err := Build(Options{Shape: s, Type: gguf.TypeF16}); err == nil || !strings.Contains(err.Error(), "sliding window -1") {
		t.Fatalf("negative window: %v", err)
	}
}
