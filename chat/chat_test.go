package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var conv = []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "2+2?"}}

func TestRender(t *testing.T) {
	cases := map[Format]string{
		ChatML: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n",
		Llama3: "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
		Phi3:    "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\n2+2?<|end|>\n<|assistant|>\n",
		Llama2:  "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello!</s><s>[INST] 2+2? [/INST]",
		Mistral: "[INST] Be brief.\n\nHi [/INST] Hello!</s><s>[INST] 2+2? [/INST]",
	}
	for f, want := range cases {
		got, err := Template{Format: f}.Render(conv, true)
		if err != nil || got != want {
			t.Errorf("%s:\n got %q\nwant %q (%v)", f, got, want, err)
		}
	}
}

func TestDetect(t *testing.T) {
	cases := map[string]Format{
		"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}": ChatML,
		"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}":              Llama3,
		"{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}":                                          Phi3,
		"{{ bos_token + '[INST] ' + '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}":                                                       Llama2,
		"{{ '[INST] ' + message['content'] + ' [/INST]' }}":                                                                               Mistral,
	}
	for src, want := range cases {
		got, err := Detect(src)
		if err != nil || got.Format != want {
			t.Errorf("Detect(%.40q) = %v, %v; want %s", src, got, err, want)
		}
	}
	qwen25 := "{%- if messages[0]['role'] == 'system' %}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
	tm, err := Detect(qwen25)
	if err != nil || tm.DefaultSystem == "" {
		t.Fatalf("qwen2.5 default system not detected: %+v %v", tm, err)
	}
	got, _ := tm.Render([]Message{{Role: "user", Content: "Hi"}}, true)
	if want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; got != want {
		t.Fatalf("qwen2.5 render %q", got)
	}
	for _, bad := range []string{"", "{{ messages }}"} {
		if _, err := Detect(bad); !errors.Is(err, ErrUnknownTemplate) {
			t.Errorf("Detect(%q): %v", bad, err)
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := (Template{Format: ChatML}).Render([]Message{{Role: "tool", Content: "x"}}, true); err == nil {
		t.Error("unknown role accepted")
	}
	if _, err := ParseFormat("alpaca"); err == nil {
		t.Error("unknown format accepted")
	}
	if f, err := ParseFormat("ChatML"); err != nil || f != ChatML {
		t.Error("format names are case-insensitive")
	}
}

// ParseMessage reads the OpenAI form: developer is system, text parts are
// joined, null and absent content differ, other members keep their order.
func TestParseMessage(t *testing.T) {
	m, err := ParseMessage([]byte(`{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"name":"x","tool_calls":[{"id":"1"}]}`))
	if err != nil || m.Role != "system" || m.Content != "ab" || m.Null || len(m.Fields) != 2 || m.Fields[0].Name != "name" || string(m.Fields[1].Value) != `[{"id":"1"}]` {
		t.Fatalf("%+v %v", m, err)
	}
	null, _ := ParseMessage([]byte(`{"role":"assistant","content":null}`))
	absent, _ := ParseMessage([]byte(`{"role":"assistant"}`))
	tm, err := Compile("{% for m in messages %}[{{ m.content is defined }} {{ m.content }}]{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tm.Render([]Message{null, absent}, false); err != nil || got != "[True None][False ]" {
		t.Errorf("null and absent content: %q %v", got, err)
	}
	for raw, field := range map[string]string{
		`{"content":"x"}`: "role",
		`{"role":""}`:     "role",
		`{"role":"user","content":[{"type":"image_url"}]}`: "content",
		`{"role":"user","content":5}`:                      "content",
		`"hi"`:                                             "",
	} {
		_, err := ParseMessage([]byte(raw))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: %v, want a %q error", raw, err, field)
		}
	}
}

// A model's template: the vocabulary's BOS/EOS, the request's variables,
// HuggingFace's rules for continuing the final message; errors wrap
// ErrTemplate and read as one line.
func TestJinjaTemplate(t *testing.T) {
	src := "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</s>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}{% if flag %}!{% endif %}"
	tm, err := Compile(src, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	u := []Message{{Role: "user", Content: "hi "}}
	if got, _ := tm.Render(u, true); got != "<s><user>hi</s><assistant>" {
		t.Errorf("render %q", got)
	}
	if got, _ := tm.Apply(Request{Messages: u, Vars: map[string]json.RawMessage{"flag": []byte("true")}}); got != "<s><user>hi</s>!" {
		t.Errorf("vars %q", got)
	}
	// The template trims the message, so continuing it cuts before the tag
	// and drops the trailing space, as HuggingFace does.
	cont := append(u, Message{Role: "assistant", Content: "Hello, "})
	if got, err := tm.Apply(Request{Messages: cont, ContinueFinal: true}); err != nil || got != "<s><user>hi</s><assistant>Hello," {
		t.Errorf("continue: %q %v", got, err)
	}
	if got := tm.StripBOS("<s><user>", true); got != "<user>" || tm.StripBOS("<s>x", false) != "<s>x" {
		t.Errorf("StripBOS %q", got)
	}
	for _, r := range []Request{
		{Messages: u, ContinueFinal: true, AddGenerationPrompt: true},
		{Messages: []Message{{Role: "assistant", Null: true}}, ContinueFinal: true},
		{Messages: u, Vars: map[string]json.RawMessage{"messages": []byte("[]")}},
		{Messages: u, Vars: map[string]json.RawMessage{"x": []byte("{")}},
		{Messages: u, Tools: []byte("[")},
	} {
		if _, err := tm.Apply(r); err == nil {
			t.Errorf("%+v: accepted", r)
		}
	}
	bad, _ := Compile("{{ raise_exception('no ' ~ messages|length) }}", "", "")
	if _, err := bad.Render(u, true); !errors.Is(err, ErrTemplate) || err.Error() != "chat template: line 1: TemplateError: no 1" {
		t.Errorf("raise_exception: %v", err)
	}
	if _, err := Compile("{% if %}", "", ""); err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := Compile(" \n", "", ""); !errors.Is(err, ErrUnknownTemplate) {
		t.Errorf("empty template: %v", err)
	}
}

// The named formats continue an assistant message after the generation
// prompt and have no place for tools.
func TestNamedContinue(t *testing.T) {
	cont := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "Hel"}}
	cases := map[Format]string{
		ChatML:  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHel",
		Mistral: "[INST] hi [/INST] Hel",
	}
	for f, want := range cases {
		got, err := Template{Format: f}.Apply(Request{Messages: cont, ContinueFinal: true})
		if err != nil || got != want {
			t.Errorf("%s: %q %v", f, got, err)
		}
	}
	if _, err := (Template{Format: ChatML}).Apply(Request{Messages: cont[:1], ContinueFinal: true}); err == nil {
		t.Error("continued a user message")
	}
	if _, err := (Template{Format: ChatML}).Apply(Request{Messages: cont[:1], Tools: []byte(`[{"type":"function"}]`)}); err == nil {
		t.Error("ChatML took tools")
	}
}

