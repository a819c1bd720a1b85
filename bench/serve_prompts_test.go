package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/models"
	"ringlm/tokenizer"
)

var builtin struct {
	once sync.Once
	tk   *tokenizer.Tokenizer
	err  error
}

// builtinTokenizer is the built-in model's tokenizer (gocoder: byte-level
// BPE, 4096 tokens, nothing added to a prompt).
func builtinTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	builtin.once.Do(func() {
		f, err := gguf.Parse(models.Default())
		if err != nil {
			builtin.err = err
			return
		}
		builtin.tk, builtin.err = tokenizer.Load(f)
	})
	if builtin.err != nil {
		t.Fatal(builtin.err)
	}
	return builtin.tk
}

// tinyTokenizer is the tiny test model's (512 tokens, BOS added).
func tinyTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	pt, err := LoadPromptTokenizer(testmodel.Path(t, "llama", gguf.TypeF16))
	if err != nil {
		t.Fatal(err)
	}
	return pt.(*localTokenizer).tk
}

// serverCount is a prompt's length as ringlm's /v1/completions counts it.
func serverCount(tk *tokenizer.Tokenizer, s string) int {
	return len(tk.EncodeWith(s, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: true}))
}

// Random prompts are exactly --input-len tokens of the model, as the
// server counts them (BOS included where it adds one), and differ from
// seed to seed.
func TestRandomPromptsExactTokens(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		tk      *tokenizer.Tokenizer
		special int
	}{
		{"gocoder", builtinTokenizer(t), 0},
		{"tiny", tinyTokenizer(t), 1},
	} {
		pt := NewLocalTokenizer(c.tk, c.name)
		if pt.Special() != c.special || pt.Source() != c.name {
			t.Fatalf("%s: special %d, source %q", c.name, pt.Special(), pt.Source())
		}
		for _, inputLen := range []int{2, 3, 17, 100, 384} {
			const n = 24
			a, err := RandomPrompts(ctx, pt, n, inputLen, 5, 1)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := RandomPrompts(ctx, pt, n, inputLen, 5, 1)
			d, _ := RandomPrompts(ctx, pt, n, inputLen, 5, 2)
			seen := map[string]bool{}
			for i := range a {
				if got := serverCount(c.tk, a[i].Prompt); got != inputLen || a[i].InputLen != inputLen || a[i].MaxTokens != 5 {
					t.Errorf("%s, input-len %d, prompt %d: %d tokens (InputLen %d): %q", c.name, inputLen, i, got, a[i].InputLen, a[i].Prompt)
				}
				if a[i] != b[i] {
					t.Errorf("%s, input-len %d, prompt %d: the same seed gave %q and %q", c.name, inputLen, i, a[i].Prompt, b[i].Prompt)
				}
				seen[a[i].Prompt] = true
			}
			same := 0
			for i := range a {
				if a[i].Prompt == d[i].Prompt {
					same++
				}
			}
			// Prompts of one or two tokens of text are a word or part
			// of one: a few may coincide.
			if inputLen-c.special > 2 && (len(seen) != n || same > 0) || same > n/2 {
				t.Errorf("%s, input-len %d: %d distinct prompts of %d; seeds 1 and 2 gave %d equal ones", c.name, inputLen, len(seen), n, same)
			}
		}
	}
	// No room for text beside BOS: the shortest prompt there is, said so
	// in InputLen.
	tiny := tinyTokenizer(t)
	one, err := RandomPrompts(ctx, NewLocalTokenizer(tiny, "tiny"), 3, 1, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range one {
		if got := serverCount(tiny, r.Prompt); got != 2 || r.InputLen != 2 {
			t.Errorf("input-len 1 with BOS: %d tokens, InputLen %d", got, r.InputLen)
		}
	}
}

// The context ends prompt building with its error.
func TestRandomPromptsCancelled(t *testing.T) {
	pt := NewLocalTokenizer(builtinTokenizer(t), "gocoder")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RandomPrompts(ctx, &slowTokenizer{pt}, 50, 64, 5, 1); err == nil {
		t.Error("no error from a cancelled context")
	}
}

// slowTokenizer fails once its context is done, as an HTTP one does.
type slowTokenizer struct{ PromptTokenizer }

func (s *slowTokenizer) Encode(ctx context.Context, text string) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.PromptTokenizer.Encode(ctx, text)
}

