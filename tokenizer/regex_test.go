package tokenizer

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func findFirst(t testing.TB, pattern, s string) []int {
	t.Helper()
	p, err := compileRegex(pattern)
	if err != nil {
		t.Fatalf("%q: %v", pattern, err)
	}
	var m reMatcher
	a, b, ok := m.find(p, s, 0, -1)
	if !ok {
		return nil
	}
	return []int{a, b}
}

// TestRegexConstructs: the engine on the constructs Go's regexp lacks or
// spells differently (look-ahead, Unicode \s \d \w \b, intersection), and
// on backtracking order.
func TestRegexConstructs(t *testing.T) {
	cases := []struct {
		pattern, in string
		want        []int // first match, nil for none
	}{
		{`\s+(?!\S)`, "a   b", []int{1, 3}},
		{`\s+(?!\S)`, "a   ", []int{1, 4}},
		{`\s+(?!\S)|\s+`, "a b", []int{1, 2}},
		{`(?=[\p{L}])[^a-z]`, "1aÉ", []int{2, 4}},
		{`\d{1,3}(?=(?:\d{3})*\b)`, "1234 ", []int{0, 1}},
		{`\d{1,3}(?=(?:\d{3})*\b)`, "1234x", nil},
		{`(?=(\d{3})+(?!\d))`, "1234", []int{1, 1}},
		{`\s`, "x\u3000", []int{1, 4}},
		{`\s`, "x\u200b", nil}, // ZWSP is not White_Space
		{`\d+`, "x٣٤", []int{1, 5}},
		{`\w+`, "¿niño_1?", []int{2, 9}},
		{`\bb`, "ab b", []int{3, 4}},
		{`\Bb`, "ab b", []int{1, 2}},
		{`[\p{L}&&[^\p{Han}]]+`, "中abc文", []int{3, 6}},
		{`[^\p{L}&&\p{Lu}]`, "Aa", []int{1, 2}},
		{`[]a]+`, "x]a]", []int{1, 4}},
		{`(?i:'s|'t)`, "IT'S", []int{2, 4}},
		{`(?i:'s)`, "'ſ", []int{0, 3}},
		{`a|ab`, "ab", []int{0, 1}},
		{`a*?b`, "aab", []int{0, 3}},
		{`a+?`, "aaa", []int{0, 1}},
		{`x$`, "xx", []int{1, 2}},
		{`^x`, "xx", []int{0, 1}},
		{`.+`, "ab\ncd", []int{0, 2}},
		{`\p{N}{2,}`, "1 22 333", []int{2, 4}},
		{`[\-\]\\]+`, `a-]\b`, []int{1, 4}},
		{`\P{L}+`, "ab12c", []int{2, 4}},
		{`\S\D\W`, "a1b c!", []int{1, 4}},
	}
	for _, c := range cases {
		got := findFirst(t, c.pattern, c.in)
		if len(got) != len(c.want) || len(got) == 2 && (got[0] != c.want[0] || got[1] != c.want[1]) {
			t.Errorf("%q in %q: got %v, want %v", c.pattern, c.in, got, c.want)
		}
	}
}

