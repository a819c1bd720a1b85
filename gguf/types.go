package gguf

import "fmt"

// Type is a ggml tensor element type, as stored in a GGUF tensor info.
type Type uint32

// The ggml types llama.cpp writes today. Ids 4, 5 and 31–33, 36–38 were
// removed upstream and are refused as unknown.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
)

// TypeInfo describes how a ggml type packs elements: BlockSize elements
// take BlockBytes bytes. Row lengths must be multiples of BlockSize.
type TypeInfo struct {
	Name       string
	BlockSize  uint64
	BlockBytes uint64
}

const qkK = 256 // super-block size of the k-quants and i-quants

var typeTable = map[Type]TypeInfo{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeBF16:    {"BF16", 1, 2},
	TypeF64:     {"F64", 1, 8},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeQ4_0:    {"Q4_0", 32, 2 + 16},
	TypeQ4_1:    {"Q4_1", 32, 2 + 2 + 16},
	TypeQ5_0:    {"Q5_0", 32, 2 + 4 + 16},
	TypeQ5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	TypeQ8_0:    {"Q8_0", 32, 2 + 32},
	TypeQ8_1:    {"Q8_1", 32, 2 + 2 + 32},
	TypeQ2_K:    {"Q2_K", qkK, qkK/16 + qkK/4 + 2 + 2},
	TypeQ3_K:    {"Q3_K", qkK, qkK/8 + qkK/4 + 12 + 2},
	TypeQ4_K:    {"Q4_K", qkK, 2 + 2 + 12 + qkK/2},
	TypeQ5_K:    {"Q5_K", qkK, 2 + 2 + 12 + qkK/8 + qkK/2},
	TypeQ6_K:    {"Q6_K", qkK, qkK/2 + qkK/4 + qkK/16 + 2},
	TypeQ8_K:    {"Q8_K", qkK, 4 + qkK + qkK/16*2},
	TypeIQ2_XXS: {"IQ2_XXS", qkK, 2 + qkK/8*2},
	TypeIQ2_XS:  {"IQ2_XS", qkK, 2 + qkK/8*2 + qkK/32},
	TypeIQ3_XXS: {"IQ3_XXS", qkK, 2 + 3*qkK/8},
	TypeIQ1_S:   {"IQ1_S", qkK, 2 + qkK/8 + qkK/32*2},
	TypeIQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	TypeIQ3_S:   {"IQ3_S", qkK, 2 + qkK/4 + qkK/32 + qkK/8 + qkK/64},
	TypeIQ2_S:   {"IQ2_S", qkK, 2 + qkK/4 + qkK/32 + qkK/32},
	TypeIQ4_XS:  {"IQ4_XS", qkK, 2 + 2 + qkK/64 + qkK/2},
	TypeIQ1_M:   {"IQ1_M", qkK, qkK/8 + qkK/16 + qkK/32},
	TypeTQ1_0:   {"TQ1_0", qkK, (qkK-4*qkK/64)/5 + qkK/64 + 2},
	TypeTQ2_0:   {"TQ2_0", qkK, qkK/4 + 2},
	TypeMXFP4:   {"MXFP4", 32, 1 + 16},
}

// Info returns the type's packing, and false for an unknown type id.
func (t Type) Info() (TypeInfo, bool) {
	ti, ok := typeTable[t]
	return ti, ok
}

// Valid reports whether t is a type this package knows.
func (t Type) Valid() bool { _, ok := typeTable[t]; return ok }

func (t Type) String() string {
	if ti, ok := typeTable[t]; ok {
		return ti.Name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ParseType maps a name such as "q8_0" or "BF16" to its type.
func ParseType(name string) (Type, bool) {
	for t, ti := range typeTable {
		if equalFold(ti.Name, name) {
			return t, true
		}
	}
	return 0, false
}

// Types lists every known type in id order.
func Types() []Type {
	out := make([]Type, 0, len(typeTable))
	for t := Type(0); t < 64; t++ {
		if t.Valid() {
			out = append(out, t)
		}
	}
	return out
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// RowBytes is the size in bytes of n elements of type t, or an error when
// n is not a whole number of blocks.
func (t Type) RowBytes(n uint64) (uint64, error) {
	ti, ok := typeTable[t]
	if !ok {
		return 0, fmt.Errorf("unknown ggml type %d", uint32(t))
	}
	if n%ti.BlockSize != 0 {
		return 0, fmt.Errorf("%d elements of %s is not a multiple of its block size %d", n, ti.Name, ti.BlockSize)
	}
	return n / ti.BlockSize * ti.BlockBytes, nil
}
