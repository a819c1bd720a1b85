package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"ringlm/gguf"
)

// ErrUnknownArch is wrapped when general.architecture names a model this
// package cannot run.
var ErrUnknownArch = errors.New("unsupported architecture")

// RopeStyle says which dimensions RoPE rotates together, as llama.cpp
// defines it per architecture.
type RopeStyle int

const (
	// RopeNormal rotates adjacent pairs (x[2i], x[2i+1]): llama, whose Q/K
	// rows the converter permuted into that order.
	RopeNormal RopeStyle = iota
	// RopeNeox rotates halves (x[i], x[i+d/2]): qwen2, phi3.
	RopeNeox
)

// arch describes what differs between architectures.
type arch struct {
	rope      RopeStyle
	fusedQKV  bool // phi3: attn_qkv
	fusedUp   bool // phi3: ffn_up holds gate then up
	optBias   bool // qwen2: attn_{q,k,v}.bias
	ropeFreqs bool // llama: optional rope_freqs (Llama 3.1+ scaling)
}

var archs = map[string]arch{
	"llama": {rope: RopeNormal, ropeFreqs: true},
	"qwen2": {rope: RopeNeox, optBias: true},
	"phi3":  {rope: RopeNeox, fusedQKV: true, fusedUp: true},
}

// Architectures lists the supported general.architecture values.
func Architectures() []string {
	out := make([]string, 0, len(archs))
	for a := range archs {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// Config is what the forward pass needs from the metadata.
type Config struct {
	Arch       string
	Dim        int
	Layers     int
	Heads      int
	KVHeads    int
	HeadDim    int
	FFN        int
	Vocab      int
	Context    int
	NormEps    float32
	RopeBase   float32
	RopeDim    int
	Rope       RopeStyle
	RopeScale  float32   // linear position scaling (rope.scaling.type linear), 1 otherwise
	RopeFactor []float32 // per-frequency divisors (rope_freqs), nil when absent
}

// KVDim is the width of one position's keys (or values) in one layer.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// Layer holds one transformer block's weights.
type Layer struct {
	AttnNorm   []float32
	Q, K, V    Matrix // Q holds Q, K and V rows when the architecture fuses them
	QB, KB, VB []float32
	Out        Matrix
	FFNNorm    []float32
	Gate, Up   Matrix // Up holds gate then up rows when fused
	Down       Matrix
}

// Model is a loaded model. Matrices are views into the GGUF mapping,
// which must stay open while the model is used.
type Model struct {
	Config
	arch    arch
	Embed   Matrix
	Layers  []Layer
	OutNorm []float32
	Output  Matrix // token_embd when tied
	pool    *pool
	scratch scratch
}

// Load builds a model from an open GGUF file, checking every tensor's
// presence, type and shape.
func Load(f *gguf.File) (*Model, error) {
	h, err := f.Hparams()
	if err != nil {
		return nil, err
	}
	a, ok := archs[h.Arch]
	if !ok {
		return nil, fmt.Errorf("model: %w %q (supported: %s)", ErrUnknownArch, h.Arch, strings.Join(Architectures(), ", "))
	}
	c := Config{Arch: h.Arch, Dim: int(h.EmbeddingLength), Layers: int(h.BlockCount), Heads: int(h.HeadCount),
		KVHeads: int(h.HeadCountKV), HeadDim: int(h.KeyLength), FFN: int(h.FeedForwardLength), Context: int(h.ContextLength),
		NormEps: h.NormEpsilon, RopeBase: h.RopeFreqBase, RopeDim: int(h.RopeDimension), Rope: a.rope, RopeScale: 1}
	if h.ValueLength != h.KeyLength {
		return nil, fmt.Errorf("model: key length %d differs from value length %d", h.KeyLength, h.ValueLength)
	}
	if c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 || c.HeadDim%2 != 0 {
		return nil, fmt.Errorf("model: rope dimension %d does not fit head dimension %d", c.RopeDim, c.HeadDim)
	}
	switch h.RopeScalingType {
	case "", "none":
	case "linear":
		if h.RopeScalingFactor > 0 {
			c.RopeScale = 1 / h.RopeScalingFactor
		}
	default:
		return nil, fmt.Errorf("model: rope scaling %q is not supported yet", h.RopeScalingType)
	}
	m := &Model{Config: c, arch: a, pool: defaultPool}
	mat := func(name string, rows, cols int) (Matrix, error) {
		t, ok := f.Tensor(name)
		if !ok {
			return Matrix{}, fmt.Errorf("model: missing tensor %q", name)
		}
		if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || (rows > 0 && t.Dims[1] != uint64(rows)) {
			return Matrix{}, fmt.Errorf("model: tensor %q has shape %v, want [%d %d]", name, t.Dims, cols, rows)
		}
		return newMatrix(name, t, f.Data(t))
	}
	if m.Embed, err = mat("token_embd.weight", 0, c.Dim); err != nil {
		return nil, err
	}
	c.Vocab = m.Embed.Rows
	m.Config.Vocab = c.Vocab
	if _, ok := f.Tensor("output.weight"); ok {
		if m.Output, err = mat("output.weight", c.Vocab, c.Dim); err != nil {
			return nil, err
		}
	} else {
		m.Output = m.Embed
	}
	if m.OutNorm, err = vector(f, "output_norm.weight", c.Dim); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok && a.ropeFreqs {
		if m.RopeFactor, err = vector(f, "rope_freqs.weight", c.RopeDim/2); err != nil {
			return nil, err
		}
	}
	q, kv := c.Heads*c.HeadDim, c.KVDim()
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		var L Layer
		errs := make([]error, 0, 12)
		add := func(err error) { errs = append(errs, err) }
		var e error
		L.AttnNorm, e = vector(f, p+"attn_norm.weight", c.Dim)
		add(e)
		if a.fusedQKV {
			L.Q, e = mat(p+"attn_qkv.weight", q+2*kv, c.Dim)
			add(e)
		} else {
			L.Q, e = mat(p+"attn_q.weight", q, c.Dim)
			add(e)
			L.K, e = mat(p+"attn_k.weight", kv, c.Dim)
			add(e)
			L.V, e = mat(p+"attn_v.weight", kv, c.Dim)
			add(e)
		}
		if a.optBias {
			if _, ok := f.Tensor(p + "attn_q.bias"); ok {
				L.QB, e = vector(f, p+"attn_q.bias", q)
				add(e)
				L.KB, e = vector(f, p+"attn_k.bias", kv)
				add(e)
				L.VB, e = vector(f, p+"attn_v.bias", kv)
				add(e)
			}
		}
		L.Out, e = mat(p+"attn_output.weight", c.Dim, q)
		add(e)
		L.FFNNorm, e = vector(f, p+"ffn_norm.weight", c.Dim)
		add(e)
		if a.fusedUp {
			L.Up, e = mat(p+"ffn_up.weight", 2*c.FFN, c.Dim)
			add(e)
		} else {
			L.Gate, e = mat(p+"ffn_gate.weight", c.FFN, c.Dim)
			add(e)
			L.Up, e = mat(p+"ffn_up.weight", c.FFN, c.Dim)
			add(e)
		}
		L.Down, e = mat(p+"ffn_down.weight", c.Dim, c.FFN)
		add(e)
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		m.Layers = append(m.Layers, L)
	}
	return m, nil
}

// WeightBytes is the bytes of weights one decode step reads (the tied
// embedding counted once as the output head, as a GPU reads it).
func (m *Model) WeightBytes() int64 {
	n := int64(len(m.Output.Data)) + int64(len(m.OutNorm))*4
	for _, L := range m.Layers {
		for _, mm := range []Matrix{L.Q, L.K, L.V, L.Out, L.Gate, L.Up, L.Down} {
			n += int64(len(mm.Data))
		}
		n += int64(len(L.AttnNorm)+len(L.FFNNorm)+len(L.QB)+len(L.KB)+len(L.VB)) * 4
	}
	return n
}
