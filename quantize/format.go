package quantize

import (
	"slices"

	"ringlm/gguf"
	"ringlm/quant"
)

// ggufQ8_0 is gguf's own Q8_0 codec (the built-in model's type), standing in
// until quant registers its Q8_0 with the other legacy formats; quant's
// wins as soon as it is there.
var ggufQ8_0 = &quant.Format{Type: gguf.TypeQ8_0, Dequantize: gguf.DequantizeQ8_0, Quantize: gguf.QuantizeQ8_0}

// Format returns t's codec: quant's, or gguf's own Q8_0.
func Format(t gguf.Type) (*quant.Format, bool) {
	if f, ok := quant.Lookup(t); ok {
		return f, true
	}
	if t == gguf.TypeQ8_0 {
		return ggufQ8_0, true
	}
	return nil, false
}

// Writable lists the types Format can encode, in id order.
func Writable() []gguf.Type {
	out := quant.Writable()
	if !slices.Contains(out, gguf.TypeQ8_0) {
		out = append(out, gguf.TypeQ8_0)
		slices.Sort(out)
	}
	return out
}
