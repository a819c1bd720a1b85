package tokenizer

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"unicode/utf8"
)

// Token types, as GGUF's tokenizer.ggml.token_type stores them.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Vocab is a vocabulary as GGUF stores it under tokenizer.ggml.*.
type Vocab struct {
	Model  string    // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece-style BPE)
	Pre    string    // tokenizer.ggml.pre: "default", "gpt-2", "llama-bpe", "qwen2", "gpt-4o", ... (prefamilies.go)
	Tokens []string  // tokenizer.ggml.tokens
	Types  []int32   // tokenizer.ggml.token_type (nil: all normal)
	Scores []float32 // tokenizer.ggml.scores (may be nil)
	Merges []string  // tokenizer.ggml.merges, "a b" per line, rank = index

	BOS, EOS, EOT, PAD, UNK int32 // -1 when absent

	AddBOS, AddEOS bool
	AddSpacePrefix bool // SentencePiece dummy prefix (tokenizer.ggml.add_space_prefix)
	ChatTemplate   string
}

// Type returns the type of token id, TypeNormal when the vocabulary has no
// types, and TypeUndefined for an id out of range.
func (v *Vocab) Type(id int32) int32 {
	if id < 0 || int(id) >= len(v.Tokens) {
		return TypeUndefined
	}
	if v.Types == nil {
		return TypeNormal
	}
	return v.Types[id]
}

type modelKind uint8

const (
	kindByteBPE modelKind = iota // GPT-2 style: bytes mapped to printable runes, regex pre-tokenizer
	kindSPM                      // SentencePiece style: ▁ for spaces, byte fallback, no pre-tokenizer
)

// Tokenizer encodes text to token ids and back for one vocabulary. It is
// safe for concurrent use.
type Tokenizer struct {
	v    *Vocab
	kind modelKind

	// Byte-level BPE: the pre-tokenizer, whether Unicode NFC runs first
	// (Qwen2's normalizer), and whether a pre-token found whole in the
	// vocabulary skips the merges (HF's ignore_merges, Llama 3 and o200k).
	pre          preTokenizer
	nfc          bool
	ignoreMerges bool

	// pieces maps the text BPE works on to ids: raw bytes for byte-level
	// vocabularies, vocabulary text (with ▁) for SentencePiece ones.
	pieces strTable
	// byteID is the initial symbol for each byte (byte-level) or the
	// <0xXX> fallback token (SentencePiece); -1 when the vocabulary lacks it.
	byteID [256]int32
	// asciiID short-cuts the SentencePiece lookup of single ASCII chars.
	asciiID [128]int32

	merges    pairTable
	useScores bool // SentencePiece without merges: rank pairs by token score
	scoreKey  []uint32

	// spaceSplit: no SentencePiece token contains a ▁ after another
	// character, so a word may be cut before every such ▁ without
	// changing the merges' result, keeping BPE inputs short.
	spaceSplit bool

	special specialMatcher

	// Decoding: decInfo[i] packs where token i's text lies in dec (offset
	// in the high 32 bits, length in bits 1-31) and whether that text is
	// valid UTF-8 by itself (bit 0); decShort repeats short texts in fixed
	// slots (see buildDecode).
	dec      string
	decInfo  []uint64
	decShort [][16]byte

	cache pieceCache
	seed  maphash.Seed

	byTextOnce sync.Once
	byText     map[string]int32
}

// Vocab returns the vocabulary the tokenizer was built from. It must not
// be modified.
func (t *Tokenizer) Vocab() *Vocab { return t.v }

// Len is the number of tokens in the vocabulary.
func (t *Tokenizer) Len() int { return len(t.v.Tokens) }

// Token returns the vocabulary text of id ("" when out of range).
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.v.Tokens) {
		return ""
	}
	return t.v.Tokens[id]
}

// TokenID finds a token by its exact vocabulary text (e.g. "<|im_end|>",
// "Ġhello", "▁the"); the lowest id wins for duplicated texts. The index is
// built on first use, keeping New cheap for callers that never need it.
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.textIndex()[text]
	if !ok {
		return -1, false
	}
	return id, true
}

// IsEOG reports whether id ends generation: the vocabulary's EOS or EOT.
func (t *Tokenizer) IsEOG(id int32) bool {
	return id >= 0 && (id == t.v.EOS || id == t.v.EOT)
}

var errNilVocab = errors.New("tokenizer: nil vocabulary")

