package tokenizer

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// buildDecode precomputes the bytes every token decodes to, so that
// decoding is a copy per token, and checks that token texts are UTF-8.
//
// Byte-level tokens map each rune back to its byte; a token holding a rune
// outside that alphabet (an added token such as "<think>" written plainly)
// decodes to its own text, as HF's ByteLevel decoder does per token.
// SentencePiece tokens get ▁ turned back into spaces and <0xXX> into the
// byte.
//
// It returns the set of byte-level tokens whose text was not byte-level
// encoded (bit i of word i/64). Chunks of tokens are decoded in parallel;
// chunk sizes are multiples of 64 so no two workers share a bitset word.
func (t *Tokenizer) buildDecode() (plain []uint64, off []uint32, err error) {
	v := t.v
	n := len(v.Tokens)
	plain = make([]uint64, (n+63)/64)
	off = make([]uint32, n+1)
	w := parallelism(n)
	chunk := ((n+w-1)/w + 63) &^ 63
	nch := (n + chunk - 1) / chunk
	parts := make([][]byte, nch)
	bad := make([]int, nch)
	var wg sync.WaitGroup
	for c := range nch {
		wg.Go(func() {
			lo, hi := c*chunk, min(n, (c+1)*chunk)
			parts[c], bad[c] = t.decodeTokens(lo, hi, off, plain)
		})
	}
	wg.Wait()
	total := 0
	for c, p := range parts {
		if bad[c] >= 0 {
			return nil, nil, fmt.Errorf("tokenizer: token %d is not valid UTF-8", bad[c])
		}
		// Offsets were written relative to their chunk.
		for i := c*chunk + 1; i <= min(n, (c+1)*chunk); i++ {
			off[i] += uint32(total)
		}
		total += len(p)
	}
	if total > math.MaxUint32>>1 {
		return nil, nil, fmt.Errorf("tokenizer: vocabulary text of %d bytes is too large", total)
	}
	var b strings.Builder
	b.Grow(total)
	for _, p := range parts {
		b.Write(p)
	}
	t.dec = b.String()
	t.decInfo = make([]uint64, n)
	// Short tokens (most of them) are also kept in fixed 16-byte slots,
	// the last byte holding the length, so Decode copies them with one
	// load and store from one cache line instead of calling memmove on
	// text found through the offsets.
	t.decShort = make([][16]byte, n)
	forChunks(n, w, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s := t.dec[off[i]:off[i+1]]
			info := uint64(off[i])<<32 | uint64(len(s))<<1
			if utf8.ValidString(s) {
				info |= 1
			}
			t.decInfo[i] = info
			if len(s) < 16 {
				copy(t.decShort[i][:], s)
				t.decShort[i][15] = byte(len(s))
			} else {
				t.decShort[i][15] = 0xFF
			}
		}
	})
	return plain, off, nil
}

// decodeTokens decodes tokens lo..hi-1, writing their end offsets relative
// to the returned buffer; bad is the first token that is not UTF-8, or -1.
func (t *Tokenizer) decodeTokens(lo, hi int, off []uint32, plain []uint64) (b []byte, bad int) {
	size := 0
	for _, s := range t.v.Tokens[lo:hi] {
		size += len(s)
	}
	b = make([]byte, 0, size)
	bad = -1
	for i := lo; i < hi; i++ {
		s := t.v.Tokens[i]
		switch t.kind {
		case kindByteBPE:
			var ok bool
			if b, ok = appendByteLevelDecoded(b, s); !ok {
				// Decoding succeeds only on valid UTF-8; check the rest.
				if bad < 0 && !utf8.ValidString(s) {
					bad = i
				}
				b = append(b, s...)
				plain[i/64] |= 1 << (i % 64)
			}
		case kindSPM:
			if bad < 0 && !utf8.ValidString(s) {
				bad = i
			}
			if c, ok := parseByteToken(s); ok {
				b = append(b, c)
				break
			}
			for {
				k := strings.Index(s, spmSpace)
				if k < 0 {
					b = append(b, s...)
					break
				}
				b = append(append(b, s[:k]...), ' ')
				s = s[k+len(spmSpace):]
			}
		}
		off[i+1] = uint32(len(b))
	}
	return b, bad
}

// tokenBytes is what id decodes to, "" for an id out of range, and
// whether that is whole valid UTF-8.
func (t *Tokenizer) tokenBytes(id int32) (string, bool) {
	if uint32(id) >= uint32(len(t.decInfo)) {
		return "", true
	}
	info := t.decInfo[id]
	off := uint32(info >> 32)
	return t.dec[off : off+uint32(info)>>1], info&1 != 0
}

// Piece returns the bytes id stands for on its own: the byte-level
// alphabet mapped back to bytes, SentencePiece's ▁ as a space (kept at
// the start, where Decode strips one) and <0xXX> as its byte. It may be
// part of a UTF-8 character, so it is not always valid UTF-8; "" for an
// id out of range. llama.cpp's /tokenize "piece" is this.
func (t *Tokenizer) Piece(id int32) string {
	s, _ := t.tokenBytes(id)
	return s
}

