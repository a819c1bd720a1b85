package sample

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// runStop feeds pieces and returns what was released, including Flush when
// no stop string completed, and whether one did.
func runStop(stops []string, pieces []string) (string, bool) {
	m := NewStopMatcher(stops)
	var out strings.Builder
	for _, p := range pieces {
		emit, stopped := m.Push(p)
		out.WriteString(emit)
		if stopped {
			if e, s := m.Push("more"); e != "" || !s {
				panic("Push after a stop released text")
			}
			if m.Flush() != "" {
				panic("Flush after a stop released text")
			}
			return out.String(), true
		}
	}
	out.WriteString(m.Flush())
	return out.String(), false
}

// firstStop is the reference: the text before the stop string occurrence
// that ends first (then starts first).
func firstStop(text string, stops []string) (string, bool) {
	end, start := -1, -1
	for _, s := range stops {
		if s == "" {
			continue
		}
		if i := strings.Index(text, s); i >= 0 {
			if e := i + len(s); end < 0 || e < end || (e == end && i < start) {
				end, start = e, i
			}
		}
	}
	if end < 0 {
		return text, false
	}
	return text[:start], true
}

func TestStopMatcher(t *testing.T) {
	cases := []struct {
		name    string
		stops   []string
		pieces  []string
		want    string
		stopped bool
	}{
		{"no stops", nil, []string{"hello", " world"}, "hello world", false},
		{"whole piece", []string{"END"}, []string{"abc", "END", "x"}, "abc", true},
		{"split across pieces", []string{"</s>"}, []string{"one <", "/", "s", "> two"}, "one ", true},
		{"split into bytes", []string{"stop"}, []string{"a", "s", "t", "o", "p", "b"}, "a", true},
		{"partial that fails", []string{"</s>"}, []string{"a </", "b> c"}, "a </b> c", false},
		{"partial at the end", []string{"</s>"}, []string{"a </"}, "a </", false},
		{"restart inside a partial", []string{"aab"}, []string{"a", "a", "a", "b", "!"}, "a", true},
		{"at the very start", []string{"Q:"}, []string{"Q:", " next"}, "", true},
		{"first of several", []string{"\n\n", "User:", "###"}, []string{"answer ###", "\n\n"}, "answer ", true},
		{"earliest end wins", []string{"abcd", "bc"}, []string{"xab", "cd"}, "xa", true},
		{"same end, earlier start wins", []string{"bc", "abc"}, []string{"xabc"}, "x", true},
		{"inside one piece", []string{"stop"}, []string{"go stop go"}, "go ", true},
		{"multibyte stop", []string{"。\n"}, []string{"你好", "。", "\n世界"}, "你好", true},
		{"multibyte partial", []string{"你好吗"}, []string{"说你好", "呀"}, "说你好呀", false},
		{"stop split inside a character", []string{"é!"}, []string{"caf\xc3", "\xa9", "!"}, "caf", true},
		{"emoji split in bytes", nil, []string{"\xf0\x9f", "\x98", "\x80 ok"}, "😀 ok", false},
		{"invalid bytes pass", nil, []string{"\xff\xfe", "a"}, "\xff\xfea", false},
		{"truncated character at the end", nil, []string{"ab\xe2\x82"}, "ab\xe2\x82", false},
		{"empty stop string ignored", []string{""}, []string{"abc"}, "abc", false},
		{"empty pieces", []string{"xy"}, []string{"", "x", "", "y"}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, stopped := runStop(c.stops, c.pieces)
			if got != c.want || stopped != c.stopped {
				t.Errorf("got %q, %v; want %q, %v", got, stopped, c.want, c.stopped)
			}
			ref, refStopped := firstStop(strings.Join(c.pieces, ""), c.stops)
			if ref != c.want || refStopped != c.stopped {
				t.Errorf("reference gives %q, %v: the case is wrong", ref, refStopped)
			}
		})
	}
}

// TestStopMatcherReleasesEarly: text that cannot start a stop string is not
// held.
func TestStopMatcherReleasesEarly(t *testing.T) {
	m := NewStopMatcher([]string{"</s>", "\n\nUser"})
	for _, c := range []struct{ piece, emit string }{
		{"Hello", "Hello"},
		{" wor", " wor"},
		{"ld\n", "ld"},
		{"\nUs", ""},
		{"a", "\n\nUsa"},
		{"<", ""},
		{"/", ""},
		{"x", "</x"},
		{"é", "é"},
		{"\xe2\x82", ""}, // half a €
		{"\xac", "€"},
	} {
		if emit, stopped := m.Push(c.piece); emit != c.emit || stopped {
			t.Fatalf("Push(%q) = %q, %v; want %q", c.piece, emit, stopped, c.emit)
		}
	}
	if m.Stopped() || m.Matched() != "" {
		t.Error("no stop string completed")
	}
	m.Push("</")
	if emit, stopped := m.Push("s>tail"); emit != "" || !stopped || m.Matched() != "</s>" {
		t.Errorf("stop: %q, %v, matched %q", emit, stopped, m.Matched())
	}
}

// FuzzStopMatcher: whatever the pieces, the released text is the input up
// to the first stop string, and is valid UTF-8 piece by piece when the
// input is.
func FuzzStopMatcher(f *testing.F) {
	f.Add("hello </s> world", "</s>", "\n\n", []byte{3, 1, 4, 1, 5})
	f.Add("aaab", "aab", "b", []byte{1, 1, 1, 1})
	f.Add("你好。\n世界", "。\n", "界", []byte{2, 1, 3})
	f.Add("\xf0\x9f\x98\x80x", "x", "", []byte{1, 1, 1, 1, 1})
	f.Add("abcd", "abcd", "bc", []byte{2, 2})
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, cuts []byte) {
		stops := []string{stop1, stop2}
		var pieces []string
		rest := text
		for _, c := range cuts {
			n := min(int(c)%8, len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		pieces = append(pieces, rest)

		want, wantStopped := firstStop(text, stops)
		m := NewStopMatcher(stops)
		var got strings.Builder
		stopped := false
		valid := utf8.ValidString(text) && utf8.ValidString(stop1) && utf8.ValidString(stop2)
		for _, p := range pieces {
			emit, s := m.Push(p)
			if valid && !utf8.ValidString(emit) {
				t.Fatalf("released invalid UTF-8 %q", emit)
			}
			got.WriteString(emit)
			if s {
				stopped = true
				break
			}
			if !strings.HasPrefix(want, got.String()) {
				t.Fatalf("released %q, beyond %q", got.String(), want)
			}
		}
		if !stopped {
			got.WriteString(m.Flush())
		}
		if got.String() != want || stopped != wantStopped {
			t.Fatalf("text %q, stops %q, pieces %q: got %q, %v; want %q, %v", text, stops, pieces, got.String(), stopped, want, wantStopped)
		}
	})
}
