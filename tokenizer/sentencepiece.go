package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// SentencePiece-style BPE (tokenizer.ggml.model "llama": Llama 2, Mistral).
// HF runs it with normalizers Prepend("▁") and Replace(" ", "▁"), no
// pre-tokenizer, and a BPE model with byte_fallback; this file reproduces
// that. Each text segment between special tokens is normalized on its own,
// so the dummy prefix appears again after every special token, as in HF.

const spmSpace = "\u2581" // ▁

// isByteToken reports whether s is a byte-fallback token "<0xXX>".
func isByteToken(s string) bool {
	_, ok := parseByteToken(s)
	return ok
}

func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// encodeSPM appends the ids of one segment (text between special tokens).
func (t *Tokenizer) encodeSPM(st *encState, seg string, dst []int32) []int32 {
	if seg == "" {
		return dst
	}
	var b strings.Builder
	b.Grow(len(seg) + len(spmSpace) + 2*strings.Count(seg, " "))
	if t.v.AddSpacePrefix {
		b.WriteString(spmSpace)
	}
	for {
		k := strings.IndexByte(seg, ' ')
		if k < 0 {
			b.WriteString(seg)
			break
		}
		b.WriteString(seg[:k])
		b.WriteString(spmSpace)
		seg = seg[k+1:]
	}
	text := b.String()
	if !t.spaceSplit {
		return t.encodeSPMWord(st, text, dst)
	}
	// Cut before every ▁ that follows another character: no token spans
	// such a boundary (checked in New), so the merges cannot either.
	start := 0
	for i := 0; i < len(text); {
		k := strings.Index(text[i:], spmSpace)
		if k < 0 {
			break
		}
		k += i
		if k > start && !strings.HasSuffix(text[start:k], spmSpace) {
			dst = t.encodeSPMWord(st, text[start:k], dst)
			start = k
		}
		i = k + len(spmSpace)
	}
	return t.encodeSPMWord(st, text[start:], dst)
}

// encodeSPMWord runs BPE over the characters of word, falling back to
// <0xXX> tokens (or UNK) for characters missing from the vocabulary.
func (t *Tokenizer) encodeSPMWord(st *encState, word string, dst []int32) []int32 {
	if word == "" {
		return dst
	}
	if ids, ok := t.cache.get(t.seed, word); ok {
		return append(dst, ids...)
	}
	syms := st.syms[:0]
	add := func(id int32, start, end int) {
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, start: int32(start), end: int32(end)})
	}
	lastUnk := false
	for i := 0; i < len(word); {
		var id int32 = -1
		n := 1
		if c := word[i]; c < utf8.RuneSelf {
			id = t.asciiID[c]
		} else {
			_, n = utf8.DecodeRuneInString(word[i:])
			if v, ok := t.pieces.get(word[i : i+n]); ok {
				id = v
			}
		}
		if id >= 0 {
			add(id, i, i+n)
			lastUnk = false
			i += n
			continue
		}
		ok := true
		for k := i; k < i+n; k++ {
			if t.byteID[word[k]] < 0 {
				ok = false
				break
			}
		}
		if ok {
			// Byte symbols are marked with start -1 so that score-ranked
			// merging leaves them alone; merge ranks work on ids only.
			for k := i; k < i+n; k++ {
				add(t.byteID[word[k]], -1, -1)
			}
			lastUnk = false
		} else if t.v.UNK >= 0 {
			// HF fuses consecutive unknown characters into one UNK.
			if !lastUnk {
				add(t.v.UNK, -1, -1)
			}
			lastUnk = true
		}
		i += n
	}
	if len(syms) == 0 {
		st.syms = syms
		return dst
	}
	syms[len(syms)-1].next = -1
	st.syms = syms
	n := len(dst)
	dst = t.mergeSymbols(st, word, dst)
	t.cache.put(t.seed, word, dst[n:])
	return dst
}
