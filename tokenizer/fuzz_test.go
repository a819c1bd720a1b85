package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

var fuzzSeeds = []string{
	"", " ", "Hello world", " Hello", "don't IT'S 'ſ", "1234567890", "  \n\n\t x  ",
	"<|im_start|>user\nhi<|im_end|>", "<s>[INST] hi [/INST]</s>", "<|begin_of_text|><|eot_id|>",
	"👨‍👩‍👧‍👦🇯🇵", "你好，世界", "café café", "naïve\u0301", "▁▁x▁", "\xff\xfe", "a\xe2\x82b", "\xed\xa0\x80",
	"<<|im_start|>", "<|im_start", "\r\n\r\n", "a/b//\n", "Ⅻ½٣", "\u3000\u00a0x",
}

// FuzzEncode: any bytes encode without panicking to ids in range, under
// either special-token mode; Decode and the stream agree; invalid UTF-8 is
// encoded as its U+FFFD repair.
func FuzzEncode(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), []byte(s), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte, parseSpecial bool) {
		name := vocabNames[int(which)%len(vocabNames)]
		tk := loadTokenizer(t, name)
		text := string(data)
		opts := EncodeOptions{ParseSpecial: parseSpecial}
		ids := tk.EncodeWith(text, opts)
		for _, id := range ids {
			if id < 0 || int(id) >= tk.Len() {
				t.Fatalf("%s: Encode(%q) = %v: id %d out of range", name, text, ids, id)
			}
		}
		if !utf8.ValidString(text) {
			if want := tk.EncodeWith(toValidUTF8(text), opts); !slices.Equal(ids, want) {
				t.Fatalf("%s: Encode(%q) = %v, but its repair encodes to %v", name, text, ids, want)
			}
		}
		dec := tk.Decode(ids)
		if !utf8.ValidString(dec) {
			t.Fatalf("%s: Decode gave invalid UTF-8 %q", name, dec)
		}
		s := tk.NewStream()
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(s.Add(id))
		}
		b.WriteString(s.Flush())
		if b.String() != dec {
			t.Fatalf("%s: stream %q != Decode %q", name, b.String(), dec)
		}
	})
}

// FuzzRoundTrip: valid UTF-8 holding no special-token string decodes back
// to itself after the vocabulary's normalization (NFC for Qwen2; ▁ reads
// back as a space in SentencePiece vocabularies).
func FuzzRoundTrip(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), s)
	}
	f.Fuzz(func(t *testing.T, which uint8, text string) {
		if !utf8.ValidString(text) {
			t.Skip()
		}
		name := vocabNames[int(which)%len(vocabNames)]
		tk := loadTokenizer(t, name)
		if hasSpecial(tk, text) {
			t.Skip()
		}
		want := text
		switch {
		case tk.kind == kindSPM:
			want = strings.ReplaceAll(text, spmSpace, " ")
		case tk.nfc:
			want = norm.NFC.String(text)
		}
		ids := tk.Encode(text)
		if got := tk.Decode(ids); got != want {
			t.Fatalf("%s: Decode(Encode(%q)) = %q (ids %v), want %q", name, text, got, ids, want)
		}
		if lit := tk.EncodeWith(text, EncodeOptions{}); !slices.Equal(lit, ids) {
			t.Fatalf("%s: literal and special-parsing encodings of %q differ: %v vs %v", name, text, lit, ids)
		}
	})
}

func hasSpecial(tk *Tokenizer, text string) bool {
	for i := 0; i < len(text); i++ {
		if tk.special.first[text[i]] {
			if end, _ := tk.special.match(text, i, false); end > 0 {
				return true
			}
		}
	}
	return false
}
