package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func svMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var o, e bytes.Buffer
	code := serveMain(context.Background(), nil, args, &o, &e)
	return code, o.String(), e.String()
}

// Bad flags: exit 2 with one clear line, never a panic.
func TestServeMainBadFlags(t *testing.T) {
	u := "http://127.0.0.1:1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--url is required"},
		{[]string{"--url", "ftp://x"}, "--url"},
		{[]string{"--url", "127.0.0.1:8080"}, "--url"},
		{[]string{"--url", u, "--endpoint", "/v1/embeddings"}, "--endpoint"},
		{[]string{"--url", u, "--rate", "0"}, "--rate"},
		{[]string{"--url", u, "--rate", "-2"}, "--rate"},
		{[]string{"--url", u, "--rate", "NaN"}, "--rate"},
		{[]string{"--url", u, "--rate", "fast"}, "invalid value"},
		{[]string{"--url", u, "--burstiness", "2"}, "give a --rate"},
		{[]string{"--url", u, "--rate", "4", "--burstiness", "0"}, "--burstiness"},
		{[]string{"--url", u, "--concurrency", "-1"}, "--concurrency"},
		{[]string{"--url", u, "--concurrency", "2", "--max-concurrency", "3"}, "not both"},
		{[]string{"--url", u, "--num-prompts", "0"}, "--num-prompts"},
		{[]string{"--url", u, "--input-len", "0"}, "--input-len"},
		{[]string{"--url", u, "--output-len", "-5"}, "--output-len"},
		{[]string{"--url", u, "--dataset", "x.jsonl", "--input-len", "5"}, "--input-len"},
		{[]string{"--url", u, "--percentiles", "50,101"}, "--percentiles"},
		{[]string{"--url", u, "--percentiles", "p99"}, "--percentiles"},
		{[]string{"--url", u, "--temperature", "-1"}, "--temperature"},
		{[]string{"--url", u, "--grace", "-1s"}, "--grace"},
		{[]string{"--url", u, "extra"}, "unexpected argument"},
		{[]string{"--url", u, "--nope"}, "not defined: -nope"},
	} {
		code, out, errOut := svMain(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" || strings.Contains(errOut, "goroutine") {
			t.Errorf("%q: exit %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
		if strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%q: more than one line: %q", c.args, errOut)
		}
	}
	if code, _, errOut := svMain(t, "-h"); code != 0 || !strings.Contains(errOut, "--concurrency N") || !strings.Contains(errOut, "-burstiness") {
		t.Errorf("-h: exit %d, %q", code, errOut)
	}
}

func TestEndpointURLs(t *testing.T) {
	for _, c := range []struct{ url, endpoint, want, base string }{
		{"http://h:8080", "/v1/completions", "http://h:8080/v1/completions", "http://h:8080"},
		{"http://h:8080/", "/v1/chat/completions", "http://h:8080/v1/chat/completions", "http://h:8080"},
		{"http://h:8080/v1", "/v1/completions", "http://h:8080/v1/completions", "http://h:8080"},
		{"https://h/proxy/v1/", "/v1/completions", "https://h/proxy/v1/completions", "https://h/proxy"},
		{"http://h/v1/chat/completions", "/v1/completions", "http://h/v1/chat/completions", "http://h"},
		{"http://h/v1/completions?x=1", "/v1/completions", "http://h/v1/completions", "http://h"},
	} {
		u, base, err := endpointURLs(c.url, c.endpoint)
		if err != nil || u.String() != c.want || base != c.base {
			t.Errorf("%s + %s: %v %q %v, want %q %q", c.url, c.endpoint, u, base, err, c.want, c.base)
		}
	}
}

