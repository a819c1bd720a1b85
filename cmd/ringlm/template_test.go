package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// llama3Template is a Llama-3-style template with raise_exception, as
// models ship it in tokenizer.chat_template.
const llama3Template = `{{- bos_token }}
{%- for message in messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) and message['role'] != 'system' %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}`

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %s", err, raw)
	}
	return resp.StatusCode, v
}

func errMessage(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

// `ringlm serve` renders the GGUF's own template; the template's
// raise_exception is a one-line 400; --chat-template-file replaces it.
func TestServeModelTemplate(t *testing.T) {
	m := modelWithTemplate(t, llama3Template)
	base, _ := startServe(t, "-m", m, "--port", "0", "--device", "cpu", "--kv-blocks", "64")
	code, v := postJSON(t, base+"/apply-template", `{"messages":[{"role":"user","content":" Hi "}]}`)
	want := "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if p, _ := v["prompt"].(string); code != 200 || p != want {
		t.Errorf("/apply-template: %d %q, want %q", code, p, want)
	}
	code, v = postJSON(t, base+"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":2}`)
	if msg := errMessage(v); code != 400 || msg != "chat template: line 4: TemplateError: Conversation roles must alternate user/assistant/user/assistant/..." {
		t.Errorf("raise_exception: %d %q", code, msg)
	}
	code, v = postJSON(t, base+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`)
	if code != 200 {
		t.Errorf("chat: %d %v", code, v)
	}

	file := filepath.Join(t.TempDir(), "mine.jinja")
	os.WriteFile(file, []byte("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"), 0o644)
	base, _ = startServe(t, "-m", m, "--port", "0", "--device", "cpu", "--kv-blocks", "64", "--chat-template-file", file)
	if code, v := postJSON(t, base+"/apply-template", `{"messages":[{"role":"user","content":"Hi"}]}`); code != 200 || v["prompt"] != "[user] Hi\n" {
		t.Errorf("--chat-template-file: %d %v", code, v)
	}
}

// A GGUF template the engine cannot parse: the named format its markers
// show, with a warning; when there is none, chat requests are a one-line
// 400 that says why and which flags pick a template.
func TestServeUnparsableTemplate(t *testing.T) {
	recognised := modelWithTemplate(t, "{% call x() %}{{ '<|im_start|>' }}{% endcall %}")
	base, logs := startServe(t, "-m", recognised, "--port", "0", "--device", "cpu", "--kv-blocks", "64", "--log-format", "json")
	if code, v := postJSON(t, base+"/apply-template", `{"messages":[{"role":"user","content":"Hi"}]}`); code != 200 || v["prompt"] != "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("fallback by markers: %d %v", code, v)
	}
	if !strings.Contains(logs.String(), "does not parse; using the named format") || !strings.Contains(logs.String(), "Encountered unknown tag 'call'") {
		t.Errorf("no warning:\n%s", logs.String())
	}

	neither := modelWithTemplate(t, "{% for %}")
	base, _ = startServe(t, "-m", neither, "--port", "0", "--device", "cpu", "--kv-blocks", "64")
	code, v := postJSON(t, base+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`)
	msg := errMessage(v)
	if code != 400 || strings.Contains(msg, "\n") || !strings.Contains(msg, "TemplateSyntaxError") || !strings.Contains(msg, "--chat-template-file") {
		t.Errorf("unusable template: %d %q", code, msg)
	}
	// Completions need no template.
	if code, v := postJSON(t, base+"/v1/completions", `{"prompt":"Hi","max_tokens":2}`); code != 200 {
		t.Errorf("completions: %d %v", code, v)
	}
}

func TestServeTemplateUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.jinja")
	if code, _, e := runCmd(t, "serve", "--chat-template-file", missing); code != 2 || !strings.Contains(e, "--chat-template-file") {
		t.Errorf("missing file: %d %q", code, e)
	}
	if code, _, e := runCmd(t, "serve", "--chat-template-file", missing, "--chat-template", "chatml"); code != 2 || !strings.Contains(e, "give one of them") {
		t.Errorf("both flags: %d %q", code, e)
	}
}
