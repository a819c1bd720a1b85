package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ringlm/chat/jinja"
)

// The golden test holds every template to HuggingFace's rendering of the
// battery of conversations in testdata/chat/conversations.json, byte for
// byte (tools/render_templates.py writes testdata/chat/golden/templates.json
// with Python's jinja2). Templates come from llama.cpp's test data and
// HF tokenizer_config.json files beside the checkout (../shared/testdata),
// and from testdata/chat/templates. RINGLM_CHAT_GOLDEN, RINGLM_CHAT_TEMPLATES
// and RINGLM_CHAT_TOKENIZERS (":"-separated folders) point it at another
// golden file and other templates, such as a battery kept outside the
// repository.

type battery struct {
	Now    string `json:"now"`
	Tokens map[string]struct {
		BOS *string `json:"bos"`
		EOS *string `json:"eos"`
	} `json:"tokens"`
	Tools         json.RawMessage `json:"tools"`
	Conversations []conversation  `json:"conversations"`
}

type conversation struct {
	Name                string            `json:"name"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               bool              `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	ContinueFinal       bool              `json:"continue_final_message"`
}

type goldenCase struct {
	Template     string  `json:"template"`
	Conversation string  `json:"conversation"`
	Output       *string `json:"output"`
	Error        string  `json:"error"`
	NoTemplate   bool    `json:"no_template"`
}

func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func envDirs(name string, defaults ...string) []string {
	if v := os.Getenv(name); v != "" {
		return strings.Split(v, ":")
	}
	return defaults
}

func loadBattery(t testing.TB) battery {
	var b battery
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "chat", "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// templateSource finds a golden case's template: NAME.jinja in the
// template folders, or NAME/tokenizer_config.json in the tokenizer
// folders with its bos_token and eos_token.
func templateSource(t *testing.T, b battery, id string, jinjaDirs, tokDirs []string) (src, bos, eos string) {
	if strings.HasSuffix(id, ".jinja") {
		for _, d := range jinjaDirs {
			raw, err := os.ReadFile(filepath.Join(d, id))
			if err == nil {
				tok := b.Tokens[id]
				if tok.BOS != nil {
					bos = *tok.BOS
				}
				if tok.EOS != nil {
					eos = *tok.EOS
				}
				return string(raw), bos, eos
			}
		}
		t.Skipf("template %s is not in %v: skipped", id, jinjaDirs)
	}
	for _, d := range tokDirs {
		raw, err := os.ReadFile(filepath.Join(d, id))
		if err != nil {
			continue
		}
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		json.Unmarshal(cfg["chat_template"], &src)
		return src, tokenText(cfg["bos_token"]), tokenText(cfg["eos_token"])
	}
	t.Skipf("%s is not in %v: skipped", id, tokDirs)
	return "", "", ""
}

// tokenText reads a special token from tokenizer_config.json: a string, or
// an AddedToken object in older files.
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var tok struct {
		Content string `json:"content"`
	}
	json.Unmarshal(raw, &tok)
	return tok.Content
}

func TestGoldenTemplates(t *testing.T) {
	root := repoRoot(t)
	goldenPath := os.Getenv("RINGLM_CHAT_GOLDEN")
	if goldenPath == "" {
		goldenPath = filepath.Join(root, "testdata", "chat", "golden", "templates.json")
	}
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Skipf("no golden renderings (%v): run tools/render_templates.py", err)
	}
	var golden struct {
		Generator map[string]any `json:"generator"`
		Cases     []goldenCase   `json:"cases"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "..", "shared", "testdata")
	jinjaDirs := envDirs("RINGLM_CHAT_TEMPLATES", filepath.Join(shared, "llamacpp", "templates"), filepath.Join(root, "testdata", "chat", "templates"))
	tokDirs := envDirs("RINGLM_CHAT_TOKENIZERS", filepath.Join(shared, "tokenizers"))
	b := loadBattery(t)
	now, err := time.Parse("2006-01-02T15:04:05", b.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("golden renderings by %v", golden.Generator)

	byTemplate := map[string][]goldenCase{}
	var order []string
	for _, c := range golden.Cases {
		if _, ok := byTemplate[c.Template]; !ok {
			order = append(order, c.Template)
		}
		byTemplate[c.Template] = append(byTemplate[c.Template], c)
	}
	for _, id := range order {
		t.Run(id, func(t *testing.T) {
			src, bos, eos := templateSource(t, b, id, jinjaDirs, tokDirs)
			cases := byTemplate[id]
			if cases[0].NoTemplate {
				// apply_chat_template refuses these; ringlm falls back to ChatML
				// (runner's test holds that).
				if _, err := Compile(src, bos, eos); !errors.Is(err, ErrUnknownTemplate) {
					t.Fatalf("a config without a template compiled: %v", err)
				}
				return
			}
			if cases[0].Conversation == "" && cases[0].Error != "" {
				t.Skipf("the golden environment could not parse this template (%s): regenerate the goldens with jinja2 >= 3.1 and a current transformers", cases[0].Error)
			}
			tm, err := Compile(src, bos, eos)
			if err != nil {
				t.Fatal(err)
			}
			tm.Now = func() time.Time { return now }
			for _, c := range cases {
				conv := findConversation(t, b, c.Conversation)
				req := Request{AddGenerationPrompt: conv.AddGenerationPrompt, ContinueFinal: conv.ContinueFinal}
				for i, m := range conv.Messages {
					msg, err := ParseMessage(m)
					if err != nil {
						t.Fatalf("%s: message %d: %v", c.Conversation, i, err)
					}
					req.Messages = append(req.Messages, msg)
				}
				if conv.Tools {
					req.Tools = b.Tools
				}
				got, err := tm.Apply(req)
				switch {
				case c.Output != nil && err != nil:
					t.Errorf("%s: %v\nwant %q", c.Conversation, err, *c.Output)
				case c.Output != nil && got != *c.Output:
					t.Errorf("%s: %s", c.Conversation, firstDiff(got, *c.Output))
				case c.Output == nil && err == nil:
					t.Errorf("%s: rendered %q, HF raised %s", c.Conversation, got, c.Error)
				case c.Output == nil:
					checkError(t, c, err)
				}
			}
		})
	}
}

func findConversation(t *testing.T, b battery, name string) conversation {
	for _, c := range b.Conversations {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("conversation %q is not in the battery", name)
	return conversation{}
}

// checkError compares a rendering error with HF's: the same exception, and
// for raise_exception (TemplateError) the template's own message.
func checkError(t *testing.T, c goldenCase, err error) {
	kind, msg, _ := strings.Cut(c.Error, ": ")
	var je *jinja.Error
	if !errors.As(err, &je) {
		t.Errorf("%s: %v, HF raised %s", c.Conversation, err, c.Error)
		return
	}
	if je.Kind != kind {
		t.Errorf("%s: %v, HF raised %s", c.Conversation, err, c.Error)
		return
	}
	if kind == "TemplateError" && je.Msg != msg {
		t.Errorf("%s: raise_exception(%q), HF raised %q", c.Conversation, je.Msg, msg)
	}
}

// firstDiff describes where got first differs from want.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(i-60, 0)
	return "differs at byte " + itoa(i) + ":\n got …" + quote(got[lo:min(len(got), i+80)]) + "\nwant …" + quote(want[lo:min(len(want), i+80)])
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(i int) string { return strconv.Itoa(i) }
