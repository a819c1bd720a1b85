package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestGolden(t *testing.T) {
	gs := loadGoldens(t)
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			tk := loadTokenizer(t, name)
			pass, total := 0, 0
			for _, g := range gs {
				if g.Vocab != name {
					continue
				}
				total++
				ids := tk.Encode(g.Text)
				dec := tk.Decode(g.IDs)
				if !slices.Equal(ids, g.IDs) {
					t.Errorf("Encode(%q)\n got %v\nwant %v", g.Text, ids, g.IDs)
					continue
				}
				if dec != g.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", g.IDs, dec, g.Decoded)
					continue
				}
				pass++
			}
			if total == 0 {
				t.Fatal("no goldens for this vocabulary")
			}
			t.Logf("%s: %d/%d goldens match", name, pass, total)
		})
	}
}

// streamAll feeds ids one at a time and checks that no piece ever holds
// U+FFFD unless Decode's text has it too.
func streamAll(t *testing.T, tk *Tokenizer, ids []int32) string {
	t.Helper()
	s := tk.NewStream()
	var b strings.Builder
	for _, id := range ids {
		out := s.Add(id)
		if !utf8.ValidString(out) {
			t.Fatalf("stream emitted invalid UTF-8 %q", out)
		}
		b.WriteString(out)
	}
	b.WriteString(s.Flush())
	return b.String()
}

func TestStreamGoldens(t *testing.T) {
	for _, g := range loadGoldens(t) {
		tk := loadTokenizer(t, g.Vocab)
		got := streamAll(t, tk, g.IDs)
		if want := tk.Decode(g.IDs); got != want {
			t.Errorf("%s %q: stream %q, Decode %q", g.Vocab, g.Text, got, want)
		}
		if strings.ContainsRune(got, utf8.RuneError) && !strings.ContainsRune(g.Decoded, utf8.RuneError) {
			t.Errorf("%s %q: stream produced U+FFFD: %q", g.Vocab, g.Text, got)
		}
	}
}

// Characters outside the SentencePiece vocabulary are spelled with
// <0xXX> tokens, and byte-level tokens split UTF-8 sequences too: the
// stream must hold partial characters back rather than emit U+FFFD.
func TestStreamSplitCharacters(t *testing.T) {
	text := "I ❤ Go 👨‍👩‍👧‍👦 🇯🇵 你好，世界 Ελληνικά 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			tk := loadTokenizer(t, name)
			ids := tk.Encode(text)
			s := tk.NewStream()
			var b strings.Builder
			for _, id := range ids {
				out := s.Add(id)
				if strings.ContainsRune(out, utf8.RuneError) {
					t.Fatalf("Add(%d) emitted U+FFFD: %q", id, out)
				}
				b.WriteString(out)
			}
			if rest := s.Flush(); rest != "" {
				t.Errorf("Flush after whole characters = %q, want empty", rest)
			}
			if got, want := b.String(), norm.NFC.String(text); got != want {
				t.Errorf("stream = %q, want %q", got, want)
			}
			if name == "mistral" {
				bytesSeen := 0
				for _, id := range ids {
					if tk.Vocab().Type(id) == TypeByte {
						bytesSeen++
					}
				}
				if bytesSeen == 0 {
					t.Error("expected byte-fallback tokens in the mistral encoding")
				}
			}
		})
	}
}

