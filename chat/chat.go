// Package chat turns a conversation into the prompt text a model was
// trained on. The primary path is the model's own template: the Jinja
// source a GGUF file carries in tokenizer.chat_template (or a file given
// with --chat-template-file), rendered by package chat/jinja exactly as
// HuggingFace's apply_chat_template renders it, with messages, tools,
// add_generation_prompt, bos_token and eos_token, raise_exception and
// strftime_now. Five template families are also known by name (chatml,
// llama3, llama2, mistral, phi3) and rendered in Go: they are the
// fallbacks, for a file with no template (ChatML, as llama.cpp's server
// does), a template this engine cannot parse (recognised by its marker
// strings, as llama.cpp does), or a user's --chat-template.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"ringlm/chat/jinja"
)

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"` // system, user, assistant, tool, ...
	Content string `json:"content"`
	// Null marks a turn without content (an assistant turn that only
	// calls tools): Jinja templates see content as None, or no content
	// at all when the message had none (ParseMessage).
	Null      bool `json:"-"`
	noContent bool
	// Fields are the turn's other members as the client sent them
	// (tool_calls, tool_call_id, name, reasoning_content, ...), in their
	// order. Jinja templates see them as they are; the named formats do
	// not use them.
	Fields []Field `json:"-"`
}

// Field is one member of a message object, as JSON.
type Field struct {
	Name  string
	Value json.RawMessage
}

// Format is a chat template family.
type Format string

const (
	// Jinja is a model's own template, rendered as HuggingFace renders it.
	Jinja Format = "jinja"

	ChatML  Format = "chatml"  // Qwen, many fine-tunes
	Llama3  Format = "llama3"  // Llama 3.x
	Llama2  Format = "llama2"  // Llama 2 chat
	Mistral Format = "mistral" // Mistral / Mixtral instruct
	Phi3    Format = "phi3"    // Phi-3
)

// Formats lists the named formats.
var Formats = []Format{ChatML, Llama3, Llama2, Mistral, Phi3}

// ErrUnknownTemplate is returned when a template's family is not recognised.
var ErrUnknownTemplate = errors.New("unrecognised chat template")

// Template renders conversations: a model's Jinja template (Format
// Jinja, made by Compile), a named format, or a template another package
// renders (Custom).
type Template struct {
	Format Format
	// DefaultSystem is inserted when the conversation has no system
	// message (Qwen2.5's template does this); named formats only.
	DefaultSystem string
	// BOS and EOS are the texts of the vocabulary's BOS and EOS tokens, the
	// template's bos_token and eos_token; "" leaves the variable undefined,
	// as HuggingFace does for a tokenizer without that token.
	BOS, EOS string
	// Now is strftime_now's clock; nil is the local time.
	Now func() time.Time

	jinja           *jinja.Template
	mentionsContent bool       // HuggingFace refuses continue_final_message otherwise
	custom          RenderFunc // Custom's
}

// ParseFormat checks a format name given by a user (--chat-template).
func ParseFormat(name string) (Format, error) {
	f := Format(strings.ToLower(name))
	if slices.Contains(Formats, f) {
		return f, nil
	}
	return "", fmt.Errorf("chat: unknown template %q (known: %s)", name, formatList())
}

func formatList() string {
	s := make([]string, len(Formats))
	for i, f := range Formats {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// Detect recognises the family of a Jinja chat template.
func Detect(jinja string) (Template, error) {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(jinja, x) {
				return false
			}
		}
		return true
	}
	switch {
	case jinja == "":
		return Template{}, fmt.Errorf("chat: no template: %w (known: %s)", ErrUnknownTemplate, formatList())
	case has("<|im_start|>"):
		t := Template{Format: ChatML}
		if i := strings.Index(jinja, "You are Qwen, created by Alibaba Cloud."); i >= 0 && !has("<think>") {
			t.DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
		}
		return t, nil
	case has("<|start_header_id|>", "<|eot_id|>"):
		return Template{Format: Llama3}, nil
	case has("<|user|>", "<|end|>", "<|assistant|>"):
		return Template{Format: Phi3}, nil
	case has("[INST]", "<<SYS>>"):
		return Template{Format: Llama2}, nil
	case has("[INST]"):
		return Template{Format: Mistral}, nil
	}
	// No flag named here: the caller knows which of its flags forces one.
	return Template{}, fmt.Errorf("chat: %w (known: %s)", ErrUnknownTemplate, formatList())
}

// Render formats the conversation, with the generation prompt when
// addGenerationPrompt is set.
func (t Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.Apply(Request{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
}

// renderNamed renders a named format. The result does not include the
// tokenizer's BOS token: the tokenizer adds it when the vocabulary asks
// for one (tokenizer.ggml.add_bos_token). With addGenerationPrompt the
// text ends where the assistant's reply begins.
func (t Template) renderNamed(msgs []Message, addGenerationPrompt bool) (string, error) {
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return "", fmt.Errorf("chat: message %d has role %q, which the %s template does not have (system, user or assistant)", i, m.Role, t.Format)
		}
	}
	if t.DefaultSystem != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
		msgs = append([]Message{{Role: "system", Content: t.DefaultSystem}}, msgs...)
	}
	var b strings.Builder
	switch t.Format {
	case ChatML:
		for _, m := range msgs {
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		}
		if addGenerationPrompt {
			b.WriteString("<|im_start|>assistant\n")
		}
	case Llama3:
		for _, m := range msgs {
			b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimSpace(m.Content) + "<|eot_id|>")
		}
		if addGenerationPrompt {
			b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	case Phi3:
		for _, m := range msgs {
			b.WriteString("<|" + m.Role + "|>\n" + m.Content + "<|end|>\n")
		}
		if addGenerationPrompt {
			b.WriteString("<|assistant|>\n")
		}
	case Llama2, Mistral:
		renderInst(&b, t.Format, msgs)
	default:
		return "", fmt.Errorf("chat: unknown format %q", t.Format)
	}
	return b.String(), nil
}

// renderInst writes the [INST] formats. The system message joins the
// first user turn (inside <<SYS>> for Llama 2, before it for Mistral);
// each completed exchange ends with </s>, and later turns start with <s>
// (the first <s> is the tokenizer's BOS). Assistant turns are always
// open-ended, so the generation prompt is implicit.
func renderInst(b *strings.Builder, f Format, msgs []Message) {
	system := ""
	if len(msgs) > 0 && msgs[0].Role == "system" {
		system, msgs = msgs[0].Content, msgs[1:]
	}
	first := true
	for _, m := range msgs {
		switch m.Role {
		case "user":
			content := strings.TrimSpace(m.Content)
			if system != "" {
				if f == Llama2 {
					content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
				} else {
					content = system + "\n\n" + content
				}
				system = ""
			}
			if !first {
				b.WriteString("<s>")
			}
			b.WriteString("[INST] " + content + " [/INST]")
			first = false
		case "assistant":
			b.WriteString(" " + strings.TrimSpace(m.Content) + "</s>")
		case "system":
			// A later system message is folded into the next user turn.
			system = m.Content
		}
	}
}
