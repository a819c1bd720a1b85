package synth

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
)

// Weights are trained values for a shape's tensors, by llama.cpp tensor
// name, in row-major order with PyTorch's shape (rows first, the reverse
// of ggml's order); Q and K rows in HF's order (Build permutes them as
// llama.cpp's converter does). With Options.Weights set, Build writes these
// values instead of random ones.
type Weights map[string]Tensor

// Tensor is one float32 tensor of Weights.
type Tensor struct {
	Shape []int
	Data  []float32
}

// ReadSafetensors reads a .safetensors file of F32, F16 or BF16 tensors
// (the format of HF and of tools/train/train.py): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the data.
func ReadSafetensors(path string) (Weights, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("%s: not a safetensors file (%d bytes)", path, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("%s: header of %d bytes in a file of %d", path, n, len(b))
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		return nil, fmt.Errorf("%s: header: %v", path, err)
	}
	data := b[8+n:]
	w := Weights{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			Dtype   string   `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %v", path, name, err)
		}
		elems := uint64(1)
		for _, d := range t.Shape {
			if d < 0 || d > 1<<31 {
				return nil, fmt.Errorf("%s: tensor %s: bad shape %v", path, name, t.Shape)
			}
			elems *= uint64(d)
		}
		size := map[string]uint64{"F32": 4, "F16": 2, "BF16": 2}[t.Dtype]
		if size == 0 {
			return nil, fmt.Errorf("%s: tensor %s: dtype %s (F32, F16 or BF16 only)", path, name, t.Dtype)
		}
		if len(t.Offsets) != 2 || t.Offsets[0] > t.Offsets[1] || t.Offsets[1] > uint64(len(data)) || t.Offsets[1]-t.Offsets[0] != elems*size {
			return nil, fmt.Errorf("%s: tensor %s: byte range %v does not hold %v %s in %d data bytes", path, name, t.Offsets, t.Shape, t.Dtype, len(data))
		}
		src := data[t.Offsets[0]:t.Offsets[1]]
		x := make([]float32, elems)
		for i := range x {
			switch t.Dtype {
			case "F32":
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
			case "BF16":
				x[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
			case "F16":
				x[i] = f16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
			}
		}
		w[name] = Tensor{Shape: t.Shape, Data: x}
	}
	return w, nil
}

func f16ToF32(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * float32(math.Ldexp(m, -24))
	case 31:
		if m == 0 {
			return sign * float32(math.Inf(1))
		}
		return float32(math.NaN())
	}
	return sign * float32(math.Ldexp(1+m/1024, e-15))
}

// check reports every tensor of specs that w lacks or holds with another
// shape, and every tensor of w that specs do not name.
func (w Weights) check(specs []tensorSpec) error {
	var msgs []string
	seen := map[string]bool{}
	for _, t := range specs {
		if t.fixed != nil {
			continue
		}
		seen[t.name] = true
		x, ok := w[t.name]
		if !ok {
			msgs = append(msgs, "missing "+t.name)
			continue
		}
		want := make([]int, len(t.dims))
		for i, d := range t.dims {
			want[len(t.dims)-1-i] = int(d)
		}
		if !slices.Equal(x.Shape, want) {
			msgs = append(msgs, fmt.Sprintf("%s is %v, the shape needs %v", t.name, x.Shape, want))
		}
	}
	var extra []string
	for name := range w {
		if !seen[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		msgs = append(msgs, "unexpected "+name)
	}
	if len(msgs) > 0 {
		if len(msgs) > 8 {
			msgs = append(msgs[:8], fmt.Sprintf("and %d more", len(msgs)-8))
		}
		return fmt.Errorf("synth: weights do not fit the shape: %s", strings.Join(msgs, "; "))
	}
	return nil
}
