package gguf

import (
	"bytes"
	"reflect"
	"testing"
)

func allValues() []KV {
	return []KV{
		{"general.architecture", String("llama")},
		{"t.u8", Uint8(200)}, {"t.i8", Int8(-5)}, {"t.u16", Uint16(60000)}, {"t.i16", Int16(-30000)},
		{"t.u32", Uint32(4e9)}, {"t.i32", Int32(-2e9)}, {"t.f32", Float32(1.5)}, {"t.bool", Bool(true)},
		{"t.str", String("héllo ▁ world")}, {"t.u64", Uint64(1 << 60)}, {"t.i64", Int64(-1 << 60)}, {"t.f64", Float64(2.25)},
		{"a.u8", Uint8s([]uint8{1, 2})}, {"a.i8", Int8s([]int8{-1, 2})}, {"a.u16", Uint16s([]uint16{1, 65535})},
		{"a.i16", Int16s([]int16{-1})}, {"a.u32", Uint32s([]uint32{7})}, {"a.i32", Int32s([]int32{-7, 8})},
		{"a.f32", Float32s([]float32{0.5, -0.25})}, {"a.bool", Bools([]bool{true, false})},
		{"a.str", Strings([]string{"a", "", "b c"})}, {"a.u64", Uint64s([]uint64{1 << 63})},
		{"a.i64", Int64s([]int64{-1})}, {"a.f64", Float64s([]float64{3.5})},
		{"a.nested", Arrays([]Value{Int32s([]int32{1, 2}), Int32s([]int32{})})},
		{"a.empty", Strings([]string{})},
	}
}

func TestRoundTripMetadataAndTensors(t *testing.T) {
	w := NewWriter()
	for _, kv := range allValues() {
		w.Set(kv.Key, kv.Value)
	}
	f32 := make([]byte, 4*8*3)
	for i := range f32 {
		f32[i] = byte(i)
	}
	q8 := make([]byte, 34*2)
	for i := range q8 {
		q8[i] = byte(255 - i)
	}
	if err := w.AddTensor("a.weight", TypeF32, []uint64{8, 3}, f32); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b.weight", TypeQ8_0, []uint64{64}, q8); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != DefaultAlignment || f.DataOffset%DefaultAlignment != 0 {
		t.Fatalf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	want := allValues()
	if len(f.KVs) != len(want) {
		t.Fatalf("%d kvs, want %d", len(f.KVs), len(want))
	}
	for i, kv := range want {
		got := f.KVs[i]
		if got.Key != kv.Key || got.Value.Type != kv.Value.Type || got.Value.Elem != kv.Value.Elem || !reflect.DeepEqual(got.Value.Raw(), kv.Value.Raw()) {
			t.Errorf("kv %d: got %s=%v (%#v), want %s=%v (%#v)", i, got.Key, got.Value, got.Value.Raw(), kv.Key, kv.Value, kv.Value.Raw())
		}
	}
	for name, data := range map[string][]byte{"a.weight": f32, "b.weight": q8} {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("tensor %s missing", name)
		}
		if !bytes.Equal(f.Data(ti), data) {
			t.Errorf("tensor %s bytes differ", name)
		}
	}
	// The second write of the same content is byte-identical.
	var buf2 bytes.Buffer
	if _, err := w.WriteTo(&buf2); err != nil || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Fatalf("rewrite differs (err %v)", err)
	}
}

func TestTypeTable(t *testing.T) {
	// Spot checks against ggml's block structs.
	cases := map[Type][2]uint64{
		TypeQ4_0: {32, 18}, TypeQ8_0: {32, 34}, TypeQ2_K: {256, 84}, TypeQ3_K: {256, 110},
		TypeQ4_K: {256, 144}, TypeQ5_K: {256, 176}, TypeQ6_K: {256, 210}, TypeQ8_K: {256, 292},
		TypeIQ2_XXS: {256, 66}, TypeIQ2_XS: {256, 74}, TypeIQ3_XXS: {256, 98}, TypeIQ1_S: {256, 50},
		TypeIQ4_NL: {32, 18}, TypeIQ3_S: {256, 110}, TypeIQ2_S: {256, 82}, TypeIQ4_XS: {256, 136},
		TypeIQ1_M: {256, 56}, TypeTQ1_0: {256, 54}, TypeTQ2_0: {256, 66}, TypeMXFP4: {32, 17},
		TypeBF16: {1, 2}, TypeF64: {1, 8}, TypeI64: {1, 8},
	}
	for typ, want := range cases {
		ti, ok := typ.Info()
		if !ok || ti.BlockSize != want[0] || ti.BlockBytes != want[1] {
			t.Errorf("%s: got %+v, want block %d bytes %d", typ, ti, want[0], want[1])
		}
	}
	if len(Types()) != 32 {
		t.Errorf("%d types, want 32", len(Types()))
	}
	for _, bad := range []Type{4, 5, 31, 32, 33, 36, 37, 38, 40, 1000} {
		if bad.Valid() {
			t.Errorf("type %d should be unknown", bad)
		}
	}
}
