package synth

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ringlm/gguf"
)

// writeSafetensors writes w as a safetensors file of F32 tensors, as
// tools/train/train.py does.
func writeSafetensors(t *testing.T, w Weights) string {
	t.Helper()
	names := make([]string, 0, len(w))
	for n := range w {
		names = append(names, n)
	}
	slices.Sort(names)
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, n := range names {
		x := w[n]
		off := len(data)
		for _, v := range x.Data {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		hdr[n] = map[string]any{"dtype": "F32", "shape": x.Shape, "data_offsets": []int{off, len(data)}}
	}
	h, _ := json.Marshal(hdr)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// randomWeights fills every tensor of shape s with distinct values.
func randomWeights(s Shape, vocab int) Weights {
	w := Weights{}
	for i, t := range s.tensors(vocab) {
		if t.fixed != nil {
			continue
		}
		shape := make([]int, len(t.dims))
		n := 1
		for j, d := range t.dims {
			shape[len(t.dims)-1-j] = int(d)
			n *= int(d)
		}
		x := make([]float32, n)
		for k := range x {
			x[k] = float32(math.Sin(float64(k*7+i*1013))) * 0.5
		}
		w[t.name] = Tensor{Shape: shape, Data: x}
	}
	return w
}

// Trained weights go through a safetensors file into the GGUF unchanged
// (F32), with Q and K rows permuted as llama.cpp's converter does.
func TestWeightsRoundTrip(t *testing.T) {
	s, err := Lookup("gocoder", "")
	if err != nil {
		t.Fatal(err)
	}
	s.Layers = 2 // keep the test small
	want := randomWeights(s, s.Vocab)
	got, err := ReadSafetensors(writeSafetensors(t, want))
	if err != nil {
		t.Fatal(err)
	}
	_, path := writeModel(t, Options{Shape: s, Type: gguf.TypeF32, Weights: got})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		raw := f.Data(ti)
		x := make([]float32, len(raw)/4)
		for k := range x {
			x[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
		}
		switch {
		case strings.HasSuffix(ti.Name, "attn_q.weight"):
			x = UnpermuteQK(x, int(ti.Dims[0]), s.Heads)
		case strings.HasSuffix(ti.Name, "attn_k.weight"):
			x = UnpermuteQK(x, int(ti.Dims[0]), s.KVHeads)
		}
		if !slices.Equal(x, want[ti.Name].Data) {
			t.Fatalf("%s: values differ", ti.Name)
		}
	}
	// F16 rounds each value once.
	_, path = writeModel(t, Options{Shape: s, Type: gguf.TypeF16, Weights: got})
	f16, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f16.Close()
	ti := &f16.Tensors[0]
	raw := f16.Data(ti)
	for k, v := range want[ti.Name].Data[:64] {
		if g := f16ToF32(binary.LittleEndian.Uint16(raw[2*k:])); math.Abs(float64(g-v)) > 1e-3*math.Abs(float64(v))+1e-7 {
			t.Fatalf("%s[%d]: f16 %g, want %g", ti.Name, k, g, v)
		}
	}
}

func TestWeightsErrors(t *testing.T) {
	s, _ := Lookup("gocoder", "")
	s.Layers = 1
	good := randomWeights(s, s.Vocab)
	for name, edit := range map[string]func(w Weights) string{
		"missing": func(w Weights) string { delete(w, "blk.0.ffn_up.weight"); return "missing blk.0.ffn_up.weight" },
		"shape": func(w Weights) string {
			x := w["blk.0.attn_k.weight"]
			x.Shape = []int{x.Shape[1], x.Shape[0]}
			w["blk.0.attn_k.weight"] = x
			return "blk.0.attn_k.weight is [256 64], the shape needs [64 256]"
		},
		"extra": func(w Weights) string {
			w["lm_head.weight"] = Tensor{Shape: []int{1}, Data: []float32{1}}
			return "unexpected lm_head.weight"
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := Weights{}
			for k, v := range good {
				w[k] = v
			}
			msg := edit(w)
			_, err := Build(Options{Shape: s, Type: gguf.TypeF16, Weights: w})
			if err == nil || !strings.Contains(err.Error(), msg) {
				t.Fatalf("error %v, want one containing %q", err, msg)
			}
		})
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		"short":    {1, 2},
		"bighdr":   binary.LittleEndian.AppendUint64(nil, 1<<40),
		"badjson":  append(binary.LittleEndian.AppendUint64(nil, 3), "{x}"...),
		"badrange": append(binary.LittleEndian.AppendUint64(nil, 62), `{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}}        `...),
		"dtype":    append(binary.LittleEndian.AppendUint64(nil, 56), `{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`...),
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		if _, err := ReadSafetensors(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestF16ToF32(t *testing.T) {
	for h, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x0001: float32(math.Ldexp(1, -24)), 0x7bff: 65504, 0x3555: 0.33325195} {
		if g := f16ToF32(h); g != want {
			t.Errorf("%#x: %g, want %g", h, g, want)
		}
	}
}
