package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"ringlm/chat"
)

// ChatFormat is the chat.Template format of an Ollama model's template.
const ChatFormat chat.Format = "ollama"

// ChatTemplate is the model's template layer as a chat.Template, so that
// `ringlm run` and the HTTP API render its conversations with it as
// Ollama does (Render, with the model's system prompt); nil when the
// model has no template layer and its GGUF's own template applies.
//
// Ollama's templates have no add_generation_prompt switch: they end where
// the reply begins, or inside a final assistant message, which the reply
// continues. A request for anything else is an error rather than a
// rendering that ignores it. A message's other members (tool_calls,
// tool_call_id) and template variables (chat_template_kwargs) do not
// reach the template: Render takes the role and content.
func (m *Model) ChatTemplate() (*chat.Template, error) {
	if strings.TrimSpace(m.Template) == "" {
		return nil, nil
	}
	t, err := ParseTemplate(m.Template)
	if err != nil {
		return nil, fmt.Errorf("ollama: model %s: %w", m.Name, err)
	}
	system := m.System
	return chat.Custom(ChatFormat, func(r chat.Request) (string, error) {
		final := len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "assistant"
		switch {
		case !r.AddGenerationPrompt && !r.ContinueFinal:
			return "", errors.New("an Ollama template always ends where the reply begins: add_generation_prompt cannot be false")
		case r.AddGenerationPrompt && final:
			return "", errors.New("an Ollama template continues a final assistant message: it cannot open another turn after it")
		}
		msgs := make([]Message, len(r.Messages))
		for i, cm := range r.Messages {
			msgs[i] = Message{Role: cm.Role, Content: cm.Content}
		}
		var tools Tools
		if raw := bytes.TrimSpace(r.Tools); len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &tools); err != nil {
				return "", fmt.Errorf("tools: %w", err)
			}
		}
		return t.Render(system, msgs, tools)
	}), nil
}