// Decode turns ids back into text as HF's decode(ids,
// skip_special_tokens=False) does. Ids out of range are skipped. Bytes
// that do not form valid UTF-8 become U+FFFD, one per maximal invalid
// subsequence.
func (t *Tokenizer) Decode(ids []int32) string {
	nt := uint32(len(t.decShort))
	short := t.decShort
	// 16 bytes of slack let every short token be stored whole.
	buf := make([]byte, 0, 4*len(ids)+16)
	for _, id := range ids {
		if uint32(id) >= nt {
			continue
		}
		s := &short[id]
		if n := int(s[15]); n < 16 {
			p := len(buf)
			if cap(buf)-p < 16 {
				buf = slices.Grow(buf, 16+len(buf)/2)
			}
			buf = buf[:p+16]
			*(*[16]byte)(buf[p:]) = *s
			buf = buf[:p+n]
		} else {
			b, _ := t.tokenBytes(id)
			buf = append(buf, b...)
		}
	}
	if t.kind == kindSPM && len(buf) > 0 && buf[0] == ' ' {
		// HF's Strip decoder drops the dummy prefix's space.
		buf = buf[1:]
	}
	if !utf8.Valid(buf) {
		buf = appendLossy(nil, buf)
	}
	return string(buf)
}

// Stream is an incremental detokenizer: Add returns the text that the ids
// so far complete, holding back the bytes of a character split across
// tokens. Concatenating every Add and the final Flush gives Decode of the
// same ids. A Stream is not safe for concurrent use.
type Stream struct {
	t       *Tokenizer
	pending []byte
	started bool
}

// NewStream starts an incremental decode.
func (t *Tokenizer) NewStream() *Stream { return &Stream{t: t} }

// Add appends a token and returns the text it completes, often "".
func (s *Stream) Add(id int32) string {
	b, valid := s.t.tokenBytes(id)
	if b == "" {
		return ""
	}
	if !s.started {
		s.started = true
		if s.t.kind == kindSPM && b[0] == ' ' {
			b = b[1:]
		}
	}
	if len(s.pending) == 0 && valid {
		return b
	}
	s.pending = append(s.pending, b...)
	cut := heldTail(s.pending)
	if cut == 0 {
		return ""
	}
	var out string
	if utf8.Valid(s.pending[:cut]) {
		out = string(s.pending[:cut])
	} else {
		out = string(appendLossy(nil, s.pending[:cut]))
	}
	s.pending = s.pending[:copy(s.pending, s.pending[cut:])]
	return out
}

// Flush returns what is still held, with an unfinished character as
// U+FFFD, and empties the stream's buffer. More ids may follow.
func (s *Stream) Flush() string {
	if len(s.pending) == 0 {
		return ""
	}
	out := string(appendLossy(nil, s.pending))
	s.pending = s.pending[:0]
	return out
}

// Reset discards held bytes and starts a new text.
func (s *Stream) Reset() {
	s.pending = s.pending[:0]
	s.started = false
}

// heldTail returns where the trailing incomplete-but-completable UTF-8
// sequence of p starts (len(p) when there is none). Bytes before it can be
// converted now: since that sequence starts with a lead byte, no earlier
// sequence can run into it.
func heldTail(p []byte) int {
	for k := len(p) - 1; k >= 0 && k >= len(p)-3; k-- {
		c := p[k]
		if c < 0x80 {
			return len(p)
		}
		if c < 0xC0 { // continuation byte: look further back for the lead
			continue
		}
		need := seqLen(c)
		if need == 0 || len(p)-k >= need {
			return len(p)
		}
		for j := k + 1; j < len(p); j++ {
			if !validCont(c, j-k, p[j]) {
				return len(p)
			}
		}
		return k
	}
	return len(p)
}

// seqLen is the length of the sequence lead byte c starts, 0 if c cannot
// start one.
func seqLen(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c < 0xC2:
		return 0
	case c < 0xE0:
		return 2
	case c < 0xF0:
		return 3
	case c < 0xF5:
		return 4
	}
	return 0
}

// validCont reports whether b may be byte k (k ≥ 1) of a sequence led by
// lead (Unicode Table 3-7: no overlongs, surrogates or values past U+10FFFF).
func validCont(lead byte, k int, b byte) bool {
	lo, hi := byte(0x80), byte(0xBF)
	if k == 1 {
		switch lead {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F
		case 0xF0:
			lo = 0x90
		case 0xF4:
			hi = 0x8F
		}
	}
	return b >= lo && b <= hi
}

// appendLossy appends p to dst with each maximal invalid subsequence
// replaced by U+FFFD: the W3C/Unicode "maximal subpart" practice that
// Rust's from_utf8_lossy and Python's errors="replace" follow.
func appendLossy(dst, p []byte) []byte {
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if r, n := utf8.DecodeRune(p[i:]); r != utf8.RuneError || n > 1 {
			dst = append(dst, p[i:i+n]...)
			i += n
			continue
		}
		k := 1
		if need := seqLen(c); need > 1 {
			for k < need && i+k < len(p) && validCont(c, k, p[i+k]) {
				k++
			}
		}
		dst = append(dst, "\uFFFD"...)
		i += k
	}
	return dst
}

// toValidUTF8 repairs s as appendLossy does.
func toValidUTF8(s string) string {
	return string(appendLossy(make([]byte, 0, len(s)+8), []byte(s)))
}
