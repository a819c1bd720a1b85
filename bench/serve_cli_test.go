package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
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

// svPrompts is estimated random prompts, for tests of the client.
func svPrompts(n, inputLen, outputLen int, seed int64) []ServeRequest {
	reqs, err := RandomPrompts(context.Background(), nil, n, inputLen, outputLen, seed)
	if err != nil {
		panic(err) // no tokenizer, nothing to fail
	}
	return reqs
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

// Random prompts: counted by the server's /tokenize when it has one, by
// --tokenizer, else estimated with one note; a new seed each run unless
// --seed, printed on stderr and stdout and kept in the result file.
func TestServeMainPrompts(t *testing.T) {
	seedRe := regexp.MustCompile(`seed (\d+) \(--seed (\d+) sends the same prompts again\)`)
	run := func(t *testing.T, h http.Handler, args ...string) (stderr, stdout string, seed int64, prompts []string) {
		t.Helper()
		fs := &svStream{}
		if ts, ok := h.(*tokenizeServer); ok {
			ts.next = fs
		} else {
			h = fs
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		res := filepath.Join(t.TempDir(), "r.json")
		code, out, errOut := svMain(t, append([]string{"--url", srv.URL, "--num-prompts", "4", "--output-len", "2", "--result-file", res}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		m := seedRe.FindStringSubmatch(errOut)
		if m == nil || m[1] != m[2] {
			t.Fatalf("no seed on stderr:\n%s", errOut)
		}
		seed, _ = strconv.ParseInt(m[1], 10, 64)
		if !regexp.MustCompile(fmt.Sprintf(`\nRandom seed: +%d *\n`, seed)).MatchString(out) {
			t.Errorf("the summary lacks seed %d:\n%s", seed, out)
		}
		b, _ := os.ReadFile(res)
		var v struct {
			Ringlm struct {
				Seed  int64  `json:"seed"`
				Count string `json:"input_len_counted_by"`
			} `json:"ringlm"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Ringlm.Seed != seed {
			t.Errorf("result file seed %d, printed %d (%v)", v.Ringlm.Seed, seed, err)
		}
		fs.arrived.Range(func(k, _ any) bool { prompts = append(prompts, k.(string)); return true })
		slices.Sort(prompts)
		return errOut + "counted by " + v.Ringlm.Count + "\n", out, seed, prompts
	}

	// An OpenAI server without /tokenize: an estimate, said in one note.
	errOut, _, seed1, p1 := run(t, nil, "--input-len", "8")
	if n := strings.Count(errOut, "note:"); n != 1 || !strings.Contains(errOut, "note: no tokenizer to count --input-len in the served model's tokens (POST /tokenize: HTTP 404: not found)") ||
		!strings.Contains(errOut, "--tokenizer FILE.gguf") || !strings.Contains(errOut, "prompts: about 8 tokens each (estimated)") ||
		!strings.Contains(errOut, "counted by estimate") {
		t.Errorf("fallback: %d notes:\n%s", n, errOut)
	}
	// No --seed: another seed, other prompts.
	_, _, seed2, p2 := run(t, nil, "--input-len", "8")
	if seed1 == seed2 || slices.Equal(p1, p2) || len(p1) != 4 {
		t.Errorf("two runs without --seed: seeds %d and %d, prompts equal %v", seed1, seed2, slices.Equal(p1, p2))
	}
	// --seed repeats a run.
	_, _, seed3, p3 := run(t, nil, "--input-len", "8", "--seed", strconv.FormatInt(seed1, 10))
	if seed3 != seed1 || !slices.Equal(p3, p1) {
		t.Errorf("--seed %d: seed %d, same prompts %v", seed1, seed3, slices.Equal(p3, p1))
	}

	// A server with /tokenize: exact, no note.
	tiny := tinyTokenizer(t)
	errOut, _, _, p4 := run(t, &tokenizeServer{tk: tiny}, "--input-len", "12", "--seed", "5")
	if strings.Contains(errOut, "note:") || !strings.Contains(errOut, "prompts: exactly 12 tokens each, counted by the server's /tokenize; 2 output tokens; seed 5") ||
		!strings.Contains(errOut, "counted by the server's /tokenize\n") {
		t.Errorf("server tokenizer:\n%s", errOut)
	}
	for _, p := range p4 {
		if n := serverCount(tiny, p); n != 12 {
			t.Errorf("prompt of %d tokens: %q", n, p)
		}
	}
	// --tokenizer: the file counts, the same prompts as the server's.
	file := testmodel.Path(t, "llama", gguf.TypeF16)
	errOut, _, _, p5 := run(t, nil, "--input-len", "12", "--seed", "5", "--tokenizer", file)
	if strings.Contains(errOut, "note:") || !strings.Contains(errOut, "exactly 12 tokens each, counted by "+file+";") ||
		!slices.Equal(p5, p4) {
		t.Errorf("--tokenizer:\n%s\nsame prompts as /tokenize: %v", errOut, slices.Equal(p5, p4))
	}

	// Bad --tokenizer: exit 1 naming it; with --dataset: exit 2.
	if code, _, errOut := svMain(t, "--url", "http://127.0.0.1:1", "--tokenizer", "/nonexistent.gguf", "--model", "m"); code != 1 ||
		!strings.Contains(errOut, "--tokenizer: ") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("missing --tokenizer file: %d %q", code, errOut)
	}
	if code, _, errOut := svMain(t, "--url", "http://127.0.0.1:1", "--tokenizer", file, "--dataset", "d.jsonl"); code != 2 || !strings.Contains(errOut, "--tokenizer counts random prompts") {
		t.Errorf("--tokenizer with --dataset: %d %q", code, errOut)
	}
}

// ^C while the prompts are being made: exit 130, nothing sent.
func TestServeMainInterruptedPrompts(t *testing.T) {
	fs := &svStream{}
	srv := httptest.NewServer(&tokenizeServer{tk: tinyTokenizer(t), next: fs})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	code := serveMain(ctx, nil, []string{"--url", srv.URL, "--model", "m", "--tokenizer", testmodel.Path(t, "llama", gguf.TypeF16),
		"--num-prompts", "50", "--input-len", "64"}, &o, &e)
	if code != 130 || !strings.Contains(e.String(), "interrupted while making the prompts") || fs.count.Load() != 0 {
		t.Errorf("exit %d, %d sent, stderr %q", code, fs.count.Load(), e.String())
	}
}
