package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"ringlm/gguf"
	"ringlm/models"
)

func runShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("show", "show [FILE] [--json]  (no FILE: the built-in "+models.DefaultName+" model)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables (snake_case keys; metadata under its GGUF key names)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("expected one GGUF file, got %d arguments", len(pos))
	}
	var path string
	if len(pos) == 1 {
		path = pos[0]
	}
	f, err := openGGUF(path)
	if err != nil {
		return err
	}
	defer f.Close()
	s := summarize(path, f)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	printSummary(stdout, s)
	return nil
}

// openGGUF opens the GGUF file at path, or the built-in model's image
// (package models) when path is "", as runner.Open does: `show` and
// `tokenize` default to the model that `run` and `serve` use.
func openGGUF(path string) (*gguf.File, error) {
	if path != "" {
		return gguf.Open(path) // its errors name the file
	}
	f, err := gguf.Parse(models.Default())
	if err != nil {
		return nil, fmt.Errorf("the built-in model %s: %w", models.DefaultName, err)
	}
	return f, nil
}

type showTensor struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Shape  []uint64 `json:"shape"` // ggml order: shape[0] is the row length
	Bytes  uint64   `json:"bytes"`
	Offset uint64   `json:"offset"`
}

type showValue struct {
	Type  string `json:"type"`
	Value any    `json:"value,omitempty"` // scalars, and arrays of up to 16 elements
	Len   *int   `json:"len,omitempty"`   // arrays
	Head  any    `json:"head,omitempty"`  // the first elements of long arrays
}

// showHparams is gguf.Hparams under the names of the GGUF keys they come
// from (<arch>.context_length is context_length, rope.freq_base is
// rope_freq_base), snake_case as every other key of show --json.
type showHparams struct {
	Architecture        string  `json:"architecture"`
	Name                string  `json:"name,omitempty"`
	FileType            uint32  `json:"file_type"`
	ContextLength       uint32  `json:"context_length"`
	EmbeddingLength     uint32  `json:"embedding_length"`
	BlockCount          uint32  `json:"block_count"`
	FeedForwardLength   uint32  `json:"feed_forward_length"`
	HeadCount           uint32  `json:"head_count"`
	HeadCountKV         uint32  `json:"head_count_kv"`
	KeyLength           uint32  `json:"key_length"`
	ValueLength         uint32  `json:"value_length"`
	RopeDimensionCount  uint32  `json:"rope_dimension_count"`
	RopeFreqBase        float32 `json:"rope_freq_base"`
	RopeScalingType     string  `json:"rope_scaling_type,omitempty"`
	RopeScalingFactor   float32 `json:"rope_scaling_factor,omitempty"`
	RopeScalingOrigCtx  uint32  `json:"rope_scaling_original_context_length,omitempty"`
	LayerNormRMSEpsilon float32 `json:"layer_norm_rms_epsilon"`
	VocabSize           uint32  `json:"vocab_size"`
	SlidingWindow       uint32  `json:"sliding_window,omitempty"`
}

func newShowHparams(h gguf.Hparams) *showHparams {
	return &showHparams{Architecture: h.Arch, Name: h.Name, FileType: h.FileType, ContextLength: h.ContextLength,
		EmbeddingLength: h.EmbeddingLength, BlockCount: h.BlockCount, FeedForwardLength: h.FeedForwardLength,
		HeadCount: h.HeadCount, HeadCountKV: h.HeadCountKV, KeyLength: h.KeyLength, ValueLength: h.ValueLength,
		RopeDimensionCount: h.RopeDimension, RopeFreqBase: h.RopeFreqBase, RopeScalingType: h.RopeScalingType,
		RopeScalingFactor: h.RopeScalingFactor, RopeScalingOrigCtx: h.RopeOrigContext,
		LayerNormRMSEpsilon: h.NormEpsilon, VocabSize: h.VocabSize, SlidingWindow: h.SlidingWindow}
}

type showSummary struct {
	File       string               `json:"file"`    // the path; the embedded file's name for the built-in model
	BuiltIn    bool                 `json:"builtin"` // the model embedded in the binary
	Size       uint64               `json:"size"`
	Version    uint32               `json:"version"`
	Alignment  uint64               `json:"alignment"`
	DataOffset uint64               `json:"data_offset"`
	Params     uint64               `json:"params"`
	TensorData uint64               `json:"tensor_bytes"`
	Hparams    *showHparams         `json:"hparams,omitempty"`
	HparamsErr string               `json:"hparams_error,omitempty"`
	Metadata   map[string]showValue `json:"metadata"`
	keys       []string
	Tensors    []showTensor `json:"tensors"`
}

const arrayPreview = 16

