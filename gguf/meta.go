package gguf

import (
	"errors"
	"fmt"
	"math"
)

// ErrMissingKey is wrapped by every accessor when a required key is absent.
var ErrMissingKey = errors.New("missing metadata key")

func (f *File) get(key string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf: %w %q", ErrMissingKey, key)
	}
	return v, nil
}

func typeErr(key string, v Value, want string) error {
	return fmt.Errorf("gguf: metadata key %q holds %s, want %s: %w", key, v.Type, want, ErrInvalid)
}

// String returns a required string value.
func (f *File) String(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.Str()
	if !ok {
		return "", typeErr(key, v, "string")
	}
	return s, nil
}

// Uint returns a required non-negative integer value of any width.
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	if u, ok := v.Raw().(uint64); ok {
		return u, nil
	}
	i, ok := v.Int()
	if !ok || v.Type == TypeBool || i < 0 {
		return 0, typeErr(key, v, "a non-negative integer")
	}
	return uint64(i), nil
}

// Uint32 returns a required integer that must fit in 32 bits.
func (f *File) Uint32(key string) (uint32, error) {
	u, err := f.Uint(key)
	if err != nil {
		return 0, err
	}
	if u > math.MaxUint32 {
		return 0, fmt.Errorf("gguf: metadata key %q: %d does not fit in 32 bits: %w", key, u, ErrInvalid)
	}
	return uint32(u), nil
}

// Float returns a required number (float or integer) as float64.
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Float()
	if !ok {
		return 0, typeErr(key, v, "a number")
	}
	return x, nil
}

// Bool returns a required bool.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.BoolValue()
	if !ok {
		return false, typeErr(key, v, "bool")
	}
	return b, nil
}

// Strings returns a required array of strings.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.StringSlice()
	if !ok {
		return nil, typeErr(key, v, "an array of strings")
	}
	return s, nil
}

// Int32s returns a required integer array as int32.
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.Int32Slice()
	if !ok {
		return nil, typeErr(key, v, "an array of 32-bit integers")
	}
	return s, nil
}

// Float32s returns a required array of float32.
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.Float32Slice()
	if !ok {
		return nil, typeErr(key, v, "an array of f32")
	}
	return s, nil
}

// Optional returns fn(key) when key is present, def when it is absent, and
// fn's error when the key is present but malformed.
func Optional[T any](f *File, key string, fn func(string) (T, error), def T) (T, error) {
	if _, ok := f.Get(key); !ok {
		return def, nil
	}
	return fn(key)
}

// Architecture is general.architecture.
func (f *File) Architecture() (string, error) { return f.String("general.architecture") }

// Hparams are the architecture hyper-parameters llama.cpp stores under
// "<arch>.*" keys.
type Hparams struct {
	Arch              string
	Name              string
	FileType          uint32 // general.file_type (llama_ftype), 0 when absent
	ContextLength     uint32
	EmbeddingLength   uint32
	BlockCount        uint32
	FeedForwardLength uint32
	HeadCount         uint32
	HeadCountKV       uint32 // equals HeadCount when absent (no GQA)
	KeyLength         uint32 // head dimension of Q/K; EmbeddingLength/HeadCount when absent
	ValueLength       uint32 // head dimension of V; KeyLength when absent
	RopeDimension     uint32 // rotated dimensions; KeyLength when absent
	RopeFreqBase      float32
	RopeScalingType   string // "", "none", "linear", "yarn", "longrope", "llama3"
	RopeScalingFactor float32
	RopeOrigContext   uint32
	NormEpsilon       float32 // layer_norm_rms_epsilon
	VocabSize         uint32  // <arch>.vocab_size, else the token count
	// SlidingWindow is attention.sliding_window: how many positions a
	// token attends to, itself included; 0 when absent (no window).
	SlidingWindow uint32
}

// Hparams reads the hyper-parameters; a missing required key is an error
// naming it.
func (f *File) Hparams() (Hparams, error) {
	var h Hparams
	var err error
	if h.Arch, err = f.Architecture(); err != nil {
		return h, err
	}
	a := func(k string) string { return h.Arch + "." + k }
	first := func(errs ...error) error { return errors.Join(errs...) }
	var e [16]error
	h.Name, e[0] = Optional(f, "general.name", f.String, "")
	h.FileType, e[1] = Optional(f, "general.file_type", f.Uint32, 0)
	h.ContextLength, e[2] = f.Uint32(a("context_length"))
	h.EmbeddingLength, e[3] = f.Uint32(a("embedding_length"))
	h.BlockCount, e[4] = f.Uint32(a("block_count"))
	h.FeedForwardLength, e[5] = f.Uint32(a("feed_forward_length"))
	h.HeadCount, e[6] = f.Uint32(a("attention.head_count"))
	if err := first(e[:]...); err != nil {
		return h, err
	}
	for _, p := range [...]struct {
		key string
		v   uint32
	}{{"attention.head_count", h.HeadCount}, {"embedding_length", h.EmbeddingLength}, {"block_count", h.BlockCount}} {
		if p.v == 0 {
			return h, fmt.Errorf("gguf: %s = 0, want at least 1: %w", a(p.key), ErrInvalid)
		}
	}
	h.HeadCountKV, e[7] = Optional(f, a("attention.head_count_kv"), f.Uint32, h.HeadCount)
	h.KeyLength, e[8] = Optional(f, a("attention.key_length"), f.Uint32, h.EmbeddingLength/h.HeadCount)
	h.ValueLength, e[9] = Optional(f, a("attention.value_length"), f.Uint32, h.KeyLength)
	h.RopeDimension, e[10] = Optional(f, a("rope.dimension_count"), f.Uint32, h.KeyLength)
	base, e11 := Optional(f, a("rope.freq_base"), f.Float, 10000)
	h.RopeScalingType, e[12] = Optional(f, a("rope.scaling.type"), f.String, "")
	factor, e13 := Optional(f, a("rope.scaling.factor"), f.Float, 0)
	h.RopeOrigContext, e[14] = Optional(f, a("rope.scaling.original_context_length"), f.Uint32, 0)
	eps, e15 := Optional(f, a("attention.layer_norm_rms_epsilon"), f.Float, 1e-5)
	e[11], e[13], e[15] = e11, e13, e15
	if err := first(e[:]...); err != nil {
		return h, err
	}
	h.RopeFreqBase, h.RopeScalingFactor, h.NormEpsilon = float32(base), float32(factor), float32(eps)
	if h.HeadCountKV == 0 || h.HeadCount%h.HeadCountKV != 0 {
		return h, fmt.Errorf("gguf: %s = %d does not divide %s = %d: %w", a("attention.head_count_kv"), h.HeadCountKV,
			a("attention.head_count"), h.HeadCount, ErrInvalid)
	}
	vs, err := Optional(f, a("vocab_size"), f.Uint32, 0)
	if err != nil {
		return h, err
	}
	if vs == 0 {
		if v, ok := f.Get("tokenizer.ggml.tokens"); ok {
			vs = uint32(v.Len())
		}
	}
	h.VocabSize = vs
	if h.SlidingWindow, err = Optional(f, a("attention.sliding_window"), f.Uint32, 0); err != nil {
		return h, err
	}
	return h, nil
}

