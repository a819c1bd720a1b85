package ollama

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ringlm/chat"
)

// weatherTool is written in the key order Ollama's structs marshal in, so
// that the expected renderings are Ollama's too.
var weatherTool = Tool{Type: "function", Function: ToolFunction{
	Name:        "get_weather",
	Description: "Get the current weather for a city",
	Parameters:  json.RawMessage(`{"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "description": "The city"}}}`),
}}

const qwenSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// The expected renderings, testdata/templates/{template}.{case}.txt, were
// worked out by hand from the templates' text, then checked against
// Ollama's own template package (github.com/ollama/ollama/template, run
// outside this repository) on the same input: all agree with v0.12.0;
// v0.17.4 agrees too except that it prints a tool as a Go struct
// ({function <nil> {get_weather ...}}) where v0.12.0 and this package
// print JSON, which is what the templates ask for.
var renderCases = []struct {
	template, name string
	system         string
	msgs           []Message
	tools          Tools
}{
	{"llama3.2", "system", "You are terse.", []Message{{"user", "Hi"}}, nil},
	{"llama3.2", "multiturn", "", []Message{{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}}, nil},
	// The conversation's own system message wins over the model's, and
	// consecutive user turns are joined.
	{"llama3.2", "merged", "Model default", []Message{{"system", "Be brief."}, {"user", "a"}, {"user", "b"}}, nil},
	{"llama3.2", "tools", "", []Message{{"user", "Weather in Paris?"}}, Tools{weatherTool}},
	{"qwen2.5", "system", qwenSystem, []Message{{"user", "Hi"}}, nil},
	{"qwen2.5", "multiturn", "", []Message{{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}}, nil},
	{"qwen2.5", "tools", qwenSystem, []Message{{"user", "Weather in Paris?"}}, Tools{weatherTool}},
	// Templates without .Messages: one execution per exchange, the last
	// cut after .Response.
	{"chatml-legacy", "multiturn", "S", []Message{{"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}}, nil},
	{"chatml-legacy", "prefill", "", []Message{{"user", "Write a haiku"}, {"assistant", "Sure,"}}, nil},
	// No .Response in the source: ParseTemplate appends one.
	{"mistral-legacy", "multiturn", "S", []Message{{"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}}, nil},
	{"funcs", "clock", "", []Message{{"user", "Hi"}}, nil},
}

// caseFiles are a render case's template source and expected rendering.
func caseFiles(t *testing.T, template, name string) (src, want []byte) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "templates", template+".gotmpl"))
	if err == nil {
		want, err = os.ReadFile(filepath.Join("testdata", "templates", template+"."+name+".txt"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return src, want
}

func TestRender(t *testing.T) {
	clock := func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	for _, c := range renderCases {
		t.Run(c.template+"/"+c.name, func(t *testing.T) {
			src, want := caseFiles(t, c.template, c.name)
			tmpl, err := ParseTemplate(string(src))
			if err != nil {
				t.Fatal(err)
			}
			tmpl.Now = clock
			got, err := tmpl.Render(c.system, c.msgs, c.tools)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("rendered\n%q\nwant\n%q", got, want)
			}
			// Rendering twice gives the same text: the turn-by-turn path
			// must not have altered the template.
			again, err := tmpl.Render(c.system, c.msgs, c.tools)
			if err != nil || again != got {
				t.Errorf("second rendering %q, %v", again, err)
			}
		})
	}
}

// The turn-by-turn path on shapes the library templates above do not
// have. Ollama v0.12.0 renders the third as here; on the first its cut
// panics (it removes the else list, then asserts it is a list), on the
// second it fails (its cut template loses the {{ define }}).
func TestRenderLegacyShapes(t *testing.T) {
	conv := []Message{{"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}}
	for _, c := range []struct{ src, want string }{
		{`{{ if .Prompt }}U:{{ .Prompt }} A:{{ .Response }}{{ else }}none{{ end }}!`, "U:u1 A:a1!U:u2 A:"},
		{`{{ define "turn" }}[{{ .Prompt }}]{{ end }}{{ template "turn" . }}{{ .Response }}<end>`, "[u1]a1<end>[u2]"},
		{`{{ .Prompt }}={{ .Response | printf "%q" }};`, `u1="a1";u2=`},
	} {
		tmpl, err := ParseTemplate(c.src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render("", conv, nil)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: rendered %q, want %q", c.src, got, c.want)
		}
	}
}

func TestRenderDoesNotAlterMessages(t *testing.T) {
	tmpl, err := ParseTemplate("{{ range .Messages }}[{{ .Content }}]{{ end }}")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{"user", "a"}, {"user", "b"}}
	got, err := tmpl.Render("", msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != "[a\n\nb]" {
		t.Errorf("got %q", got)
	}
	if msgs[0].Content != "a" || msgs[1].Content != "b" {
		t.Errorf("the caller's messages changed: %q", msgs)
	}
}

// A tool result is never joined with the next one: each is its own turn.
func TestRenderKeepsToolTurnsApart(t *testing.T) {
	tmpl, err := ParseTemplate("{{ range .Messages }}{{ .Role }}={{ .Content }};{{ end }}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render("", []Message{{"user", "q"}, {"tool", "1"}, {"tool", "2"}, {"assistant", "x"}, {"assistant", "y"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "user=q;tool=1;tool=2;assistant=x\n\ny;"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// .System is every system message, joined; the messages keep them too.
func TestRenderSystemMessages(t *testing.T) {
	tmpl, err := ParseTemplate("<{{ .System }}>{{ range .Messages }}{{ .Role }};{{ end }}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render("default", []Message{{"system", "one"}, {"user", "u"}, {"system", "two"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<one\n\ntwo>system;user;system;"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"{{ .Messages", "unclosed action"},
		{"{{ range .Tools }}{{ toTypeScriptType . }}{{ end }}{{ .Messages }}", `function "toTypeScriptType" not defined`},
		{"{{ end }}", "unexpected {{end}}"},
	} {
		_, err := ParseTemplate(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTemplate(%q) = %v, want an error containing %q", c.src, err, c.want)
			continue
		}
		checkOneLine(t, err)
	}
	// Errors while executing: a field a message does not have.
	tmpl, err := ParseTemplate("{{ range .Messages }}{{ .Name }}{{ end }}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render("", []Message{{"user", "x"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "can't evaluate field Name") {
		t.Fatalf("got %v", err)
	}
	checkOneLine(t, err)
}

// A model's ChatTemplate renders what Render renders, with the model's
// system prompt and the tools as the HTTP API passes them (JSON).
func TestModelChatTemplate(t *testing.T) {
	for _, c := range renderCases {
		if c.name == "clock" {
			continue // the clock is Template.Now's, which a model's template leaves to time.Now
		}
		t.Run(c.template+"/"+c.name, func(t *testing.T) {
			src, want := caseFiles(t, c.template, c.name)
			m := &Model{Template: string(src), System: c.system}
			ct, err := m.ChatTemplate()
			if err != nil || ct == nil || ct.Format != ChatFormat {
				t.Fatalf("ChatTemplate: %v %v", ct, err)
			}
			r := chat.Request{}
			for _, msg := range c.msgs {
				r.Messages = append(r.Messages, chat.Message{Role: msg.Role, Content: msg.Content})
			}
			if len(c.tools) > 0 {
				if r.Tools, err = json.Marshal(c.tools); err != nil {
					t.Fatal(err)
				}
			}
			if c.msgs[len(c.msgs)-1].Role == "assistant" {
				r.ContinueFinal = true
			} else {
				r.AddGenerationPrompt = true
			}
			got, err := ct.Apply(r)
			if err != nil || got != string(want) {
				t.Errorf("got %q (%v)\nwant %q", got, err, want)
			}
		})
	}
	if ct, err := (&Model{}).ChatTemplate(); ct != nil || err != nil {
		t.Errorf("a model without a template layer: %v %v", ct, err)
	}
	if _, err := (&Model{Template: "{{ .Prompt "}).ChatTemplate(); err == nil {
		t.Error("a template that does not parse was taken")
	}
	ct, _ := (&Model{Template: "{{ .Prompt }}"}).ChatTemplate()
	if _, err := ct.Apply(chat.Request{Messages: []chat.Message{{Role: "user", Content: "x"}}}); !errors.Is(err, chat.ErrTemplate) || !strings.Contains(err.Error(), "add_generation_prompt") {
		t.Errorf("add_generation_prompt false: %v", err)
	}
}
