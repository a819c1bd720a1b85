package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// img assembles a GGUF image field by field, so malformed files can say
// exactly which field is wrong. All integers are little-endian.
type img struct{ b []byte }

// hdr starts an image: magic, version, tensor count, metadata count.
func hdr(version uint32, nTensors, nKV uint64) *img {
	m := &img{b: []byte(Magic)}
	return m.u32(version).u64(nTensors).u64(nKV)
}

func (m *img) raw(p ...byte) *img { m.b = append(m.b, p...); return m }
func (m *img) u8(v uint8) *img    { return m.raw(v) }
func (m *img) u32(v uint32) *img  { m.b = binary.LittleEndian.AppendUint32(m.b, v); return m }
func (m *img) u64(v uint64) *img  { m.b = binary.LittleEndian.AppendUint64(m.b, v); return m }
func (m *img) str(s string) *img  { return m.u64(uint64(len(s))).raw([]byte(s)...) }

// kv writes a key and its value type tag; the caller appends the value.
func (m *img) kv(key string, t ValueType) *img { return m.str(key).u32(uint32(t)) }

// arr writes an array header; the caller appends the elements.
func (m *img) arr(elem ValueType, n uint64) *img { return m.u32(uint32(elem)).u64(n) }

// tensor writes one tensor info.
func (m *img) tensor(name string, t Type, off uint64, dims ...uint64) *img {
	m.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		m.u64(d)
	}
	return m.u32(uint32(t)).u64(off)
}

// pad appends zeros up to a multiple of a.
func (m *img) pad(a int) *img {
	for len(m.b)%a != 0 {
		m.b = append(m.b, 0)
	}
	return m
}

func (m *img) zeros(n int) *img { m.b = append(m.b, make([]byte, n)...); return m }

// bytes returns a copy, so one prefix can be extended two ways.
func (m *img) bytes() []byte { return bytes.Clone(m.b) }

// smallValid is a valid file with a few KVs and two tensors whose data
// ends exactly at the end of the file (the last tensor fills its aligned
// slot), so every proper prefix is a truncated file.
func smallValid(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	w.Set("general.architecture", String("llama"))
	w.Set("general.name", String("tiny"))
	w.Set("llama.block_count", Uint32(1))
	w.Set("tokenizer.ggml.tokens", Strings([]string{"a", "b", "<s>"}))
	w.Set("tokenizer.ggml.scores", Float32s([]float32{0, -1, -2}))
	w.Set("tokenizer.ggml.add_bos_token", Bool(true))
	if err := w.AddTensor("token_embd.weight", TypeQ8_0, []uint64{32, 3}, pattern(3*34, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("output_norm.weight", TypeF32, []uint64{8}, pattern(32, 2)); err != nil {
		t.Fatal(err)
	}
	return writeBytes(t, w)
}

func writeBytes(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pattern is n bytes of a cheap seeded sequence.
func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i)*31 + seed
	}
	return p
}

// handValid is a valid file built field by field: the reference the
// malformed cases below differ from in one field each.
func handValid() []byte {
	return hdr(3, 1, 2).
		kv("general.architecture", TypeString).str("llama").
		kv("general.alignment", TypeUint32).u32(32).
		tensor("w", TypeF32, 0, 8).
		pad(32).zeros(32).bytes()
}

type malformedCase struct {
	name string
	file []byte
	want error    // the sentinel
	msg  []string // substrings the message must contain
}

var sentinels = []error{ErrBadMagic, ErrBigEndian, ErrVersion, ErrTruncated, ErrInvalid}