// Byte tokens fed one by one: a split character appears only once it is
// complete; bytes that can never be completed come out as U+FFFD at once.
func TestStreamByteFallback(t *testing.T) {
	tk := loadTokenizer(t, "mistral")
	b := func(x byte) int32 {
		id, ok := tk.TokenID(fmt.Sprintf("<0x%02X>", x))
		if !ok {
			t.Fatalf("no byte token for %02X", x)
		}
		return id
	}
	hello, _ := tk.TokenID("▁Hello")
	cases := []struct {
		ids  []int32
		outs []string // per Add, then Flush
	}{
		{[]int32{b(0xE2), b(0x9D), b(0xA4)}, []string{"", "", "❤", ""}},
		{[]int32{b(0xF0), b(0x9F), b(0x98), b(0x80), hello}, []string{"", "", "", "😀", " Hello", ""}},
		{[]int32{b(0xFF), b(0x41)}, []string{"\uFFFD", "A", ""}},
		{[]int32{b(0xE2), b(0x9D), b(0x41)}, []string{"", "", "\uFFFDA", ""}},
		{[]int32{b(0xE2), b(0x9D)}, []string{"", "", "\uFFFD"}},
		{[]int32{b(0xED), b(0xA0), b(0x80)}, []string{"", "\uFFFD\uFFFD", "\uFFFD", ""}}, // ED may start U+D000..; ED A0 (a surrogate) never
		{[]int32{hello, b(0xC3)}, []string{"Hello", "", "\uFFFD"}},
	}
	for _, c := range cases {
		s := tk.NewStream()
		var got []string
		for _, id := range c.ids {
			got = append(got, s.Add(id))
		}
		got = append(got, s.Flush())
		if !slices.Equal(got, c.outs) {
			t.Errorf("ids %v: stream pieces %q, want %q", c.ids, got, c.outs)
		}
		if joined, want := strings.Join(got, ""), tk.Decode(c.ids); joined != want {
			t.Errorf("ids %v: stream %q != Decode %q", c.ids, joined, want)
		}
	}
}

func TestDecodeLossy(t *testing.T) {
	tk := loadTokenizer(t, "llama3")
	// Byte-level tokens for the raw bytes E2 82 (a truncated €) then 'A':
	// one U+FFFD for the maximal invalid subpart, as from_utf8_lossy.
	raw := func(s string) int32 {
		id, ok := tk.pieces.get(s)
		if !ok {
			t.Fatalf("no token for bytes %x", s)
		}
		return id
	}
	ids := []int32{raw("\xe2"), raw("\x82"), raw("A")}
	if got := tk.Decode(ids); got != "\uFFFDA" {
		t.Errorf("Decode = %q, want %q", got, "\uFFFDA")
	}
	if got := tk.Decode([]int32{-1, 1 << 30, raw("A")}); got != "A" {
		t.Errorf("Decode with out-of-range ids = %q, want %q", got, "A")
	}
}

// Piece is a token's own bytes: a lone byte of a split character stays
// that byte, and a SentencePiece piece keeps its leading space.
func TestPiece(t *testing.T) {
	tk := loadTokenizer(t, "llama3")
	e2, _ := tk.pieces.get("\xe2")
	if got := tk.Piece(e2); got != "\xe2" {
		t.Errorf("Piece(byte E2) = %q", got)
	}
	for _, id := range tk.Encode("Hello world") {
		if got, want := tk.Piece(id), tk.Decode([]int32{id}); got != want {
			t.Errorf("Piece(%d) = %q, Decode = %q", id, got, want)
		}
	}
	if tk.Piece(-1) != "" || tk.Piece(1<<30) != "" {
		t.Error("Piece of an id out of range is not empty")
	}
	spm := loadTokenizer(t, "mistral")
	hello, _ := spm.TokenID("▁Hello")
	if got := spm.Piece(hello); got != " Hello" {
		t.Errorf("Piece(▁Hello) = %q, want %q", got, " Hello")
	}
}

// TestLiteralMode: without special parsing, control tokens written in the
// text are taken literally, but user-defined tokens (Qwen3's <think>,
// non-special added tokens in HF) are still matched, as HF and llama.cpp
// match them.
func TestLiteralMode(t *testing.T) {
	cases := []struct {
		vocab, text string
		special     int32
		user        bool // the token is user-defined: matched in both modes
	}{
		{"qwen3", "<|im_start|>user\nhi<|im_end|>", 151644, false},
		{"qwen3", "<think>x</think>", 151667, true},
		{"llama3", "<|begin_of_text|>Hello", 128000, false},
		{"gptoss", "<|endoftext|>", 199999, false},
		{"mistral", "</s>", 2, false},
	}
	for _, c := range cases {
		tk := loadTokenizer(t, c.vocab)
		if ty := tk.Vocab().Type(c.special); (ty == TypeUserDefined) != c.user {
			t.Fatalf("%s: token %d has type %d", c.vocab, c.special, ty)
		}
		parsed := tk.Encode(c.text)
		if !slices.Contains(parsed, c.special) {
			t.Errorf("%s Encode(%q) = %v, want it to contain %d", c.vocab, c.text, parsed, c.special)
		}
		lit := tk.EncodeWith(c.text, EncodeOptions{})
		if c.user && !slices.Equal(lit, parsed) {
			t.Errorf("%s literal Encode(%q) = %v, want %v: user-defined tokens match in both modes", c.vocab, c.text, lit, parsed)
		}
		for _, id := range lit {
			if ty := tk.Vocab().Type(id); ty == TypeControl || ty == TypeUnknown {
				t.Errorf("%s literal Encode(%q) = %v holds control token %d", c.vocab, c.text, lit, id)
			}
		}
		if got := tk.Decode(lit); got != c.text {
			t.Errorf("%s literal round trip = %q, want %q", c.vocab, got, c.text)
		}
	}
}

