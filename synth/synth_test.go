package synth

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/quantize"
)

func writeModel(t *testing.T, o Options) (*gguf.Writer, string) {
	t.Helper()
	w, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return w, path
}

// Tiny models of every architecture and weight type survive a write and a
// read with identical metadata and tensor bytes, and the bytes are what the
// generator produces for that seed.
func TestRoundTripTiny(t *testing.T) {
	for _, arch := range Archs {
		for _, typ := range Types() {
			// The layout is the architecture's and the bytes the codec's
			// (package quant pins those): every type on llama, the plain
			// types and Q8_0 on the others, which keeps the race-detector
			// run of make test short.
			if info, _ := typ.Info(); arch != "llama" && info.BlockSize > 1 && typ != gguf.TypeQ8_0 {
				continue
			}
			t.Run(arch+"/"+typ.String(), func(t *testing.T) {
				s, err := Lookup("tiny", arch)
				if err != nil {
					t.Fatal(err)
				}
				o := Options{Shape: s, Type: typ, Seed: 7}
				w, path := writeModel(t, o)
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if !reflect.DeepEqual(f.KVs, w.KVs()) {
					t.Fatal("metadata differs after round trip")
				}
				h, err := f.Hparams()
				if err != nil {
					t.Fatal(err)
				}
				if h.Arch != arch || int(h.EmbeddingLength) != s.Dim || int(h.BlockCount) != s.Layers || int(h.HeadCountKV) != s.KVHeads || int(h.KeyLength) != s.HeadDim {
					t.Fatalf("hparams %+v do not match shape %+v", h, s)
				}
				specs := s.tensors(int(h.VocabSize))
				if len(f.Tensors) != len(specs) {
					t.Fatalf("%d tensors, want %d", len(f.Tensors), len(specs))
				}
				for i, sp := range specs {
					ti := &f.Tensors[i]
					if ti.Name != sp.name || !reflect.DeepEqual(ti.Dims, sp.dims) {
						t.Fatalf("tensor %d: %s %v, want %s %v", i, ti.Name, ti.Dims, sp.name, sp.dims)
					}
					wantType := typ
					if len(sp.dims) == 1 {
						wantType = gguf.TypeF32
					}
					if ti.Type != wantType {
						t.Fatalf("%s: type %s, want %s", ti.Name, ti.Type, wantType)
					}
					var buf bytes.Buffer
					g := &gen{spec: sp, typ: wantType, seed: 7}
					if err := g.write(&buf); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(buf.Bytes(), f.Data(ti)) {
						t.Fatalf("%s: bytes differ from the generator's", ti.Name)
					}
				}
			})
		}
	}
}

// Every preset in every type lays out the tensors and metadata llama.cpp
// would: checked through the real reader on a sparse file (header written,
// data section left as a hole), so multi-GB presets cost nothing.
func TestPresetLayouts(t *testing.T) {
	for _, name := range PresetNames() {
		for _, typ := range Types() {
			s, err := Lookup(name, "")
			if err != nil {
				t.Fatal(err)
			}
			w, err := Build(Options{Shape: s, Type: typ, Seed: 1})
			// A row length that is not a whole number of typ's blocks takes
			// llama.cpp's fallback type, which may have no encoder yet.
			if refusal := unwritable(t, s, quantize.PureMix(typ)); refusal != nil {
				if err == nil || err.Error() != "synth: "+refusal.Error() {
					t.Fatalf("%s/%s: %v, want %v", name, typ, err, refusal)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			fh, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			size, err := w.WriteHeader(fh)
			if err == nil {
				err = fh.Truncate(size)
			}
			fh.Close()
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, typ, err)
			}
			if !reflect.DeepEqual(f.KVs, w.KVs()) {
				t.Fatalf("%s/%s: metadata differs", name, typ)
			}
			h, err := f.Hparams()
			if err != nil {
				t.Fatal(err)
			}
			if s.Vocab != 0 && int(h.VocabSize) != s.Vocab {
				t.Errorf("%s: vocab %d, want %d", name, h.VocabSize, s.Vocab)
			}
			emb, ok := f.Tensor("token_embd.weight")
			if !ok || emb.Dims[0] != uint64(s.Dim) || emb.Dims[1] != uint64(h.VocabSize) {
				t.Fatalf("%s: token_embd %+v", name, emb)
			}
			_, hasOut := f.Tensor("output.weight")
			if hasOut == s.Tied {
				t.Errorf("%s: output.weight present=%v with tied=%v", name, hasOut, s.Tied)
			}
			_, hasQKV := f.Tensor("blk.0.attn_qkv.weight")
			_, hasBias := f.Tensor("blk.0.attn_q.bias")
			if hasQKV != (s.Arch == "phi3") || hasBias != s.QKVBias {
				t.Errorf("%s: fused qkv %v, q bias %v", name, hasQKV, hasBias)
			}
			if _, ok := f.Tensor("rope_freqs.weight"); ok != (s.Llama3 != nil) {
				t.Errorf("%s: rope_freqs present=%v", name, ok)
			}
			var params uint64
			for i := range f.Tensors {
				params += f.Tensors[i].Elements()
			}
			if int64(params) != s.Params(int(h.VocabSize)) {
				t.Errorf("%s: %d params, shape says %d", name, params, s.Params(int(h.VocabSize)))
			}
			f.Close()
		}
	}
}

