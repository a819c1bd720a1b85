package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"ringlm/chat/jinja"
)

// Request is one rendering of a conversation.
type Request struct {
	Messages []Message
	// Tools is the OpenAI tools array (JSON), or empty: Jinja templates see
	// it as tools, None when empty.
	Tools json.RawMessage
	// AddGenerationPrompt ends the text where the assistant's reply begins.
	AddGenerationPrompt bool
	// ContinueFinal renders the last message open, so that generation
	// continues it (an assistant prefill): HuggingFace's
	// continue_final_message. It excludes AddGenerationPrompt.
	ContinueFinal bool
	// Vars are further template variables (the request's
	// chat_template_kwargs, such as enable_thinking), as JSON.
	Vars map[string]json.RawMessage
}

// ErrTemplate wraps an error raised while rendering a model's template:
// raise_exception, or a conversation the template cannot handle (a
// TypeError where it joins text with a missing content).
var ErrTemplate = errors.New("chat template")

// Compile parses a model's Jinja template. bos and eos are the texts of
// the vocabulary's BOS and EOS tokens ("" for none).
func Compile(source, bos, eos string) (*Template, error) {
	if strings.TrimSpace(source) == "" {
		return nil, fmt.Errorf("chat: %w: the template is empty", ErrUnknownTemplate)
	}
	jt, err := jinja.Parse(source)
	if err != nil {
		return nil, fmt.Errorf("chat: the template does not parse: %w", err)
	}
	return &Template{Format: Jinja, BOS: bos, EOS: eos, jinja: jt, mentionsContent: strings.Contains(source, "content")}, nil
}

// reserved are the variables a request cannot set through Vars:
// apply_chat_template takes them as its own arguments.
var reserved = []string{"messages", "tools", "documents", "add_generation_prompt"}

// continueTag marks the end of the final message, as HuggingFace's
// continue_final_message does, so that the rendering can be cut there.
const continueTag = "CONTINUE_FINAL_MESSAGE_TAG "

// RenderFunc renders a conversation in a template language other than
// Jinja. Apply has checked the request's switches before calling it.
type RenderFunc func(Request) (string, error)

// Custom is a template that render renders, under the name format: a
// model's template in another language (an Ollama model's Go template,
// which package pull/ollama renders), so that every caller of Apply and
// Render takes it as it takes a model's own Jinja template.
func Custom(format Format, render RenderFunc) *Template {
	return &Template{Format: format, custom: render}
}

// Apply renders r. Errors from a model's template wrap ErrTemplate and say
// the template's line and the exception (a template's own
// raise_exception message included).
func (t Template) Apply(r Request) (string, error) {
	if r.ContinueFinal && r.AddGenerationPrompt {
		return "", errors.New("chat: continue_final_message and add_generation_prompt exclude each other: the first continues the last message, the second starts a new one")
	}
	if r.ContinueFinal && (len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Null) {
		return "", errors.New("chat: continue_final_message: the final message has no content to continue")
	}
	if t.custom != nil {
		out, err := t.custom(r)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrTemplate, err)
		}
		return out, nil
	}
	if t.Format != Jinja {
		if len(r.Tools) > 0 && string(r.Tools) != "null" {
			return "", fmt.Errorf("chat: the %s template has no place for tools (the model's own template would)", t.Format)
		}
		if r.ContinueFinal {
			// The open turn is the generation prompt followed by the text so far.
			msgs := r.Messages
			last := msgs[len(msgs)-1]
			if last.Role != "assistant" {
				return "", fmt.Errorf("chat: continue_final_message: the %s template continues only an assistant message, not %q", t.Format, last.Role)
			}
			out, err := t.renderNamed(msgs[:len(msgs)-1], true)
			if t.Format == Llama2 || t.Format == Mistral {
				out += " "
			}
			return out + last.Content, err
		}
		return t.renderNamed(r.Messages, r.AddGenerationPrompt)
	}
	if t.jinja == nil {
		return "", errors.New("chat: a jinja template is made by Compile")
	}
	if r.ContinueFinal && !t.mentionsContent {
		return "", fmt.Errorf("%w: continue_final_message: the template never shows a message's content", ErrTemplate)
	}
	vars, final, err := t.vars(r)
	if err != nil {
		return "", err
	}
	out, err := t.jinja.Render(vars)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	if r.ContinueFinal {
		return cutAtContinue(out, final)
	}
	return out, nil
}