func TestLongestSpecialMatch(t *testing.T) {
	v := &Vocab{
		Model:  "gpt2",
		Pre:    "gpt2",
		Tokens: []string{"a", "b", "<", ">", "<ab>", "<ab>>", "<a"},
		Types:  []int32{1, 1, 1, 1, 3, 4, 3},
		BOS:    -1, EOS: -1, EOT: -1, PAD: -1, UNK: -1,
	}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string][]int32{
		"<ab>>":  {5},
		"<ab>":   {4},
		"a<ab>b": {0, 4, 1},
		"<ab":    {6, 1},
		"<":      {2},
	} {
		if got := tk.Encode(text); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestAddSpecial(t *testing.T) {
	cases := []struct {
		vocab      string
		first, end int32 // -1: nothing added
	}{
		{"mistral", 1, -1},
		{"llama3", 128000, -1},
		{"qwen3", -1, -1},
		{"gptoss", -1, -1},
	}
	for _, c := range cases {
		tk := loadTokenizer(t, c.vocab)
		plain := tk.Encode("Hello world")
		got := tk.EncodeWith("Hello world", EncodeOptions{ParseSpecial: true, AddSpecial: true})
		want := plain
		if c.first >= 0 {
			want = append([]int32{c.first}, want...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: AddSpecial gives %v, want %v", c.vocab, got, want)
		}
	}
	v := *loadVocab(t, "mistral")
	v.AddEOS = true
	tk, err := New(&v)
	if err != nil {
		t.Fatal(err)
	}
	got := tk.EncodeWith("Hello", EncodeOptions{AddSpecial: true})
	if want := []int32{1, 22557, 2}; !slices.Equal(got, want) {
		t.Errorf("AddEOS: %v, want %v", got, want)
	}
}

// Mistral's dummy prefix is added to every segment between special
// tokens, as HF's Prepend normalizer does.
func TestSentencePiecePrefix(t *testing.T) {
	tk := loadTokenizer(t, "mistral")
	got := tk.Encode("Hello</s>Hello")
	if want := []int32{22557, 2, 22557}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	v := *loadVocab(t, "mistral")
	v.AddSpacePrefix = false
	tk2, err := New(&v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk2.Encode("Hello"); slices.Equal(got, []int32{22557}) {
		t.Errorf("without a space prefix Encode(Hello) = %v, must not be ▁Hello", got)
	}
	if got := tk2.Decode(tk2.Encode(" Hello world")); got != "Hello world" {
		// The decoder still strips one leading space, as HF's does.
		t.Errorf("round trip without prefix = %q", got)
	}
}

// Without merges, SentencePiece vocabularies rank pairs by score (what
// llama.cpp does); FromHFJSON's scores must then give the merges' result.
func TestSentencePieceScores(t *testing.T) {
	v := *loadVocab(t, "mistral")
	v.Merges = nil
	tk, err := New(&v)
	if err != nil {
		t.Fatal(err)
	}
	if !tk.useScores {
		t.Fatal("expected score ranking")
	}
	ref := loadTokenizer(t, "mistral")
	for _, g := range loadGoldens(t) {
		if g.Vocab != "mistral" {
			continue
		}
		if got := tk.Encode(g.Text); !slices.Equal(got, g.IDs) {
			t.Errorf("score-ranked Encode(%q) = %v, want %v", g.Text, got, g.IDs)
		}
	}
	for _, text := range []string{mixedText(64 << 10)} {
		if got, want := tk.Encode(text), ref.Encode(text); !slices.Equal(got, want) {
			t.Errorf("score-ranked and merge-ranked encodings of mixed text differ (%d vs %d tokens)", len(got), len(want))
		}
	}
}

func TestInvalidUTF8(t *testing.T) {
	cases := []struct{ in, same string }{
		{"\xff", "\uFFFD"},
		{"a\xe2\x82b", "a\uFFFDb"},               // truncated 3-byte sequence: one U+FFFD
		{"\xe0\x80", "\uFFFD\uFFFD"},             // E0 80 is not a valid prefix: two
		{"\xed\xa0\x80x", "\uFFFD\uFFFD\uFFFDx"}, // surrogate
		{"\xf0\x9f\x98", "\uFFFD"},
		{"ok\xc3", "ok\uFFFD"},
	}
	for _, name := range vocabNames {
		tk := loadTokenizer(t, name)
		for _, c := range cases {
			got, want := tk.Encode(c.in), tk.Encode(c.same)
			if !slices.Equal(got, want) {
				t.Errorf("%s: Encode(%q) = %v, want Encode(%q) = %v", name, c.in, got, c.same, want)
			}
		}
	}
}

func TestMalformedVocab(t *testing.T) {
	base := func() *Vocab {
		return &Vocab{
			Model:  "gpt2",
			Pre:    "llama-bpe",
			Tokens: []string{"a", "b", "ab", "<s>"},
			Types:  []int32{1, 1, 1, 3},
			Merges: []string{"a b"},
			BOS:    3, EOS: -1, EOT: -1, PAD: -1, UNK: -1,
		}
	}
	if _, err := New(base()); err != nil {
		t.Fatalf("base vocabulary: %v", err)
	}
	cases := map[string]func(v *Vocab){
		"no tokens":          func(v *Vocab) { v.Tokens, v.Types = nil, nil },
		"types length":       func(v *Vocab) { v.Types = v.Types[:2] },
		"scores length":      func(v *Vocab) { v.Scores = []float32{1} },
		"bad type":           func(v *Vocab) { v.Types[0] = 9 },
		"negative type":      func(v *Vocab) { v.Types[0] = -3 },
		"BOS out of range":   func(v *Vocab) { v.BOS = 4 },
		"EOS negative":       func(v *Vocab) { v.EOS = -2 },
		"UNK out of range":   func(v *Vocab) { v.UNK = 1 << 20 },
		"merge missing half": func(v *Vocab) { v.Merges = []string{"a c"} },
		"merge no result":    func(v *Vocab) { v.Merges = []string{"b a"} },
		"merge no space":     func(v *Vocab) { v.Merges = []string{"ab"} },
		"merge empty":        func(v *Vocab) { v.Merges = []string{""} },
		"merge trailing sep": func(v *Vocab) { v.Merges = []string{"a "} },
		"unknown model":      func(v *Vocab) { v.Model = "wordpiece" },
		"empty model":        func(v *Vocab) { v.Model = "" },
		"unknown pre":        func(v *Vocab) { v.Pre = "starcoder-unknown" },
		"invalid utf8 token": func(v *Vocab) { v.Tokens[0] = "\xff" },
	}
	for name, mutate := range cases {
		v := base()
		mutate(v)
		tk, err := New(v)
		if err == nil {
			t.Errorf("%s: New succeeded", name)
			continue
		}
		if tk != nil {
			t.Errorf("%s: New returned a tokenizer with its error", name)
		}
		if !strings.HasPrefix(err.Error(), "tokenizer: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

// A vocabulary missing byte tokens still encodes every input without
// panicking: HF drops what it cannot spell, or uses UNK when there is one.
func TestSparseVocab(t *testing.T) {
	for _, model := range []string{"gpt2", "llama"} {
		for _, unk := range []int32{-1, 0} {
			v := &Vocab{
				Model:  model,
				Pre:    "qwen2",
				Tokens: []string{"<unk>", "a", "b", "ab", "▁", "▁a"},
				Types:  []int32{2, 1, 1, 1, 1, 1},
				Merges: []string{"a b", "▁ a"},
				BOS:    -1, EOS: -1, EOT: -1, PAD: -1, UNK: unk,
				AddSpacePrefix: true,
			}
			tk, err := New(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range []string{"ab", "a b c", "😀", "\xff", "", " ", "<unk>"} {
				ids := tk.Encode(text)
				for _, id := range ids {
					if id < 0 || int(id) >= len(v.Tokens) {
						t.Fatalf("%s unk=%d Encode(%q) = %v: id out of range", model, unk, text, ids)
					}
					if unk < 0 && id == 0 && text != "<unk>" {
						t.Errorf("%s Encode(%q) = %v uses <unk> while UNK is unset", model, text, ids)
					}
				}
				_ = tk.Decode(ids)
			}
			if got := tk.Encode("ab"); model == "gpt2" && !slices.Equal(got, []int32{3}) {
				t.Errorf("gpt2 Encode(ab) = %v, want [3]", got)
			}
		}
	}
}

func TestTokenLookup(t *testing.T) {
	tk := loadTokenizer(t, "qwen3")
	if id, ok := tk.TokenID("<|im_end|>"); !ok || id != 151645 {
		t.Errorf("TokenID(<|im_end|>) = %d, %v", id, ok)
	}
	if _, ok := tk.TokenID("no such token"); ok {
		t.Error("TokenID found a missing token")
	}
	if tk.Token(151645) != "<|im_end|>" || tk.Token(-1) != "" || tk.Token(1<<30) != "" {
		t.Error("Token gives wrong texts")
	}
	if !tk.IsEOG(151645) || tk.IsEOG(9707) || tk.IsEOG(-1) {
		t.Error("IsEOG wrong")
	}
	if tk.Len() != 151669 {
		t.Errorf("Len = %d", tk.Len())
	}
}

func TestVocabMetadata(t *testing.T) {
	cases := []struct {
		name                   string
		model, pre             string
		bos, eos, eot, pad     int32
		addBOS, addEOS, prefix bool
	}{
		{"mistral", "llama", "default", 1, 2, -1, -1, true, false, true},
		{"llama3", "gpt2", "llama-bpe", 128000, 128001, 128009, -1, true, false, false},
		{"qwen3", "gpt2", "qwen2", -1, 151645, 151645, 151643, false, false, false},
		{"gptoss", "gpt2", "gpt-4o", 199998, 200002, 200002, 199999, false, false, false},
	}
	for _, c := range cases {
		v := loadVocab(t, c.name)
		if v.Model != c.model || v.Pre != c.pre || v.BOS != c.bos || v.EOS != c.eos || v.EOT != c.eot || v.PAD != c.pad ||
			v.AddBOS != c.addBOS || v.AddEOS != c.addEOS || v.AddSpacePrefix != c.prefix {
			t.Errorf("%s: got model=%s pre=%s bos=%d eos=%d eot=%d pad=%d addbos=%v addeos=%v prefix=%v", c.name,
				v.Model, v.Pre, v.BOS, v.EOS, v.EOT, v.PAD, v.AddBOS, v.AddEOS, v.AddSpacePrefix)
		}
		if c.name != "gptoss" && v.ChatTemplate == "" && c.name != "mistral" {
			t.Errorf("%s: no chat template", c.name)
		}
	}
	// Token types as llama.cpp's converter assigns them.
	mv := loadVocab(t, "mistral")
	if mv.Types[0] != TypeControl || mv.Types[1] != TypeControl || mv.Types[3] != TypeByte || mv.Types[28705] != TypeNormal {
		t.Errorf("mistral types: %v %v %v %v", mv.Types[0], mv.Types[1], mv.Types[3], mv.Types[28705])
	}
	qv := loadVocab(t, "qwen3")
	if qv.Types[151644] != TypeControl || qv.Types[151667] != TypeUserDefined || qv.Types[151659] != TypeControl {
		t.Errorf("qwen3 types: im_start %d think %d fim_prefix %d", qv.Types[151644], qv.Types[151667], qv.Types[151659])
	}
}
