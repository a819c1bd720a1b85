package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"ringlm/gguf"
	"ringlm/tokenizer"
)

// PromptTokenizer counts and cuts text in the served model's tokens, so
// that --input-len is a length in the tokens the server will count.
// Implementations are safe for concurrent use.
type PromptTokenizer interface {
	// Encode returns text's tokens, without the special tokens a prompt
	// gets added.
	Encode(ctx context.Context, text string) ([]int32, error)
	// Decode returns the text of ids.
	Decode(ctx context.Context, ids []int32) (string, error)
	// Special is the number of tokens (BOS, EOS) the server adds to a
	// completion prompt: a prompt of Encode's n tokens counts n+Special.
	Special() int
	// Source says where the tokenizer comes from, for the report.
	Source() string
}

// localTokenizer is a tokenizer read from a file (--tokenizer).
type localTokenizer struct {
	tk      *tokenizer.Tokenizer
	special int
	source  string
}

// NewLocalTokenizer wraps tk; source names it in the report.
func NewLocalTokenizer(tk *tokenizer.Tokenizer, source string) PromptTokenizer {
	// Any text gives the count; special tokens are added at the ends only.
	with := tk.EncodeWith("x", tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: true})
	return &localTokenizer{tk: tk, special: len(with) - len(tk.Encode("x")), source: source}
}

func (l *localTokenizer) Encode(_ context.Context, text string) ([]int32, error) {
	return l.tk.Encode(text), nil
}

func (l *localTokenizer) Decode(_ context.Context, ids []int32) (string, error) {
	return l.tk.Decode(ids), nil
}

func (l *localTokenizer) Special() int   { return l.special }
func (l *localTokenizer) Source() string { return l.source }

// LoadPromptTokenizer reads --tokenizer: a GGUF file (its vocabulary; the
// weights are not read) or a HuggingFace tokenizer.json (with the
// tokenizer_config.json beside it, when there is one, for BOS and EOS).
func LoadPromptTokenizer(name string) (PromptTokenizer, error) {
	var v *tokenizer.Vocab
	if strings.EqualFold(filepath.Ext(name), ".json") {
		js, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		cfg, err := os.ReadFile(filepath.Join(filepath.Dir(name), "tokenizer_config.json"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if v, err = tokenizer.FromHFJSON(js, cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	} else {
		f, err := gguf.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if v, err = tokenizer.FromGGUF(f); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		v = cloneVocab(v)
	}
	tk, err := tokenizer.New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return NewLocalTokenizer(tk, name), nil
}

// cloneVocab copies a vocabulary read from a mapped file (its strings and
// arrays may be views of the mapping), so that it outlives the file.
func cloneVocab(v *tokenizer.Vocab) *tokenizer.Vocab {
	c := *v
	cloneAll := func(ss []string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = strings.Clone(s)
		}
		return out
	}
	c.Tokens, c.Merges = cloneAll(v.Tokens), cloneAll(v.Merges)
	c.Types, c.Scores = slices.Clone(v.Types), slices.Clone(v.Scores)
	c.Model, c.Pre, c.ChatTemplate = strings.Clone(v.Model), strings.Clone(v.Pre), strings.Clone(v.ChatTemplate)
	return &c
}

// remoteTokenizer asks the server: POST /tokenize and /detokenize as
// llama.cpp's server (and ringlm) take them, or as vLLM does.
type remoteTokenizer struct {
	client              *http.Client
	base, apiKey, model string
	// vllm: vLLM's field names ({"prompt", "add_special_tokens"} in,
	// {"prompt"} out of /detokenize) instead of llama.cpp's
	// ({"content", "add_special"}, {"content"}).
	vllm    bool
	special int
}

// ServerTokenizer finds the server's tokenizer endpoints under base and
// checks that they tokenize and detokenize. The error says why there is
// none to use (a server without /tokenize answers 404).
func ServerTokenizer(ctx context.Context, client *http.Client, base, apiKey, model string) (PromptTokenizer, error) {
	r := &remoteTokenizer{client: client, base: base, apiKey: apiKey, model: model}
	const probe = "hello world"
	plain, err := r.tokenize(ctx, probe, false)
	var he *httpStatusError
	if errors.As(err, &he) && (he.status == http.StatusBadRequest || he.status == http.StatusUnprocessableEntity) {
		// Not llama.cpp's shape: vLLM requires "prompt".
		r.vllm = true
		plain, err = r.tokenize(ctx, probe, false)
	}
	if err != nil {
		return nil, err
	}
	with, err := r.tokenize(ctx, probe, true)
	if err != nil {
		return nil, err
	}
	text, err := r.Decode(ctx, plain)
	if err != nil {
		return nil, err
	}
	if len(plain) == 0 || strings.TrimSpace(text) != probe {
		return nil, fmt.Errorf("POST /detokenize of /tokenize's %d tokens for %q gave %q", len(plain), probe, text)
	}
	r.special = max(0, len(with)-len(plain))
	return r, nil
}

type httpStatusError struct {
	path   string
	status int
	msg    string
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("POST %s: HTTP %d: %s", e.path, e.status, e.msg)
}

func (r *remoteTokenizer) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	// A server that stops answering must not hang the benchmark's start.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.apiKey)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &httpStatusError{path: path, status: resp.StatusCode, msg: cutText(apiErrorMessage(rb), 200)}
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("POST %s: not the expected JSON: %v", path, err)
	}
	return nil
}

func (r *remoteTokenizer) tokenize(ctx context.Context, text string, addSpecial bool) ([]int32, error) {
	var body any
	if r.vllm {
		body = struct {
			Model      string `json:"model,omitempty"`
			Prompt     string `json:"prompt"`
			AddSpecial bool   `json:"add_special_tokens"`
		}{r.model, text, addSpecial}
	} else {
		body = struct {
			Content    string `json:"content"`
			AddSpecial bool   `json:"add_special"`
		}{text, addSpecial}
	}
	var out struct {
		Tokens *[]int32 `json:"tokens"`
	}
	if err := r.post(ctx, "/tokenize", body, &out); err != nil {
		return nil, err
	}
	if out.Tokens == nil {
		return nil, errors.New(`POST /tokenize: no "tokens" in the answer`)
	}
	return *out.Tokens, nil
}

func (r *remoteTokenizer) Encode(ctx context.Context, text string) ([]int32, error) {
	return r.tokenize(ctx, text, false)
}

func (r *remoteTokenizer) Decode(ctx context.Context, ids []int32) (string, error) {
	body := struct {
		Model  string  `json:"model,omitempty"`
		Tokens []int32 `json:"tokens"`
	}{Tokens: ids}
	if r.vllm {
		body.Model = r.model
	}
	var out struct {
		Content *string `json:"content"` // llama.cpp, ringlm
		Prompt  *string `json:"prompt"`  // vLLM
	}
	if err := r.post(ctx, "/detokenize", body, &out); err != nil {
		return "", err
	}
	switch {
	case out.Content != nil:
		return *out.Content, nil
	case out.Prompt != nil:
		return *out.Prompt, nil
	}
	return "", errors.New(`POST /detokenize: no "content" in the answer`)
}

func (r *remoteTokenizer) Special() int { return r.special }

func (r *remoteTokenizer) Source() string {
	if r.vllm {
		return "the server's /tokenize (vLLM's shape)"
	}
	return "the server's /tokenize"
}