func summarize(path string, f *gguf.File) *showSummary {
	s := &showSummary{File: path, Size: f.Size, Version: f.Version, Alignment: f.Alignment, DataOffset: f.DataOffset,
		Metadata: map[string]showValue{}}
	if path == "" {
		s.File, s.BuiltIn = models.DefaultFile, true
	}
	if _, ok := f.Get("general.architecture"); ok {
		if h, err := f.Hparams(); err == nil {
			s.Hparams = newShowHparams(h)
		} else {
			s.HparamsErr = err.Error()
		}
	}
	for _, kv := range f.KVs {
		v := showValue{Type: kv.Value.Type.String()}
		if kv.Value.Type == gguf.TypeArray {
			n := kv.Value.Len()
			v.Type = "[" + kv.Value.Elem.String() + "]"
			v.Len = &n
			if n <= arrayPreview {
				v.Value = kv.Value.Raw()
			} else {
				v.Head = headOf(kv.Value.Raw(), arrayPreview)
			}
		} else {
			v.Value = kv.Value.Raw()
		}
		s.Metadata[kv.Key] = v
		s.keys = append(s.keys, kv.Key)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		s.Tensors = append(s.Tensors, showTensor{Name: t.Name, Type: t.Type.String(), Shape: t.Dims, Bytes: t.Size, Offset: t.Offset})
		s.Params += t.Elements()
		s.TensorData += t.Size
	}
	return s
}

func headOf(raw any, n int) any {
	switch a := raw.(type) {
	case []string:
		return a[:n]
	case []int32:
		return a[:n]
	case []float32:
		return a[:n]
	case []uint32:
		return a[:n]
	case []uint8:
		return a[:n]
	case []int8:
		return a[:n]
	case []uint16:
		return a[:n]
	case []int16:
		return a[:n]
	case []uint64:
		return a[:n]
	case []int64:
		return a[:n]
	case []float64:
		return a[:n]
	case []bool:
		return a[:n]
	case []gguf.Value:
		return fmt.Sprint(a[:n])
	}
	return nil
}

func printSummary(w io.Writer, s *showSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	builtIn := ""
	if s.BuiltIn {
		builtIn = ", built into ringlm"
	}
	fmt.Fprintf(tw, "file\t%s (%s%s, GGUF v%d, alignment %d)\n", s.File, humanBytes(s.Size), builtIn, s.Version, s.Alignment)
	fmt.Fprintf(tw, "parameters\t%s (%d) in %d tensors, %s of tensor data\n", humanCount(s.Params), s.Params, len(s.Tensors), humanBytes(s.TensorData))
	if h := s.Hparams; h != nil {
		fmt.Fprintf(tw, "architecture\t%s\n", h.Architecture)
		if h.Name != "" {
			fmt.Fprintf(tw, "name\t%s\n", h.Name)
		}
		fmt.Fprintf(tw, "file type\t%s\n", fileTypeName(h.FileType))
		fmt.Fprintf(tw, "context length\t%d\n", h.ContextLength)
		fmt.Fprintf(tw, "embedding length\t%d\n", h.EmbeddingLength)
		fmt.Fprintf(tw, "layers\t%d\n", h.BlockCount)
		fmt.Fprintf(tw, "attention heads\t%d (kv %d), head dim %d\n", h.HeadCount, h.HeadCountKV, h.KeyLength)
		fmt.Fprintf(tw, "feed forward length\t%d\n", h.FeedForwardLength)
		rope := fmt.Sprintf("base %g, %d dims", h.RopeFreqBase, h.RopeDimensionCount)
		if h.RopeScalingType != "" {
			rope += fmt.Sprintf(", scaling %s ×%g", h.RopeScalingType, h.RopeScalingFactor)
		}
		fmt.Fprintf(tw, "rope\t%s\n", rope)
		if h.SlidingWindow > 0 {
			fmt.Fprintf(tw, "sliding window\t%d positions\n", h.SlidingWindow)
		}
		fmt.Fprintf(tw, "rms norm epsilon\t%g\n", h.LayerNormRMSEpsilon)
		fmt.Fprintf(tw, "vocabulary\t%d\n", h.VocabSize)
	} else if s.HparamsErr != "" {
		fmt.Fprintf(tw, "hyper-parameters\tunreadable: %s\n", s.HparamsErr)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nmetadata (%d keys)\n", len(s.keys))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range s.keys {
		v := s.Metadata[k]
		var val string
		switch {
		case v.Len != nil && v.Head != nil:
			val = fmt.Sprintf("%d × %s", *v.Len, previewString(v.Head))
		case v.Len != nil:
			val = fmt.Sprintf("%d × %s", *v.Len, previewString(v.Value))
		default:
			val = previewString(v.Value)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", k, v.Type, val)
	}
	tw.Flush()

	fmt.Fprintf(w, "\ntensors (%d; shape in ggml order, row length first)\n", len(s.Tensors))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  name\ttype\tshape\tbytes\t\n")
	for _, t := range s.Tensors {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(tw, "  %s\t%s\t[%s]\t%d\t\n", t.Name, t.Type, strings.Join(dims, ", "), t.Bytes)
	}
	tw.Flush()
}

// previewString renders a value on one line, cutting long strings.
func previewString(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = fmt.Sprintf("%q", x)
	case []string:
		q := make([]string, len(x))
		for i, e := range x {
			q[i] = fmt.Sprintf("%q", e)
		}
		s = "[" + strings.Join(q, " ") + "]"
	default:
		s = fmt.Sprint(v)
	}
	if len(s) > 100 {
		s = s[:97] + "…"
	}
	return s
}

func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// fileTypeName names llama.cpp's llama_ftype values.
func fileTypeName(ft uint32) string {
	if n, ok := gguf.FileTypeName(ft); ok {
		return fmt.Sprintf("%s (%d)", n, ft)
	}
	return fmt.Sprint(ft)
}
