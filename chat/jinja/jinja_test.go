package jinja

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// snippetVars are the variables HuggingFace's environment adds, with the
// snippets' fixed clock.
func snippetVars() map[string]any {
	now := time.Date(2026, 11, 24, 15, 4, 5, 0, time.UTC)
	return map[string]any{
		"raise_exception": RaiseException(),
		"strftime_now":    StrftimeNow(func() time.Time { return now }),
	}
}

// Every snippet renders as jinja2 renders it in HuggingFace's environment
// (tools/render_templates.py --snippets), byte for byte; where jinja2
// raises, the engine raises the same exception.
func TestSnippets(t *testing.T) {
	var src struct {
		Snippets []struct {
			Name     string          `json:"name"`
			Template string          `json:"template"`
			Vars     json.RawMessage `json:"vars"`
		} `json:"snippets"`
	}
	var golden struct {
		Cases []struct {
			Name   string  `json:"name"`
			Output *string `json:"output"`
			Error  string  `json:"error"`
		} `json:"cases"`
	}
	for path, dst := range map[string]any{"testdata/snippets.json": &src, "testdata/snippets.golden.json": &golden} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if len(src.Snippets) != len(golden.Cases) {
		t.Fatalf("%d snippets, %d golden renderings: run tools/render_templates.py --snippets", len(src.Snippets), len(golden.Cases))
	}
	for i, sn := range src.Snippets {
		want := golden.Cases[i]
		if want.Name != sn.Name {
			t.Fatalf("golden case %d is %q, snippet %q: regenerate", i, want.Name, sn.Name)
		}
		t.Run(sn.Name, func(t *testing.T) {
			vars := snippetVars()
			if len(sn.Vars) > 0 {
				v, err := FromJSON(sn.Vars)
				if err != nil {
					t.Fatal(err)
				}
				d := v.(*Dict)
				for i, k := range d.keys {
					vars[k.(string)] = d.vals[i]
				}
			}
			got, err := render(sn.Template, vars)
			if want.Output != nil {
				if err != nil {
					t.Fatalf("%v\nwant %q", err, *want.Output)
				}
				if got != *want.Output {
					t.Fatalf("\n got %q\nwant %q", got, *want.Output)
				}
				return
			}
			kind, msg, _ := strings.Cut(want.Error, ": ")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %q, %v; jinja2 raised %s", got, err, want.Error)
			}
			if e.Kind != kind {
				t.Fatalf("%v; jinja2 raised %s", err, want.Error)
			}
			if kind == "TemplateError" && e.Msg != msg {
				t.Fatalf("message %q, jinja2's %q", e.Msg, msg)
			}
		})
	}
}

func render(src string, vars map[string]any) (string, error) {
	tm, err := Parse(src)
	if err != nil {
		return "", err
	}
	return tm.Render(vars)
}

// Errors carry the line they happened on and read as one line.
func TestErrorLines(t *testing.T) {
	cases := []struct {
		src  string
		line int
		kind string
	}{
		{"a\nb\n{{ 1 + }}", 3, "TemplateSyntaxError"},
		{"{% if x %}\n\n{% endfor %}", 3, "TemplateSyntaxError"},
		{"{% for m in messages %}\n{{ m + 1 }}\n{% endfor %}", 2, "TypeError"},
		{"x\n\n\n{{ raise_exception('no') }}", 4, "TemplateError"},
		{"{#\n\n#}{{ y.z }}", 3, "UndefinedError"},
	}
	for _, c := range cases {
		tm, err := Parse(c.src)
		if err == nil {
			_, err = tm.Render(map[string]any{"messages": []any{"a"}, "raise_exception": snippetVars()["raise_exception"]})
		}
		var e *Error
		if !errors.As(err, &e) || e.Line != c.line || e.Kind != c.kind {
			t.Errorf("%q: %v, want %s on line %d", c.src, err, c.kind, c.line)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "line "+strconv.Itoa(c.line)+": "+c.kind) {
			t.Errorf("%q: message %q", c.src, msg)
		}
	}
}

// Hostile templates end with an error, not a hung or crashed process.
func TestLimits(t *testing.T) {
	cases := map[string]string{
		"deep nesting":     "{{ " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + " }}",
		"deep blocks":      strings.Repeat("{% if true %}", 500) + strings.Repeat("{% endif %}", 500),
		"unary chain":      "{{ " + strings.Repeat("- ", 5000) + "1 }}",
		"macro recursion":  "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"huge string":      "{{ 'x' * 100000000000 }}",
		"growing string":   "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
		"huge range":       "{{ range(10**9)|length }}",
		"huge power":       "{{ 10 ** 100 }}",
		"minus one power":  "{{ (-1) ** 1000000000000000000 }}",
		"huge output":      "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}",
		"huge indent":      "{{ 'a\\nb'|indent(10**12) }}",
		"huge center":      "{{ 'a'.center(10**12) }}",
		"huge format":      "{{ '%100000000000d' % 1 }}",
		"huge dot format":  "{{ '{:100000000000}'.format(1) }}",
		"deep json input":  "{{ x|tojson }}",
		"break at the top": "{% break %}",
	}
	deep := FromJSONDepthBomb()
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := render(src, map[string]any{"x": deep})
				done <- err
			}()
			select {
			case err := <-done:
				if name == "minus one power" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				if err == nil {
					t.Fatal("no error")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("did not finish")
			}
		})
	}
}