// New validates v and builds the lookup tables. v is retained and must not
// be changed afterwards.
func New(v *Vocab) (*Tokenizer, error) {
	if v == nil {
		return nil, errNilVocab
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: vocabulary has no tokens")
	}
	if n > math.MaxInt32-1 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens is too large", n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	for i, ty := range v.Types {
		if ty < TypeUndefined || ty > TypeByte {
			return nil, fmt.Errorf("tokenizer: token %d (%q) has unknown type %d", i, v.Tokens[i], ty)
		}
	}
	for _, s := range [...]struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"EOT", v.EOT}, {"PAD", v.PAD}, {"UNK", v.UNK}} {
		if s.id < -1 || int(s.id) >= n {
			return nil, fmt.Errorf("tokenizer: %s id %d out of range [0,%d)", s.name, s.id, n)
		}
	}

	t := &Tokenizer{v: v, seed: maphash.MakeSeed()}
	switch v.Model {
	case "gpt2":
		t.kind = kindByteBPE
		p, err := lookupPre(v.Pre)
		if err != nil {
			return nil, err
		}
		t.pre = p
		t.nfc = p.nfc
		t.ignoreMerges = p.ignoreMerges
	case "llama":
		t.kind = kindSPM
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q (want \"gpt2\" or \"llama\")", v.Model)
	}

	plain, off, err := t.buildDecode()
	if err != nil {
		return nil, err
	}
	if err := t.buildPieces(plain, off); err != nil {
		return nil, err
	}
	if err := t.buildMerges(); err != nil {
		return nil, err
	}
	t.special = newSpecialMatcher(v)
	t.cache.init(1 << 14)
	return t, nil
}

// isMergeable reports whether BPE may produce token id from text. Control,
// user-defined and unknown tokens are only ever matched whole, as HF's
// added tokens are; unused ones are fillers (llama.cpp's [PAD{id}]) that
// HF's vocabulary does not have.
func (v *Vocab) isMergeable(id int) bool {
	if v.Types == nil {
		return true
	}
	switch v.Types[id] {
	case TypeControl, TypeUserDefined, TypeUnknown, TypeUnused:
		return false
	}
	return true
}

// buildPieces fills pieces, byteID and asciiID. plain marks the
// byte-level tokens whose text is not byte-level encoded.
func (t *Tokenizer) buildPieces(plain []uint64, decOff []uint32) error {
	v := t.v
	n := len(v.Tokens)
	for i := range t.byteID {
		t.byteID[i] = -1
	}
	for i := range t.asciiID {
		t.asciiID[i] = -1
	}
	keys, slab, offs := v.Tokens, t.dec, decOff
	skip := make([]uint64, (n+63)/64)
	switch t.kind {
	case kindByteBPE:
		// Keys are the raw bytes, substrings of the decode table. Tokens
		// whose text is not byte-level encoded cannot come out of BPE over
		// bytes, and control or user-defined ones are matched whole only.
		keys = make([]string, n)
		for i := range keys {
			keys[i] = t.dec[decOff[i]:decOff[i+1]]
			if plain[i/64]&(1<<(i%64)) != 0 || !v.isMergeable(i) || keys[i] == "" {
				skip[i/64] |= 1 << (i % 64)
				continue
			}
		}
		for i := n - 1; i >= 0; i-- {
			if skip[i/64]&(1<<(i%64)) == 0 && len(keys[i]) == 1 {
				t.byteID[keys[i][0]] = int32(i)
			}
		}
	case kindSPM:
		for i := n - 1; i >= 0; i-- {
			s := v.Tokens[i]
			if v.Type(int32(i)) == TypeByte || isByteToken(s) {
				if b, ok := parseByteToken(s); ok {
					t.byteID[b] = int32(i)
				}
				skip[i/64] |= 1 << (i % 64)
				continue
			}
			if s == "" || !v.isMergeable(i) {
				skip[i/64] |= 1 << (i % 64)
				continue
			}
			if len(s) == 1 && s[0] < utf8.RuneSelf {
				t.asciiID[s[0]] = int32(i)
			}
		}
		// Keys are the vocabulary texts; the table wants them in one slab.
		var b strings.Builder
		offs = make([]uint32, n+1)
		for i, s := range v.Tokens {
			b.WriteString(s)
			offs[i+1] = uint32(b.Len())
		}
		slab = b.String()
		t.spaceSplit = true
		for _, s := range v.Tokens {
			if k := strings.Index(s, spmSpace); k > 0 && strings.Trim(s[:k], spmSpace) != "" {
				t.spaceSplit = false
				break
			}
		}
	}
	t.pieces.build(t.seed, keys, slab, offs, skip)
	return nil
}

func (t *Tokenizer) textIndex() map[string]int32 {
	t.byTextOnce.Do(func() {
		t.byText = make(map[string]int32, len(t.v.Tokens))
		for i := len(t.v.Tokens) - 1; i >= 0; i-- {
			t.byText[t.v.Tokens[i]] = int32(i)
		}
	})
	return t.byText
}