// Dataset lines: prompt and optional output_len/max_tokens; a malformed
// line is an error naming it.
func TestParseServeDataset(t *testing.T) {
	good := "{\"prompt\":\"one two\",\"output_len\":7}\n\n{\"prompt\":\"x\",\"max_tokens\":3}\r\n{\"prompt\":\"abcdefghij\"}"
	reqs, err := parseServeDataset(strings.NewReader(good), "d.jsonl", 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 || reqs[0].MaxTokens != 7 || reqs[1].MaxTokens != 3 || reqs[2].MaxTokens != 9 ||
		reqs[0].Prompt != "one two" || reqs[2].InputLen != 3 {
		t.Errorf("parsed %+v", reqs)
	}
	for _, c := range []struct{ text, want string }{
		{"{\"prompt\":\"a\"}\n[1,2]\n", "d.jsonl:2: not a JSON object"},
		{"{\"prompt\":\"a\"}\n\n{\"prompt\": 5}\n", "d.jsonl:3: invalid JSON"},
		{"{\"prompt\":\"a\",}\n", "d.jsonl:1: invalid JSON"},
		{"{\"text\":\"a\"}\n", "d.jsonl:1: no \"prompt\" field"},
		{"{\"prompt\":\"\"}\n", "d.jsonl:1: \"prompt\" is empty"},
		{"{\"prompt\":\"a\",\"output_len\":0}\n", "d.jsonl:1: output length 0"},
		{"{\"prompt\":\"a\",\"output_len\":2,\"max_tokens\":3}\n", "d.jsonl:1: \"output_len\" and \"max_tokens\" disagree"},
		{"\n\n", "d.jsonl: no prompts"},
	} {
		if _, err := parseServeDataset(strings.NewReader(c.text), "d.jsonl", 9); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

// Random prompts: seeded, about L words, different from one another.
func TestRandomPrompts(t *testing.T) {
	a, b := RandomPrompts(20, 30, 5, 1), RandomPrompts(20, 30, 5, 1)
	seen := map[string]bool{}
	for i := range a {
		if a[i] != b[i] || len(strings.Fields(a[i].Prompt)) != 30 || a[i].InputLen != 30 || a[i].MaxTokens != 5 {
			t.Fatalf("prompt %d: %+v", i, a[i])
		}
		seen[a[i].Prompt] = true
	}
	if len(seen) != 20 || RandomPrompts(1, 30, 5, 2)[0] == a[0] {
		t.Errorf("prompts repeat: %d distinct", len(seen))
	}
}

// The whole command against a fake server: the model from /v1/models,
// a dataset, the summary on stdout and the result file.
func TestServeMainDataset(t *testing.T) {
	fs := &svStream{}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	dir := t.TempDir()
	ds := filepath.Join(dir, "d.jsonl")
	os.WriteFile(ds, []byte("{\"prompt\":\"a b c\",\"output_len\":2}\n{\"prompt\":\"d e\"}\n"), 0o644)
	res := filepath.Join(dir, "r.json")
	code, out, errOut := svMain(t, "--url", srv.URL, "--dataset", ds, "--num-prompts", "5", "--output-len", "3",
		"--rate", "1000", "--burstiness", "2", "--concurrency", "2", "--result-file", res, "--percentiles", "50,99.9")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "Successful requests:                     5") || !strings.Contains(out, "P99.9 TTFT (ms):") ||
		!strings.Contains(errOut, `model "fake-model"`) || !strings.Contains(errOut, "repeating them") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ModelID        string   `json:"model_id"`
		NumPrompts     int      `json:"num_prompts"`
		RequestRate    float64  `json:"request_rate"`
		Burstiness     float64  `json:"burstiness"`
		MaxConcurrency int      `json:"max_concurrency"`
		Completed      int      `json:"completed"`
		TotalOutput    int      `json:"total_output_tokens"`
		OutputLens     []int    `json:"output_lens"`
		P999           *float64 `json:"p99.9_e2el_ms"`
		P90            *float64 `json:"p90_e2el_ms"`
		Ringlm         struct {
			Dataset string `json:"dataset"`
		} `json:"ringlm"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	// Lines cycle: 2, 3 (default), 2, 3, 2 tokens.
	if v.ModelID != "fake-model" || v.NumPrompts != 5 || v.RequestRate != 1000 || v.Burstiness != 2 || v.MaxConcurrency != 2 ||
		v.Completed != 5 || v.TotalOutput != 12 || !svIntsEq(v.OutputLens, []int{2, 3, 2, 3, 2}) || v.P999 == nil || v.P90 == nil || v.Ringlm.Dataset != ds {
		t.Errorf("result file: %+v\n%s", v, b)
	}

	// A server nobody answers at: exit 1, one line.
	code, _, errOut = svMain(t, "--url", "http://127.0.0.1:1", "--num-prompts", "1")
	if code != 1 || !strings.Contains(errOut, "cannot reach the server") {
		t.Errorf("unreachable: %d %q", code, errOut)
	}
	// A malformed dataset: exit 1 naming the line.
	os.WriteFile(ds, []byte("{\"prompt\":\"a\"}\nnope\n"), 0o644)
	if code, _, errOut = svMain(t, "--url", srv.URL, "--dataset", ds); code != 1 || !strings.Contains(errOut, "d.jsonl:2:") {
		t.Errorf("bad dataset: %d %q", code, errOut)
	}
}