// TestRegexSplitEmptyMatches: empty matches cut the text and an empty
// match never repeats at the same position, as regex iterators proceed.
func TestRegexSplitEmptyMatches(t *testing.T) {
	for _, c := range []struct{ pattern, in, want string }{
		{`(?=(\d{3})+(?!\d))`, "1234567", "1|234|567"},
		{`x*`, "abxd", "a|b|x|d"},
		{`\b`, "ab cd", "ab| |cd"},
		{`a|`, "baa", "b|a|a"},
	} {
		p, err := compileRegex(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		var m reMatcher
		var parts []string
		for _, sp := range m.splitRegex(p, c.in, 0, nil) {
			parts = append(parts, c.in[sp.start:sp.end])
		}
		if got := strings.Join(parts, "|"); got != c.want {
			t.Errorf("%q on %q: %q, want %q", c.pattern, c.in, got, c.want)
		}
	}
}

func TestRegexErrors(t *testing.T) {
	for _, p := range []string{
		`(`, `)`, `[a`, `a{2`, `a{3,1}`, `*a`, `(?<n>a)`, `\p{Nope}`, `\q`, `(a*)*`, `a++`,
		`(?=a)*`, `\`, `[z-a]`, `a{1001}`, `\p{L`, "\xff", `((a{1000}){1000}){1000}`,
	} {
		if _, err := compileRegex(p); err == nil {
			t.Errorf("%q compiled", p)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: multi-line error %q", p, err)
		}
	}
}

// The memo keeps searches linear where plain backtracking is quadratic:
// \s+$ over a long run of spaces that does not end the text.
func TestRegexLinear(t *testing.T) {
	p, err := compileRegex(`\s+$`)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Repeat(" ", 1<<16) + "x"
	var m reMatcher
	if _, _, ok := m.find(p, s, 0, -1); ok {
		t.Fatal("matched")
	}
	// Each state is entered once: the memo holds at most one bit per
	// instruction and position.
	if m.cols > len(s)+1 {
		t.Fatalf("memo covers %d positions of %d", m.cols, len(s)+1)
	}
}

// goComparable reports whether a pattern means the same to Go's regexp as
// to this engine: no Unicode shorthands (Go's \s \d \w \b are ASCII), no
// look-ahead, no intersection, no POSIX classes, no folded properties.
func goComparable(p string) bool {
	for _, bad := range []string{`\s`, `\S`, `\d`, `\D`, `\w`, `\W`, `\b`, `\B`, "&&", "[:", `\0`, `\Q`, `\x`, `\z`, `\A`, `\C`} {
		if strings.Contains(p, bad) {
			return false
		}
	}
	if strings.Contains(p, "(?i") && (strings.Contains(p, `\p`) || strings.Contains(p, `\P`)) {
		return false
	}
	// A [ inside a class nests a class here (as Python's V1 sets) but is
	// a member in Go.
	in := false
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			if in {
				return false
			}
			in = true
			if i+1 < len(p) && p[i+1] == '^' {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++
			}
		case ']':
			in = false
		}
	}
	return true
}

// FuzzRegex: the engine never panics on any pattern and text, and where
// Go's regexp reads the pattern the same way, both find the same first
// match (both follow the leftmost-first, Perl-style preference).
func FuzzRegex(f *testing.F) {
	for _, s := range [][2]string{
		{`a|ab`, "xab"}, {`(a|ab)(c|bcd)`, "abcd"}, {`[\p{L}]+|\p{N}{1,3}`, "ab12345"},
		{`x*?y|x+`, "xxxy"}, {`(?i:'s|'t)`, "'S't"}, {`[^\r\n\p{L}\p{N}]?\p{L}+`, "(ab"},
		{`(?:ab){2,3}`, "abababab"}, {`[a-c]{2}|.`, "cb"}, {`\p{Han}+`, "中文x"}, {`^a|b$`, "ab"},
		{`\s+(?!\S)`, "a  b"}, {`[]a]`, "]"}, {"[\xff]", "\xff"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		p, err := compileRegex(pattern)
		if err != nil {
			return
		}
		var m reMatcher
		a, b, ok := m.find(p, text, 0, -1)
		if ok && (a < 0 || b < a || b > len(text)) {
			t.Fatalf("%q in %q: match [%d,%d)", pattern, text, a, b)
		}
		pos := 0
		for _, sp := range m.splitRegex(p, text, 0, nil) {
			if sp.start != pos || sp.end <= sp.start {
				t.Fatalf("%q in %q: pieces do not tile the text", pattern, text)
			}
			pos = sp.end
		}
		if pos != len(text) {
			t.Fatalf("%q in %q: pieces end at %d", pattern, text, pos)
		}
		if !utf8.ValidString(pattern) || !utf8.ValidString(text) || !goComparable(pattern) {
			return
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		want := re.FindStringIndex(text)
		if (want != nil) != ok || ok && (want[0] != a || want[1] != b) {
			t.Fatalf("%q in %q: got [%d,%d) %v, Go's regexp %v", pattern, text, a, b, ok, want)
		}
	})
}
