package httpapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ringlm/chat"
	"ringlm/tokenizer"
)

// toolTemplate is a Qwen-style template with tools, tool calls and
// raise_exception, used through --chat-template-file.
const toolTemplate = `{{- bos_token }}
{%- if tools %}<|im_start|>system
{% for t in tools %}{{ t | tojson }}
{% endfor %}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.content == 'forbidden' %}{{ raise_exception('forbidden content') }}{% endif %}
{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}<|im_end|>
{% else %}<|im_start|>{{ m.role + '\n' + m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}
{%- endif %}`

func startTemplateServer(t *testing.T) *testServer {
	path := filepath.Join(t.TempDir(), "tools.jinja")
	if err := os.WriteFile(path, []byte(toolTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(c *Config) { c.ChatTemplateFile = path })
}

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather in a city, e.g. Zürich","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

// POST /apply-template shows what the template makes of a chat request:
// the same text package chat renders, with the tools, the messages' other
// members and chat_template_kwargs in it.
func TestApplyTemplate(t *testing.T) {
	ts := startTemplateServer(t)
	body := `{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Weather in "},{"type":"text","text":"Paris?"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"22 C"}],"tools":` + weatherTools + `,"chat_template_kwargs":{"enable_thinking":false}}`
	r := ts.post("/apply-template", body)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	got := str(r.json(t)["prompt"])

	v := ts.m.Tokenizer.Vocab()
	tm, err := chat.Compile(toolTemplate, v.Tokens[v.BOS], v.Tokens[v.EOS])
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	json.Unmarshal([]byte(body), &req)
	cr := chat.Request{Tools: req.Tools, AddGenerationPrompt: true, Vars: map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}}
	for _, m := range req.Messages {
		msg, err := chat.ParseMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		cr.Messages = append(cr.Messages, msg)
	}
	want, err := tm.Apply(cr)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("/apply-template\n got %q\nwant %q", got, want)
	}
	for _, s := range []string{
		v.Tokens[v.BOS] + "<|im_start|>system\n",
		`{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, e.g. Zürich"`,
		"<|im_start|>system\nBe brief.<|im_end|>",
		"<|im_start|>user\nWeather in Paris?<|im_end|>",
		`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`,
		"<|im_start|>tool\n22 C<|im_end|>",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("the rendering lacks %q:\n%s", s, got)
		}
	}
	if !strings.HasSuffix(got, "<|im_start|>assistant\n<think></think>") {
		t.Errorf("generation prompt with enable_thinking=false: %q", got)
	}

	// tool_choice "none" leaves the tools out; a final assistant message is
	// continued; the explicit switches win.
	for _, c := range []struct{ extra, suffix string }{
		{`,"tools":` + weatherTools + `,"tool_choice":"none"`, "<|im_start|>assistant\n"},
		{`,"add_generation_prompt":false`, "hi<|im_end|>\n"},
	} {
		r := ts.post("/apply-template", `{"messages":[{"role":"user","content":"hi"}]`+c.extra+`}`)
		p := str(r.json(t)["prompt"])
		if r.status != 200 || strings.Contains(p, "get_weather") || !strings.HasSuffix(p, c.suffix) {
			t.Errorf("%s: %d %q", c.extra, r.status, p)
		}
	}
	r = ts.post("/apply-template", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello, wor"}]}`)
	if p := str(r.json(t)["prompt"]); r.status != 200 || !strings.HasSuffix(p, "<|im_start|>assistant\nHello, wor") {
		t.Errorf("prefill: %d %q", r.status, p)
	}
}