// FromJSONDepthBomb is a value nested deeper than tojson writes.
func FromJSONDepthBomb() any {
	var v any = int64(1)
	for range maxJSONDepth + 10 {
		v = newList([]any{v})
	}
	return v
}

func TestFromJSON(t *testing.T) {
	v, err := FromJSON([]byte(`{"b": 1, "a": [1.0, 2, 1e2, -0, 12345678901234567890, "é", null, true], "b": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := pyRepr(v); got != `{'b': 3, 'a': [1.0, 2, 100.0, 0, 1.2345678901234567e+19, 'é', None, True]}` {
		t.Errorf("repr %s", got)
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a":1} x`, `{"a" 1}`, strings.Repeat("[", 300) + strings.Repeat("]", 300)} {
		if _, err := FromJSON([]byte(bad)); err == nil {
			t.Errorf("FromJSON(%.20q) accepted", bad)
		}
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2024, 1, 7, 9, 5, 3, 120000000, time.UTC) // a Sunday
	cases := map[string]string{
		"%d %b %Y":       "07 Jan 2024",
		"%-d %B":         "7 January",
		"%e|%k|%l|%P":    " 7| 9| 9|am",
		"%j %U %W %u %w": "007 01 01 7 0", // Python on glibc
		"%F %T %f":       "2024-01-07 09:05:03 120000",
		"%c":             "Sun Jan  7 09:05:03 2024",
		"%G-W%V %g":      "2024-W01 24",
		"%Q %%":          "%Q %",
		"%^a %_m":        "SUN  1",
		"%z%Z|":          "|",
	}
	for f, want := range cases {
		if got := Strftime(at, f); got != want {
			t.Errorf("Strftime(%q) = %q, want %q", f, got, want)
		}
	}
}

func FuzzRender(f *testing.F) {
	var src struct {
		Snippets []struct {
			Template string `json:"template"`
		} `json:"snippets"`
	}
	raw, err := os.ReadFile("testdata/snippets.json")
	if err != nil {
		f.Fatal(err)
	}
	json.Unmarshal(raw, &src)
	for _, sn := range src.Snippets {
		f.Add(sn.Template)
	}
	vars, _ := FromJSON([]byte(`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}], "x": [1, 2], "d": {"k": "v"}}`))
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := Parse(s)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("parse error of type %T: %v", err, err)
			}
			return
		}
		v := snippetVars()
		d := vars.(*Dict)
		for i, k := range d.keys {
			v[k.(string)] = d.vals[i]
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err = tm.Render(v)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%q did not finish", s)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("render error of type %T: %v", err, err)
			}
			if e.Kind == "InternalError" {
				t.Fatalf("%q: %v", s, err)
			}
		}
	})
}

// A parsed template renders from many goroutines at once (the server's
// requests share the model's template).
func TestConcurrentRender(t *testing.T) {
	tm, err := Parse("{% macro m(x) %}{{ x|upper }}{{ x.title() }}{{ x|lower }}{% endmacro %}{% set ns = namespace(n=0) %}{% for i in range(50) %}{% set ns.n = ns.n + i %}{{ m('ßa b') }}{% endfor %}{{ ns.n }}")
	if err != nil {
		t.Fatal(err)
	}
	want, err := tm.Render(nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 20 {
				got, err := tm.Render(nil)
				if err == nil && got != want {
					err = errors.New("renderings differ")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCorpus renders the random templates of tools/jinja_corpus.py
// (whitespace control, expressions over Python values, statements over a
// conversation) and holds each to jinja2's rendering: the same text, or
// the same exception.
func TestCorpus(t *testing.T) {
	f, err := os.Open("testdata/corpus.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vars  map[string]json.RawMessage `json:"vars"`
		Cases []struct {
			Kind     string  `json:"kind"`
			Template string  `json:"template"`
			Output   *string `json:"output"`
			Error    string  `json:"error"`
		} `json:"cases"`
	}
	if err := json.NewDecoder(z).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	varsOf := func(kind string) map[string]any {
		vars := snippetVars()
		v, err := FromJSON(doc.Vars[kind])
		if err != nil {
			t.Fatal(err)
		}
		d := v.(*Dict)
		for i, k := range d.keys {
			vars[k.(string)] = d.vals[i]
		}
		return vars
	}
	bad, checked := 0, 0
	for _, c := range doc.Cases {
		// Python prints a generator with its address: no rendering matches that.
		if out := strings.ToLower(derefOr(c.Output)); c.Output != nil && (strings.Contains(out, " at 0x") || strings.Contains(out, "'a', 't', ' ', '0', 'x'")) {
			continue
		}
		checked++
		got, err := render(c.Template, varsOf(c.Kind)) // fresh values: nothing a render does may leak into the next
		var e *Error
		switch {
		case c.Output != nil && (err != nil || got != *c.Output):
			t.Errorf("%s %q:\n got %q %v\nwant %q", c.Kind, c.Template, got, err, *c.Output)
		case c.Output == nil && (!errors.As(err, &e) || e.Kind != c.Error):
			t.Errorf("%s %q: got %q %v, jinja2 raised %s", c.Kind, c.Template, got, err, c.Error)
		default:
			continue
		}
		if bad++; bad >= 20 {
			t.Fatal("too many differences")
		}
	}
	if checked < len(doc.Cases)*9/10 {
		t.Fatalf("only %d of %d cases checked", checked, len(doc.Cases))
	}
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