// malformedCases are hand-built files that each break one rule.
func malformedCases(t testing.TB) []malformedCase {
	v := smallValid(t)
	nameAt := bytes.Index(v, []byte("tiny"))
	lastTensor := "output_norm.weight"

	// A file with one F32 tensor of n elements at offset off, its data
	// section holding data bytes.
	oneTensor := func(name string, typ Type, off uint64, data int, dims ...uint64) []byte {
		return hdr(3, 1, 0).tensor(name, typ, off, dims...).pad(32).zeros(data).bytes()
	}
	// A file whose only metadata value is built by val after its key.
	oneKV := func(key string, t ValueType, val func(*img)) []byte {
		m := hdr(3, 0, 1).kv(key, t)
		val(m)
		return m.bytes()
	}
	nested := func(levels int) []byte {
		m := hdr(3, 0, 1).kv("a.deep", TypeArray)
		for range levels - 1 {
			m.arr(TypeArray, 1)
		}
		return m.arr(TypeUint8, 1).u8(7).bytes()
	}
	be := func(version uint32) []byte {
		m := &img{b: []byte(Magic)}
		m.b = binary.BigEndian.AppendUint32(m.b, version)
		m.b = binary.BigEndian.AppendUint64(m.b, 0)
		m.b = binary.BigEndian.AppendUint64(m.b, 1)
		m.b = binary.BigEndian.AppendUint64(m.b, 4)
		m.raw([]byte("a.b.")...)
		m.b = binary.BigEndian.AppendUint32(m.b, uint32(TypeUint32))
		m.b = binary.BigEndian.AppendUint32(m.b, 7)
		return m.bytes()
	}
	alignment := func(t ValueType, val func(*img)) []byte {
		m := hdr(3, 1, 1).kv("general.alignment", t)
		val(m)
		return m.tensor("w", TypeF32, 0, 8).pad(64).zeros(64).bytes()
	}

	return []malformedCase{
		{"empty", nil, ErrTruncated, []string{"offset 0"}},
		{"three bytes", []byte("GGU"), ErrTruncated, []string{"offset 0"}},
		{"bad magic", append([]byte("GGML"), v[4:]...), ErrBadMagic, []string{"offset 0"}},
		{"bad magic lower case", append([]byte("gguf"), v[4:]...), ErrBadMagic, []string{"offset 0"}},
		{"magic only", []byte(Magic), ErrTruncated, []string{"offset 4", "version"}},
		{"version 0", hdr(0, 0, 0).bytes(), ErrVersion, []string{"offset 4"}},
		{"version 1", hdr(1, 0, 0).bytes(), ErrVersion, []string{"offset 4", "1"}},
		{"version 4", hdr(4, 0, 0).bytes(), ErrVersion, []string{"offset 4", "4"}},
		{"version max", hdr(math.MaxUint32, 0, 0).bytes(), ErrVersion, []string{"offset 4"}},
		{"big-endian v3", be(3), ErrBigEndian, []string{"offset 4"}},
		{"big-endian v2", be(2), ErrBigEndian, []string{"offset 4"}},
		{"v3 with version bytes swapped", append(append([]byte(Magic), 0, 0, 0, 3), v[8:]...), ErrBigEndian, []string{"offset 4"}},

		{"truncated header in tensor count", v[:12], ErrTruncated, []string{"offset 8", "tensor count"}},
		{"truncated header in metadata count", v[:20], ErrTruncated, []string{"offset 8", "tensor count 2 is impossible for a 20-byte file"}},
		{"truncated header at metadata count", v[:23], ErrTruncated, []string{"offset 8", "tensor count"}},
		{"truncated middle in a string value", v[:nameAt+2], ErrTruncated, []string{`"general.name"`, "offset"}},
		{"truncated middle at half", v[:len(v)/2], ErrTruncated, []string{"offset"}},
		{"truncated last byte", v[:len(v)-1], ErrTruncated, []string{lastTensor, "offset"}},
		{"truncated tensor data by one byte", oneTensor("w", TypeF32, 0, 31, 8), ErrTruncated, []string{`"w"`, "offset"}},
		{"data section starts past the end", hdr(3, 1, 0).tensor("w", TypeF32, 0, 1).bytes(), ErrTruncated, []string{"offset", "data section"}},

		{"2^62 tensors", hdr(3, 1<<62, 0).bytes(), ErrInvalid, []string{"offset 8", "tensor count"}},
		{"2^62 keys", hdr(3, 0, 1<<62).bytes(), ErrInvalid, []string{"offset 16", "metadata count"}},
		{"max uint64 keys", hdr(3, 0, math.MaxUint64).bytes(), ErrInvalid, []string{"offset 16", "metadata count"}},
		{"tensor count past the end", hdr(3, 1000, 0).zeros(100).bytes(), ErrTruncated, []string{"offset 8", "tensor count"}},
		{"key count past the end", hdr(3, 0, 1000).zeros(100).bytes(), ErrTruncated, []string{"offset 16", "metadata count"}},

		{"key length 2^62", hdr(3, 0, 1).u64(1 << 62).zeros(16).bytes(), ErrInvalid, []string{"offset 24", "metadata key #0"}},
		{"key length past the end", hdr(3, 0, 1).u64(100).raw([]byte("abc")...).zeros(12).bytes(), ErrTruncated, []string{"offset 24", "metadata key #0"}},
		{"empty key", oneKV("", TypeUint8, func(m *img) { m.u8(1) }), ErrInvalid, []string{"offset 24", "metadata key #0"}},
		{"key not UTF-8", oneKV("a\xffb", TypeUint8, func(m *img) { m.u8(1) }), ErrInvalid, []string{"offset 24", "metadata key #0"}},
		{"duplicate key", hdr(3, 0, 2).kv("a.b", TypeUint8).u8(1).kv("a.b", TypeUint8).u8(2).bytes(), ErrInvalid, []string{`"a.b"`, "offset 40"}},

		{"string length past the end", oneKV("general.name", TypeString, func(m *img) { m.u64(1000).raw([]byte("short")...) }), ErrTruncated, []string{`"general.name"`, "offset 48"}},
		{"string length 2^62", oneKV("general.name", TypeString, func(m *img) { m.u64(1 << 62).zeros(8) }), ErrInvalid, []string{`"general.name"`, "offset 48"}},
		{"unknown value type", oneKV("a.b", ValueType(13), func(m *img) { m.u64(0) }), ErrInvalid, []string{`"a.b"`, "offset 35", "13"}},
		{"unknown value type max", oneKV("a.b", ValueType(math.MaxUint32), func(m *img) { m.u64(0) }), ErrInvalid, []string{`"a.b"`, "offset 35"}},
		{"bool 2", oneKV("a.flag", TypeBool, func(m *img) { m.u8(2) }), ErrInvalid, []string{`"a.flag"`, "offset 42"}},
		{"bool 255", oneKV("a.flag", TypeBool, func(m *img) { m.u8(255) }), ErrInvalid, []string{`"a.flag"`, "offset"}},
		{"scalar value truncated", oneKV("a.u64", TypeUint64, func(m *img) { m.u32(1) }), ErrTruncated, []string{`"a.u64"`, "offset"}},

		{"array of 2^62 u8", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeUint8, 1<<62).zeros(8) }), ErrInvalid, []string{`"a.arr"`, "offset 41"}},
		{"array of 2^62 strings", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeString, 1<<62).zeros(8) }), ErrInvalid, []string{`"a.arr"`, "offset 41"}},
		{"array of 2^62 arrays", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeArray, 1<<62).zeros(8) }), ErrInvalid, []string{`"a.arr"`, "offset 41"}},
		{"array of u8 past the end", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeUint8, 1000).zeros(3) }), ErrTruncated, []string{`"a.arr"`, "offset 41"}},
		{"array of u64 past the end", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeUint64, 3).zeros(23) }), ErrTruncated, []string{`"a.arr"`, "offset 41"}},
		{"array of strings past the end", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeString, 1000).zeros(16) }), ErrTruncated, []string{`"a.arr"`, "offset 41"}},
		{"array string length past the end", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeString, 2).str("x").u64(9).raw('y') }), ErrTruncated, []string{`"a.arr"`, "string #1", "offset 62"}},
		{"array string length 2^62", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeString, 1).u64(1 << 62) }), ErrInvalid, []string{`"a.arr"`, "string #0", "offset 53"}},
		{"array of unknown element type", oneKV("a.arr", TypeArray, func(m *img) { m.arr(ValueType(13), 1).zeros(8) }), ErrInvalid, []string{`"a.arr"`, "offset 41", "13"}},
		{"bool array element 2", oneKV("a.arr", TypeArray, func(m *img) { m.arr(TypeBool, 3).raw(1, 0, 2) }), ErrInvalid, []string{`"a.arr"`, "offset 55", "#2"}},
		{"arrays nested too deep", nested(MaxArrayDepth + 1), ErrInvalid, []string{`"a.deep"`, "offset", "nested"}},
		{"arrays nested far too deep", nested(1000), ErrInvalid, []string{`"a.deep"`, "offset", "nested"}},

		{"alignment 0", alignment(TypeUint32, func(m *img) { m.u32(0) }), ErrInvalid, []string{"general.alignment", "offset 49"}},
		{"alignment 3", alignment(TypeUint32, func(m *img) { m.u32(3) }), ErrInvalid, []string{"general.alignment", "offset 49"}},
		{"alignment 2^17", alignment(TypeUint32, func(m *img) { m.u32(1 << 17) }), ErrInvalid, []string{"general.alignment", "offset 49"}},
		{"alignment string", alignment(TypeString, func(m *img) { m.str("32") }), ErrInvalid, []string{"general.alignment", "offset 49"}},
		{"alignment u64", alignment(TypeUint64, func(m *img) { m.u64(32) }), ErrInvalid, []string{"general.alignment", "offset 49"}},
		{"alignment i32", alignment(TypeInt32, func(m *img) { m.u32(32) }), ErrInvalid, []string{"general.alignment", "offset 49"}},

		{"tensor name length 2^62", hdr(3, 1, 0).u64(1 << 62).zeros(64).bytes(), ErrInvalid, []string{"tensor #0", "offset 24"}},
		{"tensor name past the end", hdr(3, 1, 0).u64(200).zeros(40).bytes(), ErrTruncated, []string{"tensor #0", "offset 24"}},
		{"empty tensor name", oneTensor("", TypeF32, 0, 32, 8), ErrInvalid, []string{"tensor #0", "offset 24"}},
		{"tensor name 64 bytes", oneTensor(strings.Repeat("n", 64), TypeF32, 0, 32, 8), ErrInvalid, []string{strings.Repeat("n", 64), "offset 24"}},
		{"tensor name 200 bytes", oneTensor(strings.Repeat("n", 200), TypeF32, 0, 32, 8), ErrInvalid, []string{"tensor #0", "offset 24"}},
		{"tensor name not UTF-8", oneTensor("w\xc0", TypeF32, 0, 32, 8), ErrInvalid, []string{"tensor #0", "offset 24"}},
		{"duplicate tensor name", hdr(3, 2, 0).tensor("w", TypeF32, 0, 8).tensor("w", TypeF32, 32, 8).pad(32).zeros(64).bytes(), ErrInvalid, []string{`"w"`, "duplicate", "offset 57"}},
		{"zero dimensions", oneTensor("w", TypeF32, 0, 32), ErrInvalid, []string{`"w"`, "offset 33", "0 dimensions"}},
		{"5 dimensions", oneTensor("w", TypeF32, 0, 32, 1, 1, 1, 1, 8), ErrInvalid, []string{`"w"`, "offset 33", "5 dimensions"}},
		{"2^32 dimensions", hdr(3, 1, 0).str("w").u32(math.MaxUint32).zeros(64).bytes(), ErrInvalid, []string{`"w"`, "offset 33"}},
		{"zero dimension", oneTensor("w", TypeF32, 0, 32, 8, 0), ErrInvalid, []string{`"w"`, "offset 45", "dimension 1 is zero"}},
		{"dims product overflows", oneTensor("w", TypeF32, 0, 32, 1<<32, 1<<32), ErrInvalid, []string{`"w"`, "offset 45", "dimension 1"}},
		{"dims product overflows at 2^64", oneTensor("w", TypeF32, 0, 32, 1<<16, 1<<16, 1<<16, 1<<16), ErrInvalid, []string{`"w"`, "offset 61", "dimension 3"}},
		{"elements past MaxElements", oneTensor("w", TypeF32, 0, 32, 1<<40, 1<<9), ErrInvalid, []string{`"w"`, "offset 45"}},
		{"dimensions truncated", hdr(3, 1, 0).str("w").u32(2).u64(8).u32(0).bytes(), ErrTruncated, []string{`"w"`, "offset 45"}},
		{"unknown type id 4 (removed)", oneTensor("w", Type(4), 0, 32, 8), ErrInvalid, []string{`"w"`, "offset 45", "type id 4"}},
		{"unknown type id 40", oneTensor("w", Type(40), 0, 32, 8), ErrInvalid, []string{`"w"`, "offset 45", "type id 40"}},
		{"unknown type id max", oneTensor("w", Type(math.MaxUint32), 0, 32, 8), ErrInvalid, []string{`"w"`, "offset 45"}},
		{"Q8_0 row of 31", oneTensor("w", TypeQ8_0, 0, 64, 31), ErrInvalid, []string{`"w"`, "offset 45", "block size 32"}},
		{"Q4_K row of 32", oneTensor("w", TypeQ4_K, 0, 160, 32, 8), ErrInvalid, []string{`"w"`, "offset 53", "block size 256"}},
		{"misaligned data", oneTensor("w", TypeF32, 4, 64, 8), ErrInvalid, []string{`"w"`, "offset 4", "aligned"}},
		{"misaligned for alignment 64", alignmentMisaligned(), ErrInvalid, []string{`"w"`, "offset 32", "aligned to 64"}},
		{"tensor offset past the end", oneTensor("w", TypeF32, 1<<40, 64, 8), ErrTruncated, []string{`"w"`, "offset"}},
		{"tensor offset wraps around", oneTensor("w", TypeF32, math.MaxUint64-31, 64, 8), ErrTruncated, []string{`"w"`, "offset"}},
		{"overlapping tensors", hdr(3, 2, 0).tensor("a", TypeF32, 0, 16).tensor("b", TypeF32, 32, 8).pad(32).zeros(96).bytes(), ErrInvalid, []string{`"a"`, `"b"`, "overlaps", "offset 32"}},
		{"tensors at the same offset", hdr(3, 2, 0).tensor("a", TypeF32, 0, 8).tensor("b", TypeF32, 0, 8).pad(32).zeros(32).bytes(), ErrInvalid, []string{`"a"`, `"b"`, "overlaps", "offset 0"}},
	}
}