// The tools reach the template on /v1/chat/completions too: the prompt the
// engine gets is the /apply-template text tokenized with one BOS.
func TestChatCompletionsTools(t *testing.T) {
	ts := startTemplateServer(t)
	msgs := `"messages":[{"role":"user","content":"Weather in Paris?"}]`
	r := ts.post("/apply-template", `{`+msgs+`,"tools":`+weatherTools+`}`)
	prompt := str(r.json(t)["prompt"])
	c := ts.post("/v1/chat/completions", `{`+msgs+`,"tools":`+weatherTools+`,"max_tokens":2,"temperature":0}`)
	if c.status != 200 {
		t.Fatalf("%d %s", c.status, c.body)
	}
	v := ts.m.Tokenizer.Vocab()
	text := prompt
	if v.AddBOS {
		text = strings.TrimPrefix(prompt, v.Tokens[v.BOS])
	}
	ids := ts.m.Tokenizer.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: true})
	if n := strings.Count(ts.m.Tokenizer.Decode(ids), v.Tokens[v.BOS]); n != 1 {
		t.Errorf("the prompt has %d BOS tokens", n)
	}
	if got := int(path(c.json(t), "usage", "prompt_tokens").(float64)); got != len(ids) {
		t.Errorf("prompt_tokens %d, want %d (the /apply-template prompt with one BOS)", got, len(ids))
	}
	without := ts.post("/v1/chat/completions", `{`+msgs+`,"max_tokens":2,"temperature":0}`)
	if a, b := path(c.json(t), "usage", "prompt_tokens"), path(without.json(t), "usage", "prompt_tokens"); a.(float64) <= b.(float64) {
		t.Errorf("the tools did not lengthen the prompt: %v vs %v", a, b)
	}
}

// A template that refuses a conversation, and tools or template variables
// that are malformed, are 400s with a one-line message naming the field;
// the server keeps serving.
func TestTemplateErrors(t *testing.T) {
	ts := startTemplateServer(t)
	cases := []struct {
		name, body      string
		param, contains string
	}{
		{"raise_exception", `{"messages":[{"role":"user","content":"x"},{"role":"user","content":"forbidden"}]}`, "messages", "TemplateError: forbidden content"},
		{"unknown role", `{"messages":[{"role":"wizard","content":"y"}]}`, "messages", "must be system"},
		{"content null", `{"messages":[{"role":"user","content":null}]}`, "messages", "TypeError: can only concatenate str (not \"NoneType\") to str"},
		{"content missing", `{"messages":[{"role":"user"}]}`, "messages", "UndefinedError"},
		{"tools not an array", `{"messages":[{"role":"user","content":"x"}],"tools":{"a":1}}`, "tools", "array"},
		{"tool without a name", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`, "tools", "tools[0]"},
		{"reserved variable", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":[]}}`, "messages", "request's own field"},
		{"both switches", `{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":true,"continue_final_message":true}`, "messages", "exclude each other"},
		{"role not a string", `{"messages":[{"role":3,"content":"x"}]}`, "messages[0].role", "string"},
		{"message not an object", `{"messages":["hi"]}`, "messages[0]", "object"},
	}
	for _, c := range cases {
		for _, p := range []string{"/apply-template", "/v1/chat/completions"} {
			r := ts.post(p, c.body)
			e, _ := r.json(t)["error"].(map[string]any)
			msg := str(e["message"])
			if r.status != 400 || str(e["param"]) != c.param || !strings.Contains(msg, c.contains) || strings.Contains(msg, "\n") {
				t.Errorf("%s %s: %d %s", c.name, p, r.status, r.body)
			}
		}
	}
	if r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`); r.status != 200 {
		t.Fatalf("server stopped serving: %d %s", r.status, r.body)
	}
}

// Without a template of its own the model gets ChatML, which has no place
// for tools.
func TestApplyTemplateFallback(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ChatTemplate = "chatml" })
	r := ts.post("/apply-template", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}]}`)
	if p := str(r.json(t)["prompt"]); r.status != 200 || p != "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("%d %q", r.status, p)
	}
	r = ts.post("/apply-template", `{"messages":[{"role":"user","content":"U"}],"tools":`+weatherTools+`}`)
	if r.status != 400 || !strings.Contains(string(r.body), "no place for tools") {
		t.Errorf("tools with the ChatML fallback: %d %s", r.status, r.body)
	}
	if r := ts.post("/apply-template", `{"model":"gpt-9","messages":[{"role":"user","content":"U"}]}`); r.status != 404 {
		t.Errorf("unknown model: %d", r.status)
	}
}