func TestKnownParamCounts(t *testing.T) {
	// Published parameter counts of the real models these shapes copy.
	for name, want := range map[string]float64{"qwen2.5-0.5b": 0.494e9, "llama-3.2-1b": 1.236e9, "llama-3.1-8b": 8.03e9, "mistral-7b": 7.24e9, "phi-3-mini": 3.82e9} {
		s, _ := Lookup(name, "")
		got := float64(s.Params(s.Vocab))
		if s.Llama3 != nil {
			got -= float64(s.HeadDim / 2) // rope_freqs is not a parameter
		}
		if math.Abs(got-want)/want > 0.01 {
			t.Errorf("%s: %.4g params, published %.4g", name, got, want)
		}
	}
}

func TestSeedsAndDeterminism(t *testing.T) {
	s, _ := Lookup("tiny", "qwen2")
	data := func(seed uint64) []byte {
		w, path := writeModel(t, Options{Shape: s, Type: gguf.TypeF16, Seed: seed})
		_ = w
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := data(1), data(1), data(2)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed gave different files")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds gave the same file")
	}
}

func TestPermuteQKInverse(t *testing.T) {
	const cols, heads, hd = 3, 2, 8
	x := make([]float32, heads*hd*cols)
	for i := range x {
		x[i] = float32(i)
	}
	p := PermuteQK(x, cols, heads)
	// Row 1 of the GGUF layout is HF row hd/2 (the first element of the
	// second rotary half), as llama.cpp's permute produces.
	if p[1*cols] != x[(hd/2)*cols] || p[2*cols] != x[1*cols] {
		t.Fatalf("unexpected permutation: %v", p[:4*cols])
	}
	if !reflect.DeepEqual(UnpermuteQK(p, cols, heads), x) {
		t.Fatal("UnpermuteQK does not invert PermuteQK")
	}
}

func TestLookupErrors(t *testing.T) {
	for _, c := range [][2]string{{"nope", ""}, {"tiny", "gpt3"}, {"phi-3-mini", "llama"}} {
		if _, err := Lookup(c[0], c[1]); err == nil {
			t.Errorf("Lookup(%q, %q) should fail", c[0], c[1])
		}
	}
	if s, err := Lookup("tiny", "mistral"); err != nil || s.Arch != "llama" {
		t.Errorf("mistral should alias llama: %v %v", s.Arch, err)
	}
}

func TestBuiltinVocab(t *testing.T) {
	kvs := builtinVocab()
	var tokens, merges []string
	for _, kv := range kvs {
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			tokens, _ = kv.Value.StringSlice()
		case "tokenizer.ggml.merges":
			merges, _ = kv.Value.StringSlice()
		}
	}
	if len(tokens) != 512 || len(merges) != builtinMerges {
		t.Fatalf("%d tokens, %d merges", len(tokens), len(merges))
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
	for _, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok || !seen[a] || !seen[b] || !seen[a+b] {
			t.Fatalf("merge %q does not join known tokens", m)
		}
	}
	if !seen["Ġthe"] {
		t.Errorf("expected the merge for \" the\" in the built-in vocabulary")
	}
}