func alignmentMisaligned() []byte {
	return hdr(3, 1, 1).kv("general.alignment", TypeUint32).u32(64).
		tensor("w", TypeF32, 32, 8).pad(64).zeros(128).bytes()
}

// checkErr asserts err wraps want (and no other sentinel) and names msg.
func checkErr(t *testing.T, err, want error, msg []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	for _, s := range sentinels {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("errors.Is(err, %q) = %v; err: %v", s, got, err)
		}
	}
	for _, s := range msg {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message lacks %q: %v", s, err)
		}
	}
	if !strings.HasPrefix(err.Error(), "gguf: ") {
		t.Errorf("message not prefixed with the package: %v", err)
	}
}

// parseNoPanic runs Parse, turning a panic into a test failure.
func parseNoPanic(t *testing.T, b []byte) (f *File, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Parse panicked on %d bytes: %v", len(b), r)
		}
	}()
	return Parse(b)
}

func TestHandBuiltValid(t *testing.T) {
	// The reference the malformed cases are variations of, and the
	// positive controls for limits the cases go one past.
	cases := map[string][]byte{
		"hand-built": handValid(),
		"v2":         append(append([]byte(Magic), 2, 0, 0, 0), handValid()[8:]...),
		"small":      smallValid(t),
		"name 63 bytes": hdr(3, 1, 0).tensor(strings.Repeat("n", 63), TypeF32, 0, 8).
			pad(32).zeros(32).bytes(),
		"4 dimensions":    hdr(3, 1, 0).tensor("w", TypeF32, 0, 8, 1, 1, 2).pad(32).zeros(64).bytes(),
		"alignment 1":     hdr(3, 1, 1).kv("general.alignment", TypeUint32).u32(1).tensor("w", TypeI8, 3, 5).raw(9, 9, 9, 1, 2, 3, 4, 5).bytes(),
		"alignment 65536": hdr(3, 0, 1).kv("general.alignment", TypeUint32).u32(MaxAlignment).bytes(),
		"Q8_0 row of 32":  hdr(3, 1, 0).tensor("w", TypeQ8_0, 0, 32).pad(32).zeros(34).bytes(),
		"adjacent tensors": hdr(3, 2, 0).tensor("b", TypeF32, 32, 8).tensor("a", TypeF32, 0, 8).
			pad(32).zeros(64).bytes(),
		"nested to the limit": func() []byte {
			m := hdr(3, 0, 1).kv("a.deep", TypeArray)
			for range MaxArrayDepth - 1 {
				m.arr(TypeArray, 1)
			}
			return m.arr(TypeUint8, 1).u8(7).bytes()
		}(),
		"no tensors, no padding": hdr(3, 0, 1).kv("a", TypeUint8).u8(1).bytes(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := parseNoPanic(t, b)
			if err != nil {
				t.Fatal(err)
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if d := f.Data(ti); uint64(len(d)) != ti.Size {
					t.Errorf("tensor %q: %d data bytes, size %d", ti.Name, len(d), ti.Size)
				}
			}
		})
	}
	f, _ := Parse(cases["alignment 1"])
	if ti, _ := f.Tensor("w"); f.Alignment != 1 || !bytes.Equal(f.Data(ti), []byte{1, 2, 3, 4, 5}) {
		t.Errorf("alignment 1: alignment %d, data %v", f.Alignment, f.Data(ti))
	}
}