// Without a tokenizer prompts are estimated at 4 bytes a token.
func TestRandomPromptsEstimate(t *testing.T) {
	ctx := context.Background()
	a, err := RandomPrompts(ctx, nil, 10, 50, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomPrompts(ctx, nil, 10, 50, 3, 4)
	c, _ := RandomPrompts(ctx, nil, 10, 50, 3, 5)
	for i := range a {
		if len(a[i].Prompt) < 4*50-3 || a[i].InputLen != estimatePromptTokens(a[i].Prompt) || a[i].InputLen < 50 || a[i].InputLen > 55 {
			t.Errorf("prompt %d: %d bytes, InputLen %d", i, len(a[i].Prompt), a[i].InputLen)
		}
		if a[i] != b[i] || a[i].Prompt == c[i].Prompt {
			t.Errorf("prompt %d: seeding: same %v, differs %v", i, a[i] == b[i], a[i].Prompt != c[i].Prompt)
		}
	}
}

// tokenizeServer answers /tokenize and /detokenize with tk, in llama.cpp's
// shape or vLLM's (which refuses a body without "prompt" with a 400), and
// sends everything else to next.
type tokenizeServer struct {
	tk    *tokenizer.Tokenizer
	vllm  bool
	next  http.Handler
	calls sync.Map // path → *int (under mu)
	mu    sync.Mutex
}

func (s *tokenizeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/tokenize", "/detokenize":
	default:
		s.next.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	v, _ := s.calls.LoadOrStore(r.URL.Path, new(int))
	*v.(*int)++
	s.mu.Unlock()
	var body struct {
		Content    *string `json:"content"`
		Prompt     *string `json:"prompt"`
		AddSpecial bool    `json:"add_special"`
		AddTokens  bool    `json:"add_special_tokens"`
		Tokens     []int32 `json:"tokens"`
	}
	if json.NewDecoder(r.Body).Decode(&body) != nil {
		http.Error(w, `{"error": "bad json"}`, 400)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/detokenize" {
		text := s.tk.Decode(body.Tokens)
		if s.vllm {
			json.NewEncoder(w).Encode(map[string]any{"prompt": text})
		} else {
			json.NewEncoder(w).Encode(map[string]any{"content": text})
		}
		return
	}
	text, add := body.Content, body.AddSpecial
	if s.vllm {
		text, add = body.Prompt, body.AddTokens
	}
	if text == nil {
		http.Error(w, `{"error": {"message": "field required"}}`, 400)
		return
	}
	ids := s.tk.EncodeWith(*text, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: add})
	json.NewEncoder(w).Encode(map[string]any{"tokens": ids})
}

func (s *tokenizeServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.calls.Load(path)
	if !ok {
		return 0
	}
	return *v.(*int)
}

// The server's /tokenize, in either shape, makes the same prompts as the
// same tokenizer read locally; a server without one is an error that says
// why.
func TestServerTokenizer(t *testing.T) {
	tk := tinyTokenizer(t)
	ctx := context.Background()
	local, err := RandomPrompts(ctx, NewLocalTokenizer(tk, "tiny"), 12, 40, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, vllm := range []bool{false, true} {
		ts := &tokenizeServer{tk: tk, vllm: vllm, next: http.NotFoundHandler()}
		srv := httptest.NewServer(ts)
		pt, err := ServerTokenizer(ctx, srv.Client(), srv.URL, "", "m")
		if err != nil {
			t.Fatalf("vllm %v: %v", vllm, err)
		}
		if pt.Special() != 1 || strings.Contains(pt.Source(), "vLLM") != vllm {
			t.Errorf("vllm %v: special %d, source %q", vllm, pt.Special(), pt.Source())
		}
		remote, err := RandomPrompts(ctx, pt, 12, 40, 4, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(remote, local) {
			t.Errorf("vllm %v: the server's tokenizer made other prompts than the same one read locally", vllm)
		}
		if ts.count("/detokenize") == 0 {
			t.Errorf("vllm %v: prompts were never cut", vllm)
		}
		srv.Close()
	}

	// No tokenizer: 404, or endpoints that do not round-trip.
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := ServerTokenizer(ctx, srv.Client(), srv.URL, "", ""); err == nil || !strings.Contains(err.Error(), "POST /tokenize: HTTP 404") {
		t.Errorf("404: %v", err)
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			w.Write([]byte(`{"tokens": [1, 2]}`))
			return
		}
		w.Write([]byte(`{"content": "something else"}`))
	}))
	defer broken.Close()
	if _, err := ServerTokenizer(ctx, broken.Client(), broken.URL, "", ""); err == nil || !strings.Contains(err.Error(), "/detokenize") {
		t.Errorf("no round trip: %v", err)
	}
}

