package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"ringlm/gguf"
)

// ErrUnknownArch is wrapped when general.architecture names a model this
// package cannot run.
var ErrUnknownArch = errors.New("unsupported architecture")

// ErrHparam is wrapped when a hyperparameter is outside the values the
// forward pass is defined for (a NaN or non-positive RoPE base or norm
// epsilon, a zero size): such a model would load and then answer NaN
// logits, so Load refuses it, naming the key and its value.
var ErrHparam = errors.New("hyperparameter out of its domain")

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
	// SlidingWindow is how many positions a token attends to, itself
	// included: the token at p sees max(0, p-SlidingWindow+1)..p, as
	// HF transformers' sliding_window and llama.cpp's n_swa count
	// them. 0: every earlier position.
	SlidingWindow int
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
	if c.SlidingWindow, err = slidingWindow(f, h); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	switch h.RopeScalingType {
	case "", "none":
	case "linear":
		// Absent or 0 means no scaling, as in llama.cpp.
		if f := h.RopeScalingFactor; f != 0 {
			if !finitePositive(f) {
				return nil, hparamError(c.Arch+".rope.scaling.factor", f, "a finite number > 0, or 0 for none")
			}
			c.RopeScale = 1 / f
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
		// Each divides a RoPE frequency.
		for i, v := range m.RopeFactor {
			if !finitePositive(v) {
				return nil, hparamError(fmt.Sprintf("rope_freqs.weight[%d]", i), v, "a finite number > 0")
			}
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

// slidingWindow is <arch>.attention.sliding_window. Phi-3 files
// converted before the key existed lack it; llama.cpp (PR 8931) then
// gives the 4k-context Phi-3 mini and medium their window, 2047, as
// their HF configs do, and ringlm does the same. (The 128k models' values,
// 262144 and 131072, never cut into their context: no window.) A
// per-layer pattern (attention.sliding_window_pattern, Gemma-style
// alternating layers) is not something these architectures use; one
// that is not all-sliding is refused rather than applied to every layer.
func slidingWindow(f *gguf.File, h gguf.Hparams) (int, error) {
	key := h.Arch + ".attention.sliding_window"
	w := int(h.SlidingWindow)
	if _, ok := f.Get(key); !ok && h.Arch == "phi3" && (h.BlockCount == 32 || h.BlockCount == 40) && h.ContextLength == 4096 {
		w = 2047
	}
	if v, ok := f.Get(h.Arch + ".attention.sliding_window_pattern"); ok && w > 0 {
		pat, ok := v.Raw().([]bool)
		if !ok || slices.Contains(pat, false) {
			return 0, fmt.Errorf("model: %s.attention.sliding_window_pattern: a window on some layers only is not supported", h.Arch)
		}
	}
	return w, nil
}

// check refuses the hyperparameters the forward pass is not defined for.
// The head counts, the width and the depth were checked when the
// metadata was read (gguf.File.Hparams).
func (c *Config) check() error {
	key := func(k string) string { return c.Arch + "." + k }
	for _, p := range [...]struct {
		key string
		v   int
	}{{"context_length", c.Context}, {"feed_forward_length", c.FFN}, {"attention.key_length", c.HeadDim}} {
		if p.v <= 0 {
			return hparamError(key(p.key), p.v, "at least 1")
		}
	}
	if c.HeadDim%2 != 0 {
		return hparamError(key("attention.key_length"), c.HeadDim, "an even number (RoPE rotates pairs)")
	}
	if c.RopeDim < 2 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return hparamError(key("rope.dimension_count"), c.RopeDim, fmt.Sprintf("an even number from 2 to the head dimension %d", c.HeadDim))
	}
	if !finitePositive(c.RopeBase) {
		return hparamError(key("rope.freq_base"), c.RopeBase, "a finite number > 0")
	}
	if !finitePositive(c.NormEps) {
		return hparamError(key("attention.layer_norm_rms_epsilon"), c.NormEps, "a finite number > 0")
	}
	return nil
}

func finitePositive(v float32) bool { return v > 0 && v <= math.MaxFloat32 }

// hparamError is one line that names the key, its value and the domain.
func hparamError(key string, v any, want string) error {
	return fmt.Errorf("model: %s = %v: %w (want %s)", key, v, ErrHparam, want)
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