func TestMalformed(t *testing.T) {
	for _, c := range malformedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			f, err := parseNoPanic(t, c.file)
			if f != nil {
				t.Errorf("Parse returned a file with error %v", err)
			}
			checkErr(t, err, c.want, c.msg)
			t.Log(err)
		})
	}
}

// TestMalformedAllocations checks that hostile counts are refused before
// anything is allocated from them: parsing a malformed file allocates in
// proportion to the file, whatever the counts in it claim.
func TestMalformedAllocations(t *testing.T) {
	var before, after runtime.MemStats
	for _, c := range malformedCases(t) {
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Parse(c.file)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		if got, limit := after.TotalAlloc-before.TotalAlloc, 64<<10+16*uint64(len(c.file)); got > limit {
			t.Errorf("%s: %d-byte file allocated %d bytes (limit %d)", c.name, len(c.file), got, limit)
		}
	}
}

// TestEveryTruncation parses and opens every proper prefix of a valid file.
func TestEveryTruncation(t *testing.T) {
	v := smallValid(t)
	f, err := Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	last := f.Tensors[len(f.Tensors)-1]
	if end := f.DataOffset + last.Offset + last.Size; end != uint64(len(v)) {
		t.Fatalf("test file has %d bytes after its last tensor; want none", uint64(len(v))-end)
	}
	dir := t.TempDir()
	for n := range len(v) {
		g, err := parseNoPanic(t, v[:n])
		if g != nil || !errors.Is(err, ErrTruncated) {
			t.Errorf("prefix %d/%d: got %v, want ErrTruncated", n, len(v), err)
			continue
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("prefix %d: message without an offset: %v", n, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("prefix%04d.gguf", n))
		if err := os.WriteFile(path, v[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		checkOpenLike(t, path, err)
	}
}

// TestTrailingPaddingOptional: the writer pads after the last tensor as
// llama.cpp does, but like llama.cpp's loader the reader only needs the
// tensor bytes themselves. Prefixes that cut into tensor data fail.
func TestTrailingPaddingOptional(t *testing.T) {
	w := NewWriter()
	w.Set("general.alignment", Uint32(64))
	if err := w.AddTensor("a", TypeF16, []uint64{8, 2}, pattern(32, 3)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b", TypeBF16, []uint64{5}, pattern(10, 4)); err != nil {
		t.Fatal(err)
	}
	v := writeBytes(t, w)
	f, err := Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.Tensor("b")
	end := int(f.DataOffset + b.Offset + b.Size)
	if end == len(v) || len(v)%64 != 0 {
		t.Fatalf("want trailing padding: data ends at %d of %d", end, len(v))
	}
	for n := int(f.DataOffset); n <= len(v); n++ {
		g, err := parseNoPanic(t, v[:n])
		switch {
		case n < end && !errors.Is(err, ErrTruncated):
			t.Errorf("prefix %d (data ends at %d): got %v, want ErrTruncated", n, end, err)
		case n >= end && err != nil:
			t.Errorf("prefix %d (data ends at %d): %v", n, end, err)
		case n >= end:
			gb, _ := g.Tensor("b")
			if !bytes.Equal(g.Data(gb), pattern(10, 4)) {
				t.Errorf("prefix %d: tensor b data differs", n)
			}
		}
	}
}

// TestOpenMalformed: Open reports what Parse reports, and leaves neither
// a mapping nor a file descriptor behind when it fails.
func TestOpenMalformed(t *testing.T) {
	dir := t.TempDir()
	fds := openFDs(t)
	for i, c := range malformedCases(t) {
		path := filepath.Join(dir, fmt.Sprintf("case%03d.gguf", i))
		if err := os.WriteFile(path, c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		_, perr := Parse(c.file)
		t.Run(c.name, func(t *testing.T) { checkOpenLike(t, path, perr) })
	}
	// An empty file many times over: nothing mapped, nothing left open.
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if f, err := Open(empty); f != nil || !errors.Is(err, ErrTruncated) {
			t.Fatalf("empty file: %v", err)
		}
	}
	if mapped(t, empty) {
		t.Error("empty file left mapped")
	}
	if got := openFDs(t); fds >= 0 && got != fds {
		t.Errorf("%d file descriptors open before, %d after", fds, got)
	}

	if _, err := Open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

// checkOpenLike asserts Open(path) fails like Parse did (perr) and keeps
// no mapping of the file.
func checkOpenLike(t *testing.T, path string, perr error) {
	t.Helper()
	f, err := Open(path)
	if f != nil || err == nil {
		t.Fatalf("Open succeeded where Parse failed with %v", perr)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) != errors.Is(perr, s) {
			t.Errorf("Open: %v; Parse: %v", err, perr)
		}
	}
	// Parse's message, with the path added (files under 4 bytes are
	// refused before mapping, with a message of their own).
	if !strings.Contains(err.Error(), path) {
		t.Errorf("Open's error does not name the file: %v", err)
	}
	if st, serr := os.Stat(path); serr == nil && st.Size() >= 4 && !strings.HasPrefix(err.Error(), perr.Error()) {
		t.Errorf("Open: %v; Parse: %v", err, perr)
	}
	if mapped(t, path) {
		t.Errorf("%s is still mapped after a failed Open", path)
	}
}

func TestOpenMapsAndCloseUnmaps(t *testing.T) {
	v := smallValid(t)
	path := filepath.Join(t.TempDir(), "ok.gguf")
	if err := os.WriteFile(path, v, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/self/maps"); err == nil && !mapped(t, path) {
		t.Error("Open left no mapping; the leak check would see nothing")
	}
	p, _ := Parse(v)
	for i := range f.Tensors {
		if !bytes.Equal(f.Data(&f.Tensors[i]), p.Data(&p.Tensors[i])) {
			t.Errorf("tensor %q differs between Open and Parse", f.Tensors[i].Name)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if mapped(t, path) {
		t.Error("still mapped after Close")
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// mapped reports whether path appears in /proc/self/maps (false where
// there is no procfs).
func mapped(t *testing.T, path string) bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	return bytes.Contains(maps, []byte(path))
}

// openFDs counts this process's open descriptors, -1 without procfs.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func TestWriterRejectsBadAlignment(t *testing.T) {
	for _, a := range []Value{Uint32(0), Uint32(3), Uint32(1 << 17), Uint32(math.MaxUint32), Uint64(64), Int32(64), String("32")} {
		w := NewWriter()
		w.Set("general.alignment", a)
		if err := w.AddTensor("w", TypeF32, []uint64{1}, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "general.alignment") {
			t.Errorf("alignment %s %v: got %v", a.Type, a, err)
		}
	}
	for _, a := range []uint32{1, 2, 64, MaxAlignment} {
		w := NewWriter()
		w.Set("general.alignment", Uint32(a))
		if err := w.AddTensor("w", TypeI8, []uint64{3}, []byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		f, err := Parse(writeBytes(t, w))
		if err != nil || f.Alignment != uint64(a) || f.DataOffset%uint64(a) != 0 {
			t.Errorf("alignment %d: %v", a, err)
		}
	}
}
