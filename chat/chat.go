// Package chat turns a list of chat messages into the prompt text a model
// was trained on. GGUF files carry their chat template as Jinja source
// (tokenizer.chat_template); rather than run Jinja, ringlm recognises the
// template's family from marker strings, as llama.cpp's server does, and
// renders that family's format in Go. An unrecognised template is an
// error that names the formats a caller can force.
package chat

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"` // system, user, assistant
	Content string `json:"content"`
}

// Format is a chat template family.
type Format string

const (
	ChatML  Format = "chatml"  // Qwen, many fine-tunes
	Llama3  Format = "llama3"  // Llama 3.x
	Llama2  Format = "llama2"  // Llama 2 chat
	Mistral Format = "mistral" // Mistral / Mixtral instruct
	Phi3    Format = "phi3"    // Phi-3
)

// Formats lists the supported formats.
var Formats = []Format{ChatML, Llama3, Llama2, Mistral, Phi3}

// ErrUnknownTemplate is returned when a template's family is not recognised.
var ErrUnknownTemplate = errors.New("unrecognised chat template")

// Template is a recognised template.
type Template struct {
	Format Format
	// DefaultSystem is inserted when the conversation has no system
	// message (Qwen2.5's template does this).
	DefaultSystem string
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

// Render formats the conversation. The result does not include the
// tokenizer's BOS token: the tokenizer adds it when the vocabulary asks
// for one (tokenizer.ggml.add_bos_token). With addGenerationPrompt the
// text ends where the assistant's reply begins.
func (t Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return "", fmt.Errorf("chat: message %d has role %q (system, user or assistant)", i, m.Role)
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
