package quantize

import (
	"ringlm/gguf"
	"ringlm/quant"
)

// Format returns t's codec (package quant's registry).
func Format(t gguf.Type) (*quant.Format, bool) { return quant.Lookup(t) }

// Writable lists the types Format can encode, in id order.
func Writable() []gguf.Type { return quant.Writable() }
