package tokenizer

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Special (added) tokens: control, user-defined and unknown tokens are
// registered added tokens in HF, found verbatim in the raw text before any
// normalization and matched leftmost-longest (HF's Aho-Corasick search).

type specialMatcher struct {
	first [256]bool // bytes some special token starts with
	nodes []trieNode
	any   bool
}

// trieNode is a node of a byte trie; children are few, so a short slice
// scanned linearly beats a map.
type trieNode struct {
	next []trieEdge
	id   int32 // token ending here, -1 if none
}

type trieEdge struct {
	b     byte
	child int32
}

func newSpecialMatcher(v *Vocab) specialMatcher {
	m := specialMatcher{nodes: []trieNode{{id: -1}}}
	for i, s := range v.Tokens {
		if s == "" {
			continue
		}
		switch v.Type(int32(i)) {
		case TypeControl, TypeUserDefined, TypeUnknown:
		default:
			continue
		}
		m.insert(s, int32(i))
	}
	return m
}

func (m *specialMatcher) insert(s string, id int32) {
	m.any = true
	m.first[s[0]] = true
	n := int32(0)
outer:
	for i := 0; i < len(s); i++ {
		for _, e := range m.nodes[n].next {
			if e.b == s[i] {
				n = e.child
				continue outer
			}
		}
		m.nodes = append(m.nodes, trieNode{id: -1})
		child := int32(len(m.nodes) - 1)
		m.nodes[n].next = append(m.nodes[n].next, trieEdge{s[i], child})
		n = child
	}
	if m.nodes[n].id < 0 { // the lowest id wins for duplicated texts
		m.nodes[n].id = id
	}
}

// match returns the end and id of the longest special token starting at
// s[i], or end 0.
func (m *specialMatcher) match(s string, i int) (end int, id int32) {
	n := int32(0)
outer:
	for k := i; k < len(s); k++ {
		for _, e := range m.nodes[n].next {
			if e.b == s[k] {
				n = e.child
				if m.nodes[n].id >= 0 {
					end, id = k+1, m.nodes[n].id
				}
				continue outer
			}
		}
		break
	}
	return end, id
}

// EncodeOptions controls Encode's handling of special tokens.
type EncodeOptions struct {
	// ParseSpecial matches special-token strings written in the text
	// ("<|im_start|>") as those tokens, as HF does by default. Without it
	// the text is taken strictly literally.
	ParseSpecial bool
	// AddSpecial adds BOS and EOS as the vocabulary's AddBOS and AddEOS ask
	// (HF's add_special_tokens).
	AddSpecial bool
}

// Encode tokenizes text as HF's encode(text, add_special_tokens=False):
// special-token strings are matched, nothing is added.
func (t *Tokenizer) Encode(text string) []int32 {
	return t.EncodeWith(text, EncodeOptions{ParseSpecial: true})
}

// EncodeWith tokenizes text with explicit options. Invalid UTF-8 in text is
// first repaired as described in the package documentation.
func (t *Tokenizer) EncodeWith(text string, o EncodeOptions) []int32 {
	if !utf8.ValidString(text) {
		text = toValidUTF8(text)
	}
	ids := make([]int32, 0, len(text)/3+2)
	if o.AddSpecial && t.v.AddBOS && t.v.BOS >= 0 {
		ids = append(ids, t.v.BOS)
	}
	st := statePool.Get().(*encState)
	start := 0
	if o.ParseSpecial && t.special.any {
		m := &t.special
		for i := 0; i < len(text); i++ {
			if !m.first[text[i]] {
				continue
			}
			end, id := m.match(text, i)
			if end == 0 {
				continue
			}
			ids = t.encodeSegment(st, text[start:i], ids)
			ids = append(ids, id)
			start = end
			i = end - 1
		}
	}
	ids = t.encodeSegment(st, text[start:], ids)
	statePool.Put(st)
	if o.AddSpecial && t.v.AddEOS && t.v.EOS >= 0 {
		ids = append(ids, t.v.EOS)
	}
	return ids
}

// encodeSegment encodes text that holds no special token.
func (t *Tokenizer) encodeSegment(st *encState, seg string, dst []int32) []int32 {
	if seg == "" {
		return dst
	}
	if t.kind == kindSPM {
		return t.encodeSPM(st, seg, dst)
	}
	if t.nfc && !isASCII(seg) {
		seg = norm.NFC.String(seg)
	}
	if scan := t.pre.scan; scan != nil {
		for i := 0; i < len(seg); {
			j := scan(seg, i)
			if j <= i || j > len(seg) { // defensive: a scanner must advance
				j = i + 1
			}
			dst = t.encodeBytePiece(st, seg[i:j], dst)
			i = j
		}
		return dst
	}
	for _, sp := range t.pre.split(st, seg) {
		dst = t.encodeBytePiece(st, seg[sp.start:sp.end], dst)
	}
	return dst
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