// TestRoundTripAllPresets writes every preset in every type in full and
// checks each tensor's bytes against a fresh generation. It writes about
// 120 GB in all, so it runs only when RINGLM_FULL_ROUNDTRIP=1 (recorded in
// bench/RESULTS.md); plain runs cover tiny in full and every preset's
// layout above.
func TestRoundTripAllPresets(t *testing.T) {
	if os.Getenv("RINGLM_FULL_ROUNDTRIP") != "1" {
		t.Skip("set RINGLM_FULL_ROUNDTRIP=1 (writes every preset in every type)")
	}
	for _, name := range PresetNames()[1:] {
		for _, typ := range Types() {
			s, _ := Lookup(name, "")
			o := Options{Shape: s, Type: typ, Seed: 5}
			w, err := Build(o)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.KVs, w.KVs()) {
				t.Fatalf("%s/%s: metadata differs", name, typ)
			}
			h, _ := f.Hparams()
			for i, sp := range s.tensors(int(h.VocabSize)) {
				ti := &f.Tensors[i]
				wantType := typ
				if len(sp.dims) == 1 {
					wantType = gguf.TypeF32
				}
				if ti.Name != sp.name || ti.Type != wantType || !reflect.DeepEqual(ti.Dims, sp.dims) {
					t.Fatalf("%s/%s: tensor %d is %s %s %v", name, typ, i, ti.Name, ti.Type, ti.Dims)
				}
				var buf bytes.Buffer
				if err := (&gen{spec: sp, typ: wantType, seed: 5}).write(&buf); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), f.Data(ti)) {
					t.Fatalf("%s/%s: %s bytes differ", name, typ, ti.Name)
				}
			}
			f.Close()
			os.Remove(path)
			t.Logf("%s/%s: %d tensors identical", name, typ, len(f.Tensors))
		}
	}
}

// unwritable is quantize's refusal of mix on s, or nil: a type with no
// fallback for a row length (Q8_K on rows of 640), or types with no
// encoder yet.
func unwritable(t *testing.T, s Shape, mix quantize.Mix) error {
	t.Helper()
	specs := s.tensors(max(s.Vocab, 512))
	ts := make([]quantize.Tensor, len(specs))
	for i, sp := range specs {
		ts[i] = quantize.Tensor{Name: sp.name, Type: gguf.TypeF32, Dims: sp.dims}
	}
	choices, err := quantize.Choose(quantize.Model{Arch: s.Arch, Layers: s.Layers, Heads: s.Heads, KVHeads: s.KVHeads}, ts, mix, quantize.Rules{})
	if err != nil {
		return err
	}
	return quantize.CheckEncoders(mix.Name, choices, nil)
}

// A mix chooses each tensor's type as ringlm quantize would (a
// Q4_K_M-shaped synthetic file), with its llama_ftype; a mix or type with
// no encoder is refused in one line naming the type.
func TestMixes(t *testing.T) {
	s, _ := Lookup("tiny", "qwen2")
	for _, name := range quantize.Mixes() {
		t.Run(name, func(t *testing.T) {
			mix, _ := quantize.ParseMix(name)
			w, err := Build(Options{Shape: s, Mix: name, Seed: 2})
			if refusal := unwritable(t, s, mix); refusal != nil {
				if err == nil || err.Error() != "synth: "+refusal.Error() || !strings.HasPrefix(refusal.Error(), "quantize: unsupported type: "+name+" needs ") {
					t.Fatalf("%v, want %v", err, refusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, path := writeModel(t, Options{Shape: s, Mix: name, Seed: 2})
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !reflect.DeepEqual(f.KVs, w.KVs()) {
				t.Fatal("metadata differs")
			}
			if ft, err := f.Uint32("general.file_type"); err != nil || ft != mix.FileType {
				t.Errorf("general.file_type %d %v, want %d", ft, err, mix.FileType)
			}
			ts := make([]quantize.Tensor, len(f.Tensors))
			for i, ti := range f.Tensors {
				ts[i] = quantize.Tensor{Name: ti.Name, Type: gguf.TypeF32, Dims: ti.Dims}
			}
			choices, _ := quantize.Choose(quantize.Model{Arch: s.Arch, Layers: s.Layers, Heads: s.Heads, KVHeads: s.KVHeads}, ts, mix, quantize.Rules{})
			for _, c := range choices {
				if ti, _ := f.Tensor(c.Name); ti.Type != c.To {
					t.Errorf("%s: %s, the mix chooses %s", c.Name, ti.Type, c.To)
				}
			}
		})
	}
	// A mix that is also a type (Q8_0) writes the same file either way.
	_, a := writeModel(t, Options{Shape: s, Mix: "q8_0", Seed: 2})
	_, b := writeModel(t, Options{Shape: s, Type: gguf.TypeQ8_0, Seed: 2})
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("mix Q8_0 and type Q8_0 differ on a tied qwen2")
	}
	if _, err := Build(Options{Shape: s, Mix: "Q4_K_X"}); err == nil || !strings.Contains(err.Error(), `unknown mix "Q4_K_X"`) {
		t.Errorf("unknown mix: %v", err)
	}
	if _, err := Build(Options{Shape: s, Type: gguf.TypeIQ2_XXS}); err == nil || !strings.Contains(err.Error(), "IQ2_XXS needs IQ2_XXS, which ringlm does not write yet") {
		t.Errorf("IQ2_XXS: %v", err)
	}
}