// vars builds apply_chat_template's template variables.
func (t Template) vars(r Request) (map[string]any, string, error) {
	msgs := jinjaList(nil)
	final := ""
	for i, m := range r.Messages {
		d := jinja.NewDict()
		d.Set("role", m.Role)
		content := any(m.Content)
		if m.Null {
			content = nil
		}
		if r.ContinueFinal && i == len(r.Messages)-1 {
			final = m.Content
			content = m.Content + continueTag
		}
		if !m.noContent {
			d.Set("content", content)
		}
		for _, f := range m.Fields {
			if f.Name == "role" || f.Name == "content" {
				continue
			}
			v, err := jinja.FromJSON(f.Value)
			if err != nil {
				return nil, "", fmt.Errorf("chat: message %d, %s: %w", i, f.Name, err)
			}
			d.Set(f.Name, v)
		}
		msgs.Items = append(msgs.Items, d)
	}
	vars := map[string]any{
		"messages":              msgs,
		"tools":                 nil,
		"documents":             nil,
		"add_generation_prompt": r.AddGenerationPrompt,
		"raise_exception":       jinja.RaiseException(),
		"strftime_now":          jinja.StrftimeNow(t.Now),
	}
	if len(r.Tools) > 0 {
		tools, err := jinja.FromJSON(r.Tools)
		if err != nil {
			return nil, "", fmt.Errorf("chat: tools: %w", err)
		}
		vars["tools"] = tools
	}
	if t.BOS != "" {
		vars["bos_token"] = t.BOS
	}
	if t.EOS != "" {
		vars["eos_token"] = t.EOS
	}
	for name, raw := range r.Vars {
		for _, res := range reserved {
			if name == res {
				return nil, "", fmt.Errorf("chat: template variable %q is the request's own field, not a template argument", name)
			}
		}
		v, err := jinja.FromJSON(raw)
		if err != nil {
			return nil, "", fmt.Errorf("chat: template variable %q: %w", name, err)
		}
		vars[name] = v
	}
	return vars, final, nil
}

func jinjaList(items []any) *jinja.List { return &jinja.List{Items: items} }

// cutAtContinue ends the rendering where the final message's text ends,
// as HuggingFace's continue_final_message does: at the tag when the
// template kept the message as it was, else before the tag with trailing
// whitespace removed (the template trimmed the message).
func cutAtContinue(out, final string) (string, error) {
	tag := strings.TrimSpace(continueTag)
	if !strings.Contains(out, strings.TrimSpace(final)) || !strings.Contains(out, tag) {
		return "", fmt.Errorf("%w: continue_final_message: the template does not show the final message as it is, so it cannot be continued", ErrTemplate)
	}
	at := strings.LastIndex(out, tag)
	if strings.HasPrefix(out[at:], continueTag) {
		return out[:at], nil
	}
	return jinja.RStrip(out[:at]), nil
}

// StripBOS returns a rendering without its leading BOS text when the
// tokenizer adds the BOS token itself (the vocabulary's add_bos_token):
// templates that write bos_token would otherwise give the model two, and
// llama.cpp strips it the same way. The rendering shown to users
// (/apply-template) keeps it, as HuggingFace's does.
func (t Template) StripBOS(text string, tokenizerAddsBOS bool) string {
	if tokenizerAddsBOS && t.BOS != "" {
		return strings.TrimPrefix(text, t.BOS)
	}
	return text
}