func TestJinjaWithoutCompile(t *testing.T) {
	if _, err := (Template{Format: Jinja}).Render([]Message{{Role: "user", Content: "x"}}, true); err == nil {
		t.Error("an uncompiled jinja template rendered")
	}
}

// A Custom template is rendered by its function, after the checks every
// template's requests get, and its errors are ErrTemplate.
func TestCustomTemplate(t *testing.T) {
	var got Request
	tmpl := Custom("upper", func(r Request) (string, error) {
		got = r
		var b strings.Builder
		for _, m := range r.Messages {
			if m.Role == "tool" {
				return "", errors.New("no tools here")
			}
			b.WriteString(strings.ToUpper(m.Role) + ": " + m.Content + "\n")
		}
		return b.String(), nil
	})
	out, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true)
	if err != nil || out != "USER: hi\n" || !got.AddGenerationPrompt || tmpl.Format != "upper" {
		t.Fatalf("Render: %q %v (request %+v)", out, err, got)
	}
	if _, err := tmpl.Render([]Message{{Role: "tool", Content: "42"}}, true); !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "no tools here") {
		t.Errorf("the function's error: %v", err)
	}
	if _, err := tmpl.Apply(Request{Messages: []Message{{Role: "assistant", Content: "x"}}, ContinueFinal: true, AddGenerationPrompt: true}); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("both switches reached the function: %v", err)
	}
	if tmpl.StripBOS("<s>x", true) != "<s>x" {
		t.Error("a custom template has no BOS text to strip")
	}
}