// buildMerges parses the merge list into the pair table. SentencePiece
// vocabularies without merges rank pairs by score instead.
func (t *Tokenizer) buildMerges() error {
	v := t.v
	if len(v.Merges) == 0 {
		if t.kind == kindSPM {
			t.useScores = true
			t.scoreKey = make([]uint32, len(v.Tokens))
			for i := range t.scoreKey {
				var s float32
				if v.Scores != nil {
					s = v.Scores[i]
				}
				t.scoreKey[i] = scoreRank(s)
			}
		}
		return nil
	}
	// Resolving 200k+ merges to ids is much of New's time and is
	// embarrassingly parallel: chunks go to all cores.
	n := len(v.Merges)
	left, right, result := make([]int32, n), make([]int32, n), make([]int32, n)
	var mu sync.Mutex
	var first error
	firstAt := n
	forChunks(n, parallelism(n), func(lo, hi int) {
		if at, err := t.resolveMerges(lo, hi, left, right, result); err != nil {
			mu.Lock()
			if at < firstAt {
				first, firstAt = err, at
			}
			mu.Unlock()
		}
	})
	if first != nil {
		return first
	}
	t.merges.build(left, right, result)
	return nil
}

// resolveMerges finds the ids of halves and result of merges lo..hi-1,
// or the first merge that names a missing token.
func (t *Tokenizer) resolveMerges(lo, hi int, left, right, result []int32) (at int, err error) {
	v := t.v
	var buf []byte
	cur := int32(-1)
	for rank := lo; rank < hi; rank++ {
		m := v.Merges[rank]
		a, b, ok := splitMerge(m)
		if !ok {
			return rank, fmt.Errorf("tokenizer: merge %d (%q) is not of the form \"a b\"", rank, m)
		}
		ha, hb := mergeHalf{text: a}, mergeHalf{text: b}
		okA, okB := true, true
		if t.kind == kindByteBPE {
			buf, okA = appendByteLevelDecoded(buf[:0], a)
			na := len(buf)
			buf, okB = appendByteLevelDecoded(buf, b)
			ha.raw, hb.raw = buf[:na], buf[na:]
		} else {
			buf = append(append(buf[:0], a...), b...)
			ha.raw, hb.raw = buf[:len(a)], buf[len(a):]
		}
		if !okA || !okB {
			ha.raw, hb.raw = nil, nil
		}
		ida, ok := t.findHalf(&ha)
		if !ok {
			return rank, fmt.Errorf("tokenizer: merge %d (%q): %q is not in the vocabulary", rank, m, a)
		}
		idb, ok := t.findHalf(&hb)
		if !ok {
			return rank, fmt.Errorf("tokenizer: merge %d (%q): %q is not in the vocabulary", rank, m, b)
		}
		// Vocabularies number merge results in merge order, so the result
		// is almost always the previous one or just after it; checking
		// there first saves a hash lookup per merge.
		idm := int32(-1)
		for id := max(cur, 0); cur >= 0 && id < cur+3 && int(id) < len(v.Tokens); id++ {
			if tok := v.Tokens[id]; len(tok) == len(a)+len(b) && tok[:len(a)] == a && tok[len(a):] == b {
				idm = id
				break
			}
		}
		if idm < 0 {
			whole := mergeHalf{text: a + b}
			if ha.raw != nil {
				whole.raw = buf
			}
			if idm, ok = t.findHalf(&whole); !ok {
				return rank, fmt.Errorf("tokenizer: merge %d (%q): result %q is not in the vocabulary", rank, m, whole.text)
			}
		}
		cur = idm
		left[rank], right[rank], result[rank] = ida, idb, idm
	}
	return 0, nil
}

// mergeHalf is one side of a merge being resolved: its vocabulary text and,
// when that text is in the alphabet pieces is keyed by, its raw form.
type mergeHalf struct {
	text string
	raw  []byte
}

// findHalf looks a merge half up in pieces, which holds the text BPE works
// on. Tokens not in pieces (control tokens, say) are looked up by
// vocabulary text as a last resort.
func (t *Tokenizer) findHalf(h *mergeHalf) (int32, bool) {
	if h.raw != nil {
		if id, ok := t.pieces.getBytes(h.raw); ok {
			return id, true
		}
	}
	id, ok := t.textIndex()[h.text]
	return id, ok
}

// splitMerge splits a merge line "a b". The separator is searched from
// the second byte on, as llama.cpp does, so that a left half of " " stays
// expressible; both halves must be non-empty.
func splitMerge(m string) (a, b string, ok bool) {
	if len(m) < 3 {
		return "", "", false
	}
	sp := 1 + strings.IndexByte(m[1:], ' ')
	if sp == 0 || sp == len(m)-1 {
		return "", "", false
	}
	return m[:sp], m[sp+1:], true
}

// scoreRank orders float scores so that a higher score gives a smaller
// rank, letting score- and merge-ranked BPE share one loop.
func scoreRank(s float32) uint32 {
	if s != s { // NaN sorts last
		return math.MaxUint32
	}
	b := math.Float32bits(s)
	if b&0x80000000 != 0 {
		b = ^b
	} else {
		b |= 0x80000000
	}
	return ^b
}