// --tokenizer reads a GGUF file's vocabulary or a tokenizer.json.
func TestLoadPromptTokenizer(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gocoder.gguf")
	if err := os.WriteFile(file, models.Default(), 0o644); err != nil {
		t.Fatal(err)
	}
	pt, err := LoadPromptTokenizer(file)
	if err != nil {
		t.Fatal(err)
	}
	want := builtinTokenizer(t).Encode("func main() { return }")
	if got, _ := pt.Encode(context.Background(), "func main() { return }"); !slices.Equal(got, want) || pt.Special() != 0 || pt.Source() != file {
		t.Errorf("from the file: %v (want %v), special %d, source %q", got, want, pt.Special(), pt.Source())
	}

	js := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(js, []byte(`{"added_tokens": [{"id": 4, "content": "<s>", "special": true}],
	  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
	  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
	  "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "Ġ": 2, "hi": 3}, "merges": ["h i"]}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"bos_token": "<s>"}`), 0o644)
	pt, err = LoadPromptTokenizer(js)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := pt.Encode(context.Background(), "hihi"); !slices.Equal(got, []int32{3, 3}) || pt.Special() != 1 {
		t.Errorf("from tokenizer.json: %v, special %d", got, pt.Special())
	}

	for _, bad := range []string{filepath.Join(dir, "missing.gguf"), js + ".nope.json"} {
		if _, err := LoadPromptTokenizer(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	notGGUF := filepath.Join(dir, "x.gguf")
	os.WriteFile(notGGUF, []byte("not a model"), 0o644)
	if _, err := LoadPromptTokenizer(notGGUF); err == nil {
		t.Error("a file that is not GGUF loaded")
	}
}

// evenTokenizer makes every word two tokens, so a prompt of an odd
// number of tokens does not exist.
type evenTokenizer struct{ index map[string]int32 }

func newEvenTokenizer() *evenTokenizer {
	e := &evenTokenizer{index: map[string]int32{}}
	for i, w := range promptWords {
		e.index[w] = int32(i)
	}
	return e
}

const evenMark = 1 << 20

func (e *evenTokenizer) Encode(_ context.Context, text string) ([]int32, error) {
	var ids []int32
	for _, w := range strings.Fields(text) {
		ids = append(ids, e.index[w], evenMark)
	}
	return ids, nil
}

func (e *evenTokenizer) Decode(_ context.Context, ids []int32) (string, error) {
	var words []string
	for i := 0; i+1 < len(ids); i += 2 {
		words = append(words, promptWords[ids[i]])
	}
	return strings.Join(words, " "), nil
}

func (e *evenTokenizer) Special() int   { return 0 }
func (e *evenTokenizer) Source() string { return "even" }

// A length no text has: the closest shorter one, and the note says so.
func TestRandomPromptsClosest(t *testing.T) {
	reqs, err := RandomPrompts(context.Background(), newEvenTokenizer(), 5, 9, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if r.InputLen != 8 || len(strings.Fields(r.Prompt)) != 4 {
			t.Errorf("prompt %d: InputLen %d, %q", i, r.InputLen, r.Prompt)
		}
	}
	var b strings.Builder
	n := promptNotes{source: "even", off: 5, lo: 8, hi: 8}
	n.write(&b, &serveFlags{inputLen: 9, outputLen: 2, numPrompts: 5, seed: 3}, false)
	want := "prompts: exactly 9 tokens each, counted by even; 2 output tokens; seed 3 (--seed 3 sends the same prompts again)\n" +
		"note: 5 of 5 prompts are 8 tokens, not 9: no cut of their words re-encodes to exactly 9\n"
	if b.String() != want {
		t.Errorf("notes:\n%s\nwant:\n%s", b.String(), want)
	}
	// The chat template's tokens come on top; too short for BOS; an estimate.
	for _, c := range []struct {
		n    promptNotes
		chat bool
		want string
	}{
		{promptNotes{source: "tok"}, true, "prompts: exactly 9 tokens each, counted by tok, plus the chat template's tokens; 2 output"},
		{promptNotes{source: "tok", special: 9, off: 5, lo: 10, hi: 10}, false, "note: --input-len 9 leaves no room for text beside the 9 special tokens the server adds; prompts are 10 tokens\n"},
		{promptNotes{source: "tok", off: 2, lo: 8, hi: 10}, false, "note: 2 of 5 prompts are 8 to 10 tokens, not 9"},
		{promptNotes{why: "POST /tokenize: HTTP 404"}, false, "prompts: about 9 tokens each (estimated); 2 output tokens; seed 3"},
	} {
		b.Reset()
		c.n.write(&b, &serveFlags{inputLen: 9, outputLen: 2, numPrompts: 5, seed: 3}, c.chat)
		if !strings.Contains(b.String(), c.want) || strings.Count(b.String(), "\n") > 2 {
			t.Errorf("%+v: %q, want %q", c.n, b.String(), c.want)
		}
	}
}

// What making exact prompts costs before a run starts: the built-in
// model's tokenizer in process, and behind a loopback /tokenize.
func BenchmarkRandomPrompts(b *testing.B) {
	tk := builtinTokenizer(b)
	srv := httptest.NewServer(&tokenizeServer{tk: tk, next: http.NotFoundHandler()})
	defer srv.Close()
	remote, err := ServerTokenizer(context.Background(), srv.Client(), srv.URL, "", "")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		pt   PromptTokenizer
	}{{"local", NewLocalTokenizer(tk, "gocoder")}, {"http", remote}} {
		b.Run(c.name, func(b *testing.B) {
			const n, inputLen = 100, 384
			for b.Loop() {
				if _, err := RandomPrompts(context.Background(), c.pt, n, inputLen, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "prompts/s")
		})
	}
}
