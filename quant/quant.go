// Package quant holds ggml's weight block formats: for every type ringlm
// reads, how a row of elements is packed into blocks, how it is decoded
// (Dequantize, the ggml reference dequantization) and how it is encoded
// (Quantize, following the ggml reference quantizers). Formats register
// themselves in the files of their family (legacy.go: Q4_0…Q8_0; kquants.go:
// Q2_K…Q6_K, Q8_K; iquants.go: IQ4_NL, IQ4_XS; mxfp4.go: MXFP4).
//
// Block layouts are little-endian, as ggml writes them; the byte counts are
// gguf.TypeInfo's. A row's length is a multiple of its type's block size.
package quant

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"ringlm/gguf"
)

// Format is one ggml type's codec. Both functions take whole rows (or runs
// of rows): len(dst) and len(src) hold the same number of elements, a
// multiple of the block size, and the byte side is exactly
// gguf.Type.RowBytes of that count.
type Format struct {
	Type gguf.Type
	// Dequantize decodes len(dst) elements from src.
	Dequantize func(dst []float32, src []byte)
	// Quantize encodes src into dst. Nil for a type ringlm reads but does
	// not write.
	Quantize func(dst []byte, src []float32)
}

var formats = map[gguf.Type]*Format{}

func register(f *Format) {
	if _, dup := formats[f.Type]; dup {
		panic("quant: format registered twice: " + f.Type.String())
	}
	formats[f.Type] = f
}

// Lookup returns t's codec, and false for a type ringlm does not read.
func Lookup(t gguf.Type) (*Format, bool) {
	f, ok := formats[t]
	return f, ok
}

// Readable lists the types Dequantize decodes, in id order.
func Readable() []gguf.Type {
	out := make([]gguf.Type, 0, len(formats))
	for t := range formats {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Writable lists the types Quantize encodes, in id order.
func Writable() []gguf.Type {
	var out []gguf.Type
	for _, t := range Readable() {
		if formats[t].Quantize != nil {
			out = append(out, t)
		}
	}
	return out
}

// Names joins type names for messages: "F32, F16, Q8_0".
func Names(ts []gguf.Type) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// check validates a row's element count and byte length for t.
func check(t gguf.Type, n int, nbytes int) error {
	info, ok := t.Info()
	if !ok {
		return fmt.Errorf("quant: unknown type %s", t)
	}
	if n < 0 || uint64(n)%info.BlockSize != 0 {
		return fmt.Errorf("quant: %d elements is not a multiple of %s's block of %d", n, t, info.BlockSize)
	}
	want := uint64(n) / info.BlockSize * info.BlockBytes
	if uint64(nbytes) != want {
		return fmt.Errorf("quant: %d %s elements take %d bytes, got %d", n, t, want, nbytes)
	}
	return nil
}

// Dequantize decodes len(dst) elements of type t from src.
func Dequantize(t gguf.Type, dst []float32, src []byte) error {
	f, ok := formats[t]
	if !ok {
		return fmt.Errorf("quant: type %s is not read (ringlm reads %s)", t, Names(Readable()))
	}
	if err := check(t, len(dst), len(src)); err != nil {
		return err
	}
	f.Dequantize(dst, src)
	return nil
}

// Quantize encodes src as type t into dst. The block types refuse NaN and
// infinities; F32, F16 and BF16 carry them.
func Quantize(t gguf.Type, dst []byte, src []float32) error {
	f, ok := formats[t]
	if !ok || f.Quantize == nil {
		return fmt.Errorf("quant: type %s is not written (ringlm writes %s)", t, Names(Writable()))
	}
	if err := check(t, len(src), len(dst)); err != nil {
		return err
	}
	// A block type shares one scale among its elements: a NaN or an
	// infinity would take the whole block (ggml's result is undefined), so
	// it is refused here rather than written.
	if info, _ := t.Info(); info.BlockSize > 1 {
		for i, v := range src {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("quant: element %d is %v: %s quantizes finite values only", i, v, t)
			}
		}
	}
	f.Quantize(dst, src)
	return nil
}

func init() {
	register(&Format{Type: gguf.TypeF32,
		Dequantize: func(dst []float32, src []byte) { gguf.DecodeF32(gguf.TypeF32, dst, src) },
		Quantize:   func(dst []byte, src []float32) { gguf.EncodeF32(gguf.TypeF32, dst, src) }})
	register(&Format{Type: gguf.TypeF16,
		Dequantize: func(dst []float32, src []byte) { gguf.DecodeF32(gguf.TypeF16, dst, src) },
		Quantize:   func(dst []byte, src []float32) { gguf.EncodeF32(gguf.TypeF16, dst, src) }})
	register(&Format{Type: gguf.TypeBF16,
		Dequantize: func(dst []float32, src []byte) { gguf.DecodeF32(gguf.TypeBF16, dst, src) },
		Quantize:   func(dst []byte, src []float32) { gguf.EncodeF32(gguf.TypeBF16, dst, src) }})
}
