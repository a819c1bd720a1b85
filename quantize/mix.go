package quantize

import (
	"strconv"
	"strings"

	"ringlm/gguf"
)

// Mix is a llama.cpp file type (llama_ftype): the type most tensors get
// and the rules (policy.go) that give some tensors another.
type Mix struct {
	Name     string    // as llama-quantize spells it: "Q4_K_M"
	FileType uint32    // the llama_ftype value, written to general.file_type
	Default  gguf.Type // the type of the tensors no rule singles out
	// Pure gives every quantizable tensor Default, as llama-quantize
	// --pure does: no rule applies, only the fallback for rows that are
	// not a whole number of blocks.
	Pure bool
	// NoFileType marks a pure mix of a type no llama_ftype names (Q8_K):
	// general.file_type is then left out, as llama.cpp cannot name it.
	NoFileType bool
}

// The llama_ftype values of llama.h for the mixes ringlm writes.
const (
	ftypeF32    = 0
	ftypeF16    = 1
	ftypeQ4_0   = 2
	ftypeQ4_1   = 3
	ftypeQ8_0   = 7
	ftypeQ5_0   = 8
	ftypeQ5_1   = 9
	ftypeQ2_K   = 10
	ftypeQ3_K_S = 11
	ftypeQ3_K_M = 12
	ftypeQ3_K_L = 13
	ftypeQ4_K_S = 14
	ftypeQ4_K_M = 15
	ftypeQ5_K_S = 16
	ftypeQ5_K_M = 17
	ftypeQ6_K   = 18
	ftypeIQ4_NL = 25
	ftypeIQ4_XS = 30
	ftypeBF16   = 32
	ftypeMXFP4  = 38 // MXFP4_MOE: only the file type of a pure MXFP4 file here
)

// mixes are llama-quantize's types for the dense architectures ringlm
// runs, in its help's order. Left out: the IQ1–IQ3 and Q2_K_S mixes, which
// need an importance matrix; TQ1_0/TQ2_0; MXFP4_MOE, which only changes
// mixture-of-experts tensors (on a dense model it writes Q8_0).
var mixes = []Mix{
	{Name: "Q4_0", FileType: ftypeQ4_0, Default: gguf.TypeQ4_0},
	{Name: "Q4_1", FileType: ftypeQ4_1, Default: gguf.TypeQ4_1},
	{Name: "Q5_0", FileType: ftypeQ5_0, Default: gguf.TypeQ5_0},
	{Name: "Q5_1", FileType: ftypeQ5_1, Default: gguf.TypeQ5_1},
	{Name: "Q2_K", FileType: ftypeQ2_K, Default: gguf.TypeQ2_K},
	{Name: "Q3_K_S", FileType: ftypeQ3_K_S, Default: gguf.TypeQ3_K},
	{Name: "Q3_K_M", FileType: ftypeQ3_K_M, Default: gguf.TypeQ3_K},
	{Name: "Q3_K_L", FileType: ftypeQ3_K_L, Default: gguf.TypeQ3_K},
	{Name: "IQ4_NL", FileType: ftypeIQ4_NL, Default: gguf.TypeIQ4_NL},
	{Name: "IQ4_XS", FileType: ftypeIQ4_XS, Default: gguf.TypeIQ4_XS},
	{Name: "Q4_K_S", FileType: ftypeQ4_K_S, Default: gguf.TypeQ4_K},
	{Name: "Q4_K_M", FileType: ftypeQ4_K_M, Default: gguf.TypeQ4_K},
	{Name: "Q5_K_S", FileType: ftypeQ5_K_S, Default: gguf.TypeQ5_K},
	{Name: "Q5_K_M", FileType: ftypeQ5_K_M, Default: gguf.TypeQ5_K},
	{Name: "Q6_K", FileType: ftypeQ6_K, Default: gguf.TypeQ6_K},
	{Name: "Q8_0", FileType: ftypeQ8_0, Default: gguf.TypeQ8_0},
	{Name: "F16", FileType: ftypeF16, Default: gguf.TypeF16},
	{Name: "BF16", FileType: ftypeBF16, Default: gguf.TypeBF16},
	{Name: "F32", FileType: ftypeF32, Default: gguf.TypeF32},
}

// ftypeNames are llama.cpp's names of its file types
// (llama_model_ftype_name), which llama-bench's model column and `ringlm
// show` print: llama-quantize's name for most, a description for the
// k-quant mixes ("Q4_K - Medium") and the IQ4 types ("IQ4_NL - 4.5 bpw").
var ftypeNames = map[uint32]string{
	ftypeF32: "all F32", ftypeF16: "F16", ftypeBF16: "BF16",
	ftypeQ4_0: "Q4_0", ftypeQ4_1: "Q4_1", ftypeQ5_0: "Q5_0", ftypeQ5_1: "Q5_1", ftypeQ8_0: "Q8_0",
	ftypeQ2_K: "Q2_K - Medium", ftypeQ3_K_S: "Q3_K - Small", ftypeQ3_K_M: "Q3_K - Medium", ftypeQ3_K_L: "Q3_K - Large",
	ftypeQ4_K_S: "Q4_K - Small", ftypeQ4_K_M: "Q4_K - Medium", ftypeQ5_K_S: "Q5_K - Small", ftypeQ5_K_M: "Q5_K - Medium",
	ftypeQ6_K:   "Q6_K",
	ftypeIQ4_NL: "IQ4_NL - 4.5 bpw", ftypeIQ4_XS: "IQ4_XS - 4.25 bpw", ftypeMXFP4: "MXFP4 MoE",
}

// FileTypeName is llama.cpp's name of the llama_ftype value ft, false for
// a value ringlm does not know.
func FileTypeName(ft uint32) (string, bool) {
	n, ok := ftypeNames[ft]
	return n, ok
}

// aliases are llama-quantize's short names for the _M mixes.
var aliases = map[string]string{"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}

// Mixes lists the mix names ParseMix accepts (aliases left out).
func Mixes() []string {
	out := make([]string, len(mixes))
	for i, m := range mixes {
		out[i] = m.Name
	}
	return out
}

// ParseMix finds a mix by llama-quantize's name for it, in any case, by
// an alias (Q4_K for Q4_K_M) or by its llama_ftype number ("15").
func ParseMix(name string) (Mix, bool) {
	up := strings.ToUpper(name)
	if a, ok := aliases[up]; ok {
		up = a
	}
	n, err := strconv.ParseUint(name, 10, 32)
	for _, m := range mixes {
		if m.Name == up || (err == nil && uint64(m.FileType) == n) {
			return m, true
		}
	}
	return Mix{}, false
}

// PureMix is every quantizable tensor in t, as llama-quantize --pure
// writes it, with the file type llama.cpp gives a file of mostly t (the _M
// mix for a k-quant, MXFP4_MOE for MXFP4).
func PureMix(t gguf.Type) Mix {
	m := Mix{Name: t.String(), Default: t, Pure: true, NoFileType: true}
	for _, x := range mixes {
		if x.Default == t && (m.NoFileType || strings.HasSuffix(x.Name, "_M")) {
			m.FileType, m.NoFileType = x.FileType, false
		}
	}
	if t == gguf.TypeMXFP4 {
		m.FileType, m.NoFileType = ftypeMXFP4, false
	}
	return m
}
