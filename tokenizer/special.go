package tokenizer

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Special (added) tokens: control, user-defined and unknown tokens are
// registered added tokens in HF, found verbatim in the raw text before any
// normalization and matched leftmost-longest (HF's Aho-Corasick search).
// User-defined tokens are matched even when special tokens are not parsed,
// as HF matches its non-special added tokens and llama.cpp its
// USER_DEFINED ones.

type specialMatcher struct {
	first     [256]bool // bytes some special token starts with
	firstUser [256]bool // bytes some user-defined token starts with
	nodes     []trieNode
	any, user bool
}

// trieNode is a node of a byte trie; children are few, so a short slice
// scanned linearly beats a map.
type trieNode struct {
	next []trieEdge
	id   int32 // token ending here, -1 if none
	uid  int32 // user-defined token ending here, -1 if none
}

type trieEdge struct {
	b     byte
	child int32
}

func newSpecialMatcher(v *Vocab) specialMatcher {
	m := specialMatcher{nodes: []trieNode{{id: -1, uid: -1}}}
	for i, s := range v.Tokens {
		if s == "" {
			continue
		}
		switch ty := v.Type(int32(i)); ty {
		case TypeControl, TypeUserDefined, TypeUnknown:
			m.insert(s, int32(i), ty == TypeUserDefined)
		}
	}
	return m
}

func (m *specialMatcher) insert(s string, id int32, user bool) {
	m.any = true
	m.first[s[0]] = true
	if user {
		m.user = true
		m.firstUser[s[0]] = true
	}
	n := int32(0)
outer:
	for i := 0; i < len(s); i++ {
		for _, e := range m.nodes[n].next {
			if e.b == s[i] {
				n = e.child
				continue outer
			}
		}
		m.nodes = append(m.nodes, trieNode{id: -1, uid: -1})
		child := int32(len(m.nodes) - 1)
		m.nodes[n].next = append(m.nodes[n].next, trieEdge{s[i], child})
		n = child
	}
	// The lowest id wins for duplicated texts.
	if m.nodes[n].id < 0 {
		m.nodes[n].id = id
	}
	if user && m.nodes[n].uid < 0 {
		m.nodes[n].uid = id
	}
}

// match returns the end and id of the longest special token (user-defined
// token, when userOnly) starting at s[i], or end 0.
func (m *specialMatcher) match(s string, i int, userOnly bool) (end int, id int32) {
	n := int32(0)
outer:
	for k := i; k < len(s); k++ {
		for _, e := range m.nodes[n].next {
			if e.b == s[k] {
				n = e.child
				got := m.nodes[n].id
				if userOnly {
					got = m.nodes[n].uid
				}
				if got >= 0 {
					end, id = k+1, got
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
	// control tokens are taken literally; user-defined tokens are matched
	// either way, as HF and llama.cpp match them.
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
	m := &t.special
	userOnly := !o.ParseSpecial
	if m.any && (!userOnly || m.user) {
		first := &m.first
		if userOnly {
			first = &m.firstUser
		}
		for i := 0; i < len(text); i++ {
			if !first[text[i]] {
				continue
			}
			end, id := m.match(text, i, userOnly)
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
