package gguf

import (
	"bufio"
	"bytes"
	"errors"
	"slices"
	"testing"
)

// validSeeds are well-formed files covering what the reader decodes:
// every value type, tensors of several ggml types, a non-default
// alignment, a v2 header, and a vocabulary-only file with no tensors.
func validSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	seeds := map[string][]byte{"small": smallValid(t), "hand-built": handValid()}

	w := NewWriter()
	for _, kv := range allValues() {
		w.Set(kv.Key, kv.Value)
	}
	for i, tt := range []struct {
		name string
		typ  Type
		dims []uint64
	}{
		{"f32", TypeF32, []uint64{4, 2}},
		{"f16", TypeF16, []uint64{3}},
		{"bf16", TypeBF16, []uint64{2, 1, 2}},
		{"q8_0", TypeQ8_0, []uint64{32, 2}},
		{"q4_0", TypeQ4_0, []uint64{64}},
		{"q4_k", TypeQ4_K, []uint64{256}},
		{"i8", TypeI8, []uint64{1, 1, 1, 5}},
	} {
		n, _ := tt.typ.RowBytes(tt.dims[0])
		for _, d := range tt.dims[1:] {
			n *= d
		}
		if err := w.AddTensor(tt.name+".weight", tt.typ, tt.dims, pattern(int(n), byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	seeds["all types"] = writeBytes(t, w)

	w = NewWriter()
	w.Set("general.architecture", String("llama"))
	w.Set("general.alignment", Uint32(64))
	w.Set("llama.embedding_length", Uint32(64))
	if err := w.AddTensor("a", TypeF16, []uint64{5}, pattern(10, 7)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b", TypeQ8_0, []uint64{32}, pattern(34, 8)); err != nil {
		t.Fatal(err)
	}
	seeds["alignment 64"] = writeBytes(t, w)

	w = NewWriter()
	w.Set("general.architecture", String("llama"))
	w.Set("llama.context_length", Uint32(2048))
	w.Set("llama.embedding_length", Uint32(64))
	w.Set("llama.block_count", Uint32(2))
	w.Set("llama.feed_forward_length", Uint32(128))
	w.Set("llama.attention.head_count", Uint32(4))
	w.Set("llama.attention.head_count_kv", Uint32(2))
	w.Set("llama.rope.freq_base", Float32(10000))
	w.Set("tokenizer.ggml.model", String("gpt2"))
	w.Set("tokenizer.ggml.pre", String("llama-bpe"))
	w.Set("tokenizer.ggml.tokens", Strings([]string{"<s>", "</s>", "a", "b", "ab", "Ġ"}))
	w.Set("tokenizer.ggml.token_type", Int32s([]int32{3, 3, 1, 1, 1, 1}))
	w.Set("tokenizer.ggml.merges", Strings([]string{"a b"}))
	w.Set("tokenizer.ggml.bos_token_id", Uint32(0))
	w.Set("tokenizer.ggml.eos_token_id", Uint32(1))
	w.Set("tokenizer.ggml.add_bos_token", Bool(true))
	w.Set("tokenizer.chat_template", String("{{ messages }}"))
	seeds["vocab only"] = writeBytes(t, w)

	v2 := bytes.Clone(seeds["small"])
	v2[4] = 2
	seeds["v2"] = v2
	return seeds
}

// truncations returns up to about 48 prefixes of b, always including the
// empty one and the one a byte short.
func truncations(b []byte) [][]byte {
	step := max(1, len(b)/48)
	var out [][]byte
	for n := 0; n < len(b); n += step {
		out = append(out, b[:n])
	}
	if len(b) > 0 {
		out = append(out, b[:len(b)-1])
	}
	return out
}

func FuzzParse(f *testing.F) {
	for _, b := range validSeeds(f) {
		f.Add(b)
		for _, p := range truncations(b) {
			f.Add(p)
		}
	}
	for _, c := range malformedCases(f) {
		f.Add(c.file)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		pf, err := Parse(b)
		if err != nil {
			if pf != nil {
				t.Fatalf("Parse returned a file and %v", err)
			}
			if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if !bytes.Equal(b, in) {
			t.Fatal("Parse modified its input")
		}
		checkInvariants(t, pf)
		touch(t, pf)

		// Written back and read again, the file says the same thing.
		out := rewrite(t, pf)
		rf, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parsing the rewritten file: %v", err)
		}
		sameContent(t, pf, rf)
		// And writing is deterministic: a second rewrite is identical.
		if out2 := rewrite(t, rf); !bytes.Equal(out, out2) {
			t.Fatal("rewriting the rewritten file changed it")
		}
	})
}

// checkInvariants asserts what a successful Parse promises.
func checkInvariants(t *testing.T, f *File) {
	t.Helper()
	if f.Version != 2 && f.Version != 3 {
		t.Fatalf("version %d", f.Version)
	}
	if a := f.Alignment; a == 0 || a&(a-1) != 0 || a > MaxAlignment {
		t.Fatalf("alignment %d", a)
	}
	if f.DataOffset%f.Alignment != 0 || len(f.Tensors) > 0 && f.DataOffset > f.Size {
		t.Fatalf("data offset %d, alignment %d, size %d", f.DataOffset, f.Alignment, f.Size)
	}
	if len(f.KVs) > MaxKVs || len(f.Tensors) > MaxTensors {
		t.Fatalf("%d KVs, %d tensors", len(f.KVs), len(f.Tensors))
	}
	for i, kv := range f.KVs {
		if j, ok := f.kvIndex[kv.Key]; !ok || j != i {
			t.Fatalf("key %q: index %d, want %d", kv.Key, j, i)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if got, ok := f.Tensor(ti.Name); !ok || got != ti {
			t.Fatalf("tensor %q not indexed", ti.Name)
		}
		if len(ti.Dims) == 0 || len(ti.Dims) > MaxDims || ti.Name == "" || len(ti.Name) >= MaxTensorName {
			t.Fatalf("tensor %q: dims %v", ti.Name, ti.Dims)
		}
		if n := ti.Elements(); n == 0 || n > MaxElements {
			t.Fatalf("tensor %q: %d elements", ti.Name, n)
		}
		row, err := ti.Type.RowBytes(ti.Dims[0])
		if err != nil || row*(ti.Elements()/ti.Dims[0]) != ti.Size {
			t.Fatalf("tensor %q: %s %v has size %d (%v)", ti.Name, ti.Type, ti.Dims, ti.Size, err)
		}
		if ti.Offset%f.Alignment != 0 || f.DataOffset+ti.Offset+ti.Size > f.Size {
			t.Fatalf("tensor %q: offset %d size %d in %d bytes", ti.Name, ti.Offset, ti.Size, f.Size)
		}
	}
}

// touch reads every value and every tensor byte range, and runs the typed
// accessors: none may panic on anything Parse accepted.
func touch(t *testing.T, f *File) {
	t.Helper()
	for _, kv := range f.KVs {
		touchValue(kv.Value)
		if v, ok := f.Get(kv.Key); !ok || v.Type != kv.Value.Type {
			t.Fatalf("Get(%q)", kv.Key)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		d := f.Data(ti)
		if uint64(len(d)) != ti.Size || cap(d) != len(d) {
			t.Fatalf("tensor %q: %d bytes (cap %d), size %d", ti.Name, len(d), cap(d), ti.Size)
		}
		_, _ = d[0], d[len(d)-1]
	}
	_, _ = f.Hparams()
	_, _ = f.Tokenizer()
	_, _ = f.Architecture()
}

func touchValue(v Value) {
	_ = v.String()
	_ = v.Len()
	_, _ = v.Int()
	_, _ = v.Float()
	_, _ = v.Str()
	_, _ = v.BoolValue()
	_, _ = v.StringSlice()
	_, _ = v.Float32Slice()
	_, _ = v.Int32Slice()
	if vs, ok := v.Raw().([]Value); ok {
		for _, e := range vs {
			touchValue(e)
		}
	}
}

// rewrite writes f back out with the Writer, tensor data included.
func rewrite(t *testing.T, f *File) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range f.KVs {
		w.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
			t.Fatalf("AddTensor of a parsed tensor: %v", err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("writing a parsed file: %v", err)
	}
	return buf.Bytes()
}

// sameContent asserts a and b hold the same KVs and tensors. Values are
// compared by their encoding (so NaNs compare equal to themselves);
// tensor offsets are the writer's to choose, the bytes they hold are not.
func sameContent(t *testing.T, a, b *File) {
	t.Helper()
	if a.Alignment != b.Alignment {
		t.Fatalf("alignment %d, rewritten %d", a.Alignment, b.Alignment)
	}
	if len(a.KVs) != len(b.KVs) {
		t.Fatalf("%d KVs, rewritten %d", len(a.KVs), len(b.KVs))
	}
	for i := range a.KVs {
		x, y := a.KVs[i], b.KVs[i]
		if x.Key != y.Key || x.Value.Type != y.Value.Type || x.Value.Elem != y.Value.Elem ||
			!bytes.Equal(encodeValue(t, x.Value), encodeValue(t, y.Value)) {
			t.Fatalf("KV %d: %q=%v, rewritten %q=%v", i, x.Key, x.Value, y.Key, y.Value)
		}
	}
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("%d tensors, rewritten %d", len(a.Tensors), len(b.Tensors))
	}
	for i := range a.Tensors {
		x, y := &a.Tensors[i], &b.Tensors[i]
		if x.Name != y.Name || x.Type != y.Type || !slices.Equal(x.Dims, y.Dims) || x.Size != y.Size {
			t.Fatalf("tensor %d: %+v, rewritten %+v", i, *x, *y)
		}
		if !bytes.Equal(a.Data(x), b.Data(y)) {
			t.Fatalf("tensor %q: data differs after rewriting", x.Name)
		}
	}
}

func encodeValue(t *testing.T, v Value) []byte {
	t.Helper()
	var buf bytes.Buffer
	cw := &countWriter{w: bufio.NewWriter(&buf)}
	e := &encoder{w: cw}
	e.value(v)
	if e.err != nil {
		t.Fatalf("encoding %v: %v", v, e.err)
	}
	if err := cw.w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
