package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// families returns one preTokenizer per family name.
func families() map[string]preTokenizer {
	out := map[string]preTokenizer{}
	for _, p := range preTokenizers {
		if err := p.compile(); err != nil {
			panic(err)
		}
		out[p.name] = p
	}
	return out
}

func (p *preTokenizer) patterns() []string {
	if p.scan != nil {
		return []string{p.pattern}
	}
	var out []string
	for _, s := range p.stages {
		out = append(out, s.pattern)
	}
	return out
}

// splitFamily returns the pieces p cuts s into.
func splitFamily(p preTokenizer, s string) []string {
	st := new(encState)
	var spans []span
	if p.scan != nil {
		spans = scanSpans(p.scan, s, 0, nil)
	} else {
		spans = p.split(st, s)
	}
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = s[sp.start:sp.end]
	}
	return out
}

// TestFamiliesMatchRegex holds every family to its regex chain run by a
// backtracking engine (Python's regex module, prefamilies_gen.py) on
// strings mixing the classes the patterns tell apart: whitespace kinds,
// contractions, digits of several scripts, CJK, kana, Hangul, Greek
// letters with canonical decompositions, fullwidth punctuation, marks,
// emoji.
func TestFamiliesMatchRegex(t *testing.T) {
	fh, err := os.Open(filepath.Join(fixtureDir, "prefamilies.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases    []string `json:"cases"`
		Families map[string]struct {
			Patterns []string `json:"patterns"`
			Ends     [][]int  `json:"ends"`
		} `json:"families"`
	}
	if err := json.NewDecoder(zr).Decode(&ref); err != nil {
		t.Fatal(err)
	}
	fams := families()
	if len(ref.Families) != len(fams) {
		t.Errorf("reference has %d families, the table %d", len(ref.Families), len(fams))
	}
	for name, want := range ref.Families {
		p, ok := fams[name]
		if !ok {
			t.Errorf("no family %q", name)
			continue
		}
		if got := p.patterns(); !slices.Equal(got, want.Patterns) {
			t.Errorf("%s: patterns differ from the reference's:\n got %q\nwant %q", name, got, want.Patterns)
			continue
		}
		bad := 0
		for i, c := range ref.Cases {
			var ends []int
			pos := 0
			for _, piece := range splitFamily(p, c) {
				pos += len(piece)
				ends = append(ends, pos)
			}
			if !slices.Equal(ends, want.Ends[i]) && !(len(ends) == 0 && len(want.Ends[i]) == 0) {
				if bad++; bad <= 3 {
					t.Errorf("%s %q:\n got %q\nwant %q", name, c, splitFamily(p, c), cutAt(c, want.Ends[i]))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d cases differ", name, bad, len(ref.Cases))
		}
	}
}

func cutAt(s string, ends []int) []string {
	var out []string
	prev := 0
	for _, e := range ends {
		out = append(out, s[prev:e])
		prev = e
	}
	return out
}

// TestFamilyExamples: each family's characteristic splits, by hand.
func TestFamilyExamples(t *testing.T) {
	cases := []struct {
		pre, in string
		want    []string
	}{
		// llama.cpp's default chain: digits in threes from the left.
		{"default", "3333", []string{"333", "3"}},
		{"default", "12345 678", []string{"123", "45", " ", "678"}},
		{"default", "Hello, world!", []string{"Hello", ",", " world", "!"}},
		{"default", "a~b|c", []string{"a", "~", "b", "|", "c"}},
		{"gpt-2", "3333", []string{"3333"}},
		{"gpt-2", "I'M here", []string{"I", "'", "M", " here"}},
		{"gpt2", "don't", []string{"don", "'t"}},
		{"starcoder", "x 2024", []string{"x", " ", "2", "0", "2", "4"}},
		{"falcon", "12345", []string{"123", "45"}},
		{"falcon", "a`b", []string{"a", "`", "b"}},
		{"mpt", "  x", []string{" ", " x"}},
		// deepseek: CJK runs, punctuation with one space, digits one by one.
		{"deepseek-coder", "你好 world 42!", []string{"你好", " world", " ", "4", "2", "!"}},
		{"deepseek-llm", "Hello\n\n中文", []string{"Hello", "\n", "\n", "中文"}},
		{"deepseek-llm", "x  ", []string{"x", "  "}},
		{"deepseek-v3", "1234 かなカナ", []string{"123", "4", " ", "かなカナ"}},
		{"deepseek-v3", "(abc) x", []string{"(abc", ")", " x"}},
		{"poro-chat", "Hei, maailma!", []string{"Hei", ",", " maailma", "!"}},
		{"viking", "v2024", []string{"v", "2", "0", "2", "4"}},
		{"tekken", "HeLLo world", []string{"He", "LLo", " world"}},
		{"tiny_aya", "1234567 89x", []string{"1", "234", "567", " ", "89", "x"}},
		{"tiny_aya", "12345x", []string{"123", "45", "x"}}, // o200k's threes: no boundary after the run
		{"superbpe", "1234567", []string{"1", "234", "567"}},
		{"afmoe", "ab1234 5", []string{"ab", "1", "234", " ", "5"}},
		{"afmoe", "x12345", []string{"x", "12", "345"}},
		{"kimi-k2", "中文abc", []string{"中文", "abc"}},
		{"chameleon", "a  b\t1.", []string{"a", "  ", "b", "\t", "1", "."}},
		{"jais-2", "a     b", []string{"a", "    ", " b"}},
		{"exaone-moe", "New York City!", []string{"New York City", "!"}},
		{"laguna", "a\n\nb", []string{"a", "\n\n", "b"}},
		{"minicpm5", "12345", []string{"123", "45"}},
		// Contractions, emoji, CJK and whitespace runs across the chains.
		{"deepseek-v3", "I'm 🦙 here!!", []string{"I", "'m", " 🦙", " here", "!!"}},
		{"kimi-k2", "中文I'M here", []string{"中文", "I'M", " here"}},
		{"qwen35", "naïve 42", []string{"naïve", " ", "4", "2"}},
		{"bailingmoe", "it's\n\nok", []string{"it", "'s", "\n\n", "ok"}},
		{"seed-coder", "x=1;\r\n", []string{"x", "=", "1", ";", "\r\n"}},
		{"youtu", "한국어，中文 Hi", []string{"한국어", "，", "中文", " Hi"}},
		{"spark2_5", "abc12345", []string{"abc", "1", "2", "3", "4", "5"}},
		{"ufakzeka", "Ankara'da 3", []string{"Ankara", "'da", " ", "3"}},
		{"exaone-moe", "I'll go 😀", []string{"I", "'ll", " go", " 😀"}},
		{"jais-2", "a         b", []string{"a", "        ", " b"}},
		// The default chain isolates punctuation first: no contractions.
		{"default", "🦙 don't  stop", []string{"🦙", " don", "'", "t", " ", " stop"}},
		// DeepSeek LLM's punctuation stage takes ASCII letters (":-~"), so a
		// Greek letter and the ASCII after it part.
		{"deepseek-llm", "Ωmega 你好!  ", []string{"Ω", "mega", " ", "你好", "!", "  "}},
		{"bloom", "a…b。c", []string{"a", "…", "b", "。", "c"}},
		{"tekken", "😀😀 ABCdef", []string{"😀😀", " ABCdef"}},
		{"starcoder", "I'm 25\t\tx", []string{"I", "'m", " ", "2", "5", "\t", "\t", "x"}},
		{"falcon", "$100+<=>", []string{"$", "100", "+<=>"}},
	}
	for _, c := range cases {
		p, err := lookupPre(c.pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := splitFamily(p, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.pre, c.in, got, c.want)
		}
	}
}

// TestFamilyStages: every pattern of the table compiles and every stage
// applies exactly one mechanism.
func TestFamilyStages(t *testing.T) {
	for name, p := range preTokenizers {
		if err := p.compile(); err != nil {
			t.Errorf("%q: %v", name, err)
		}
		if (p.scan == nil) == (len(p.stages) == 0) {
			t.Errorf("%q: want a scanner or stages", name)
		}
		for i, s := range p.stages {
			n := 0
			for _, set := range []bool{s.scan != nil, s.cut != nil, s.re != nil} {
				if set {
					n++
				}
			}
			if n != 1 || s.pattern == "" {
				t.Errorf("%q stage %d: %d mechanisms, pattern %q", name, i, n, s.pattern)
			}
		}
	}
}

// TestDeepseekLetters: the escaped DeepSeek letter class holds cased
// letters only (a slip in a range would let in other characters).
func TestDeepseekLetters(t *testing.T) {
	c, err := compileRegex("[" + dsLetters + "]")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !c.classes[0].has(r) {
			continue
		}
		n++
		if !unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt) {
			t.Errorf("U+%04X %q is in the class but not a cased letter", r, r)
		}
	}
	if n < 1500 {
		t.Errorf("class holds %d characters", n)
	}
}

func TestUnknownPre(t *testing.T) {
	_, err := lookupPre("no-such-pre")
	if err == nil || strings.Count(err.Error(), "\n") != 0 || !strings.Contains(err.Error(), " gpt-2,") || !strings.Contains(err.Error(), " deepseek-llm,") {
		t.Errorf("unknown pre: %v", err)
	}
	_, err = lookupPre("gemma4")
	if err == nil || !strings.Contains(err.Error(), "raw UTF-8") {
		t.Errorf("gemma4: %v", err)
	}
	v := &Vocab{Model: "gpt2", Pre: "no-such-pre", Tokens: []string{"a"}, BOS: -1, EOS: -1, EOT: -1, PAD: -1, UNK: -1}
	if _, err := New(v); err == nil || !strings.Contains(err.Error(), "no-such-pre") {
		t.Errorf("New with an unknown pre: %v", err)
	}
}

func TestCanonicalPre(t *testing.T) {
	for in, want := range map[string]string{"gpt2": "gpt-2", "o200k": "gpt-4o", "gpt-2": "gpt-2", "llama-bpe": "llama-bpe", "qwen2": "qwen2"} {
		if got := CanonicalPre(in); got != want {
			t.Errorf("CanonicalPre(%q) = %q, want %q", in, got, want)
		}
		if _, ok := preTokenizers[CanonicalPre(in)]; !ok {
			t.Errorf("%q is not readable", CanonicalPre(in))
		}
	}
}

// familyNames lists the table's names in a fixed order for fuzzing.
func familyNames() []string {
	names := make([]string, 0, len(preTokenizers))
	for k := range preTokenizers {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// FuzzPreTokenize: every family cuts any bytes, valid UTF-8 or not, into
// non-empty pieces that tile the text, without panicking.
func FuzzPreTokenize(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i*7), []byte(s))
	}
	f.Add(uint8(3), []byte("3333 12345\xff678 ٣٣٣٣ x"))
	f.Add(uint8(40), []byte("中文\xe4\xb8 abc\n\n  \x80"))
	names := familyNames()
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		name := names[int(which)%len(names)]
		p, err := lookupPre(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		pos := 0
		for _, piece := range splitFamily(p, s) {
			if piece == "" || !strings.HasPrefix(s[pos:], piece) {
				t.Fatalf("%s %q: pieces %q do not tile the text", name, s, splitFamily(p, s))
			}
			pos += len(piece)
		}
		if pos != len(s) {
			t.Fatalf("%s %q: pieces cover %d of %d bytes", name, s, pos, len(s))
		}
		// Through Encode with a vocabulary of the 256 byte tokens and two
		// merges: the text (repaired, normalized) comes back whole.
		tk := byteVocab(t, name)
		want := toValidUTF8(s)
		if tk.nfc {
			want = norm.NFC.String(want)
		}
		if got := tk.Decode(tk.Encode(s)); got != want {
			t.Fatalf("%s: Decode(Encode(%q)) = %q, want %q", name, s, got, want)
		}
	})
}

var byteVocabs sync.Map

// byteVocab is a byte-level vocabulary with pre-tokenizer pre: every byte
// and the merges "Ġ t" and "Ġt h".
func byteVocab(t testing.TB, pre string) *Tokenizer {
	if tk, ok := byteVocabs.Load(pre); ok {
		return tk.(*Tokenizer)
	}
	v := &Vocab{Model: "gpt2", Pre: pre, BOS: -1, EOS: -1, EOT: -1, PAD: -1, UNK: -1}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, string(ByteRune(byte(b))))
	}
	v.Tokens = append(v.Tokens, "Ġt", "Ġth")
	v.Merges = []string{"Ġ t", "Ġt h"}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	byteVocabs.Store(pre, tk)
	return tk
}