// TokenizerMeta is the vocabulary as llama.cpp stores it under
// tokenizer.ggml.*. Ids are -1 when absent.
type TokenizerMeta struct {
	Model          string // "gpt2" (byte-level BPE), "llama" (SentencePiece), …
	Pre            string // pre-tokenizer name
	Tokens         []string
	Scores         []float32 // nil when absent
	TokenTypes     []int32   // nil when absent
	Merges         []string  // nil when absent
	BOS, EOS, EOT  int32
	PAD, UNK       int32
	AddBOS, AddEOS bool
	AddSpacePrefix bool
	ChatTemplate   string
}

// Tokenizer reads the vocabulary metadata. Array lengths are checked
// against the token count.
func (f *File) Tokenizer() (*TokenizerMeta, error) {
	t := &TokenizerMeta{}
	var err error
	if t.Model, err = f.String("tokenizer.ggml.model"); err != nil {
		return nil, err
	}
	if t.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return nil, err
	}
	n := len(t.Tokens)
	var e [13]error
	t.Pre, e[0] = Optional(f, "tokenizer.ggml.pre", f.String, "default")
	t.Scores, e[1] = Optional(f, "tokenizer.ggml.scores", f.Float32s, nil)
	t.TokenTypes, e[2] = Optional(f, "tokenizer.ggml.token_type", f.Int32s, nil)
	t.Merges, e[3] = Optional(f, "tokenizer.ggml.merges", f.Strings, nil)
	id := func(k string) (int32, error) {
		u, err := Optional(f, "tokenizer.ggml."+k, f.Uint32, math.MaxUint32)
		if err != nil || u == math.MaxUint32 {
			return -1, err
		}
		if u >= uint32(n) {
			return -1, fmt.Errorf("gguf: tokenizer.ggml.%s %d is outside the %d-token vocabulary: %w", k, u, n, ErrInvalid)
		}
		return int32(u), nil
	}
	t.BOS, e[4] = id("bos_token_id")
	t.EOS, e[5] = id("eos_token_id")
	t.EOT, e[6] = id("eot_token_id")
	t.PAD, e[7] = id("padding_token_id")
	t.UNK, e[8] = id("unknown_token_id")
	t.AddBOS, e[9] = Optional(f, "tokenizer.ggml.add_bos_token", f.Bool, t.Model == "llama")
	t.AddEOS, e[10] = Optional(f, "tokenizer.ggml.add_eos_token", f.Bool, false)
	t.AddSpacePrefix, e[11] = Optional(f, "tokenizer.ggml.add_space_prefix", f.Bool, t.Model == "llama")
	t.ChatTemplate, e[12] = Optional(f, "tokenizer.chat_template", f.String, "")
	if err := errors.Join(e[:]...); err != nil {
		return nil, err
	}
	if t.Scores != nil && len(t.Scores) != n {
		return nil, fmt.Errorf("gguf: tokenizer.ggml.scores has %d entries for %d tokens: %w", len(t.Scores), n, ErrInvalid)
	}
	if t.TokenTypes != nil && len(t.TokenTypes) != n {
		return nil, fmt.Errorf("gguf: tokenizer.ggml.token_type has %d entries for %d tokens: %w", len(t.TokenTypes), n, ErrInvalid)
	}
	return t, nil
}

// FileTypeName names a general.file_type value (llama.cpp's llama_ftype)
// as llama.cpp's loader logs it ("mostly Q8_0", "Q4_K_M"); false for a
// value without a name here.
func FileTypeName(ft uint32) (string, bool) {
	n, ok := fileTypeNames[ft]
	return n, ok
}

var fileTypeNames = map[uint32]string{0: "all F32", 1: "mostly F16", 2: "mostly Q4_0", 3: "mostly Q4_1", 7: "mostly Q8_0",
	8: "mostly Q5_0", 9: "mostly Q5_1", 10: "mostly Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L",
	14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "mostly BF16", 38: "MXFP4 MoE"}
