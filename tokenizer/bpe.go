package tokenizer

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// GPT-2's byte-level alphabet: every byte is written as a printable rune so
// that vocabulary files never hold raw control bytes or spaces. Printable
// Latin-1 bytes stand for themselves; the rest are numbered from U+0100 up.
var (
	byteToRune [256]rune
	runeToByte [0x144]int16 // -1: the rune stands for no byte
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	next := rune(0x100)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = int16(b)
	}
}

// ByteRune is the rune that stands for byte b in byte-level (GPT-2 style)
// vocabularies: what a tool writing such a vocabulary must use.
func ByteRune(b byte) rune { return byteToRune[b] }

// appendByteLevelDecoded appends the bytes that a byte-level token text
// stands for, and reports false (appending nothing) when the text holds a
// rune outside the alphabet, as added tokens may.
func appendByteLevelDecoded(dst []byte, s string) ([]byte, bool) {
	n := len(dst)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if runeToByte[c] < 0 {
				return dst[:n], false
			}
			dst = append(dst, c)
			i++
			continue
		}
		// The whole alphabet is below U+0144: two-byte sequences led by
		// C2..C5. Decoding those inline is most of New's decode-table time.
		if c >= 0xC2 && c <= 0xC5 && i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
			r := rune(c&0x1F)<<6 | rune(s[i+1]&0x3F)
			if r >= rune(len(runeToByte)) || runeToByte[r] < 0 {
				return dst[:n], false
			}
			dst = append(dst, byte(runeToByte[r]))
			i += 2
			continue
		}
		return dst[:n], false
	}
	return dst, true
}

// symbol is one node of the doubly linked list the merges run over; start
// and end index the word being encoded.
type symbol struct {
	id         int32 // -1 once merged into its left neighbour
	prev, next int32
	start, end int32
}

// candidate is a possible merge of symbols[pos] with its right neighbour.
// Ordering by rank, then position, is HF's: lowest rank first, leftmost
// among equals.
type candidate struct {
	key         uint64 // rank<<32 | pos
	left, right int32  // the ids it was computed for; stale when they changed
	id          int32
}

// encState is per-call scratch space, pooled so that steady-state encoding
// does not allocate per pre-token.
type encState struct {
	syms []symbol
	heap []candidate
	// The pre-tokenizer chains' pieces and regex scratch space.
	spans, spans2 []span
	re            reMatcher
}

var statePool = sync.Pool{New: func() any { return new(encState) }}

func (st *encState) push(c candidate) {
	h := append(st.heap, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key <= c.key {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = c
	st.heap = h
}

func (st *encState) pop() candidate {
	h := st.heap
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	n := len(h)
	if n > 0 {
		i := 0
		for {
			l := 2*i + 1
			if l >= n {
				break
			}
			if r := l + 1; r < n && h[r].key < h[l].key {
				l = r
			}
			if last.key <= h[l].key {
				break
			}
			h[i] = h[l]
			i = l
		}
		h[i] = last
	}
	st.heap = h
	return top
}

// pairRank returns the merge of adjacent symbols l and r of word.
func (t *Tokenizer) pairRank(word string, l, r *symbol) (uint32, int32, bool) {
	if !t.useScores {
		return t.merges.get(l.id, r.id)
	}
	if l.start < 0 || r.start < 0 {
		return 0, 0, false
	}
	id, ok := t.pieces.get(word[l.start:r.end])
	if !ok {
		return 0, 0, false
	}
	return t.scoreKey[id], id, true
}

func (t *Tokenizer) tryPush(st *encState, word string, pos int32) {
	l := &st.syms[pos]
	if l.next < 0 {
		return
	}
	r := &st.syms[l.next]
	if rank, id, ok := t.pairRank(word, l, r); ok {
		st.push(candidate{key: uint64(rank)<<32 | uint64(uint32(pos)), left: l.id, right: r.id, id: id})
	}
}

// mergeSymbols runs BPE over st.syms (already linked) and appends the
// resulting ids to dst.
func (t *Tokenizer) mergeSymbols(st *encState, word string, dst []int32) []int32 {
	syms := st.syms
	st.heap = st.heap[:0]
	for i := range syms {
		t.tryPush(st, word, int32(i))
	}
	for len(st.heap) > 0 {
		c := st.pop()
		pos := int32(uint32(c.key))
		l := &syms[pos]
		if l.id != c.left || l.next < 0 || syms[l.next].id != c.right {
			continue
		}
		r := &syms[l.next]
		l.id = c.id
		l.end = r.end
		l.next = r.next
		r.id = -1
		if l.next >= 0 {
			syms[l.next].prev = pos
		}
		if l.prev >= 0 {
			t.tryPush(st, word, l.prev)
		}
		t.tryPush(st, word, pos)
	}
	for i := int32(0); i >= 0 && int(i) < len(syms); i = syms[i].next {
		if syms[i].id >= 0 {
			dst = append(dst, syms[i].id)
		}
	}
	return dst
}

// encodeBytePiece appends the ids of one pre-token of a byte-level vocabulary.
func (t *Tokenizer) encodeBytePiece(st *encState, piece string, dst []int32) []int32 {
	if len(piece) == 1 {
		if id := t.byteID[piece[0]]; id >= 0 {
			return append(dst, id)
		}
	}
	if t.ignoreMerges {
		if id, ok := t.pieces.get(piece); ok {
			return append(dst, id)
		}
	}
	if ids, ok := t.cache.get(t.seed, piece); ok {
		return append(dst, ids...)
	}
	syms := st.syms[:0]
	for i := 0; i < len(piece); i++ {
		id := t.byteID[piece[i]]
		if id < 0 {
			// HF drops a character the vocabulary cannot spell when there
			// is no unknown token; with one, it stands in.
			if t.v.UNK < 0 {
				continue
			}
			id = t.v.UNK
		}
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, start: int32(i), end: int32(i + 1)})
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1
	st.syms = syms
	n := len(dst)
	dst = t.mergeSymbols(st, piece, dst)
	t.cache.put(t.seed, piece, dst[n:])
	return dst
}

// pieceCache remembers the ids of recent pre-tokens. It is a fixed array
// of atomically replaced immutable entries: lock-free for concurrent
// encoders, bounded in size, and a lost race only costs a recomputation.
type pieceCache struct {
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	key string
	ids []int32
}

const maxCachedPiece = 64

func (c *pieceCache) init(n int) { c.slots = make([]atomic.Pointer[cacheEntry], n) }

func (c *pieceCache) get(seed maphash.Seed, key string) ([]int32, bool) {
	if len(key) > maxCachedPiece || len(c.slots) == 0 {
		return nil, false
	}
	e := c.slots[maphash.String(seed, key)&uint64(len(c.slots)-1)].Load()
	if e == nil || e.key != key {
		return nil, false
	}
	return e.ids, true
}

func (c *pieceCache) put(seed maphash.Seed, key string, ids []int32) {
	if len(key) > maxCachedPiece || len(c.slots) == 0 {
		return
	}
	// The key is copied so that the entry does not pin the caller's text.
	e := &cacheEntry{key: strings.Clone(key), ids: slices.Clone(ids)}
	c.slots[maphash.String(seed, key)&uint64(len(c.slots)-1)].Store(e)
}
