package ollama

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	long := strings.Repeat("m", MaxPartLength)
	for _, c := range []struct {
		in, full, short, scheme string
	}{
		{"llama3.2", "registry.ollama.ai/library/llama3.2:latest", "llama3.2:latest", ""},
		{"llama3.2:1b", "registry.ollama.ai/library/llama3.2:1b", "llama3.2:1b", ""},
		{"qwen2.5:0.5b-instruct-q4_K_M", "registry.ollama.ai/library/qwen2.5:0.5b-instruct-q4_K_M", "qwen2.5:0.5b-instruct-q4_K_M", ""},
		{"library/mistral", "registry.ollama.ai/library/mistral:latest", "mistral:latest", ""},
		{"jmorganca/tinyllama:v1", "registry.ollama.ai/jmorganca/tinyllama:v1", "jmorganca/tinyllama:v1", ""},
		{"example.com/ns/model:tag", "example.com/ns/model:tag", "example.com/ns/model:tag", ""},
		{"localhost:5000/ns/model", "localhost:5000/ns/model:latest", "localhost:5000/ns/model:latest", ""},
		{"http://127.0.0.1:8080/team/m:v2", "127.0.0.1:8080/team/m:v2", "127.0.0.1:8080/team/m:v2", "http"},
		{"https://registry.ollama.ai/library/phi3", "registry.ollama.ai/library/phi3:latest", "phi3:latest", "https"},
		{"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", ""},
		// The default host and namespace are recognised whatever their case.
		{"Registry.Ollama.AI/Library/Mistral:Latest", "Registry.Ollama.AI/Library/Mistral:Latest", "Mistral:Latest", ""},
		{"_under_score", "registry.ollama.ai/library/_under_score:latest", "_under_score:latest", ""},
		{long + ":" + strings.Repeat("t", MaxPartLength), "registry.ollama.ai/library/" + long + ":" + strings.Repeat("t", MaxPartLength), long + ":" + strings.Repeat("t", MaxPartLength), ""},
	} {
		n, err := ParseName(c.in)
		if err != nil {
			t.Errorf("ParseName(%q): %v", c.in, err)
			continue
		}
		if got := n.String(); got != c.full {
			t.Errorf("ParseName(%q).String() = %q, want %q", c.in, got, c.full)
		}
		if got := n.DisplayShort(); got != c.short {
			t.Errorf("ParseName(%q).DisplayShort() = %q, want %q", c.in, got, c.short)
		}
		if n.Scheme != c.scheme {
			t.Errorf("ParseName(%q).Scheme = %q, want %q", c.in, n.Scheme, c.scheme)
		}
	}
}

func TestParseNameErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{":", "empty tag"},
		{"model:", "empty tag"},
		{":tag", "model is empty"},
		{"ns/", "model is empty"},
		{"/model", "namespace is empty"},
		{"a//b", "namespace is empty"},
		{"a/b/c/d", "4 '/'-separated parts"},
		{"../../etc/passwd", "4 '/'-separated parts"},
		{"h/../etc", "namespace starts with '.'"},
		{"../x", "namespace starts with '.'"},
		{"ns/..", "model starts with '.'"},
		{"m:..", "tag starts with '.'"},
		{".hidden", "model starts with '.'"},
		{`..\..\x`, "model starts with '.'"},
		{`a\b`, `model has '\\' at byte 1`},
		{"a b", "model has ' ' at byte 1"},
		{"model@sha256:abc", "model has '@' at byte 5"},
		{"model:t@x", "tag has '@' at byte 1"},
		{"ns.dot/model", "namespace has '.' at byte 2"},
		{"ns/m:t:x", "model has ':' at byte 1"},
		{"m\x00", `model has '\x00' at byte 1`},
		{"m\nrm -rf", `model has '\n' at byte 1`},
		{"ftp://h/n/m", `scheme "ftp"`},
		{"http://model", "http:// needs a host"},
		{"-dash", "model starts with '-'"},
		{strings.Repeat("m", MaxPartLength+1), "model is 81 bytes long, the limit is 80"},
		{"m:" + strings.Repeat("t", MaxPartLength+1), "tag is 81 bytes long"},
		{strings.Repeat("h", MaxHostLength+1) + "/n/m", "host is 351 bytes long, the limit is 350"},
		{"h/n/" + strings.Repeat("é", 3), "model starts with non-ASCII byte 0xc3"},
	} {
		_, err := ParseName(c.in)
		if err == nil {
			t.Errorf("ParseName(%q) succeeded, want an error containing %q", c.in, c.want)
			continue
		}
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ParseName(%q): %v does not wrap ErrInvalidName", c.in, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseName(%q) = %q, want it to contain %q", c.in, err, c.want)
		}
		checkOneLine(t, err)
	}
}

// checkOneLine fails unless err is one non-empty line, as every error
// this package returns must be.
func checkOneLine(t *testing.T, err error) {
	t.Helper()
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || msg == "" {
		t.Errorf("error is not one line: %q", msg)
	}
}

// checkName holds a parsed name to what the store relies on.
func checkName(t *testing.T, in string, n Name) {
	t.Helper()
	for _, p := range []string{n.Host, n.Namespace, n.Model, n.Tag} {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, `/\`) {
			t.Fatalf("ParseName(%q) gave part %q", in, p)
		}
	}
	rel := n.relPath()
	if !filepath.IsLocal(rel) || len(strings.Split(rel, string(filepath.Separator))) != 4 {
		t.Fatalf("ParseName(%q): manifest path %q is not four parts inside the store", in, rel)
	}
	again, err := ParseName(n.String())
	if err != nil {
		t.Fatalf("ParseName(%q).String() = %q does not parse: %v", in, n.String(), err)
	}
	if n.Scheme = ""; again != n {
		t.Fatalf("ParseName(%q) = %+v, but its String parses as %+v", in, n, again)
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{
		"llama3.2", "llama3.2:1b", "ns/model:tag", "example.com:5000/ns/model:v1",
		"http://127.0.0.1:1/a/b:c", "hf.co/user/Repo-GGUF:Q4_K_M", "../x", "a/b/c/d",
		"m:", ":t", "https://", "x:y:z", "a..b/c", "_/_/_:_",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("ParseName(%q): %v does not wrap ErrInvalidName", s, err)
			}
			checkOneLine(t, err)
			return
		}
		checkName(t, s, n)
	})
}
