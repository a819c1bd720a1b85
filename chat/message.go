package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// FieldError is a message that cannot be read: Field names the member
// ("role", "content") at fault.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// ParseMessage reads one message in the OpenAI form: a JSON object with a
// string role and a content that is a string, null (or absent), or an
// array of text parts, which are joined. "developer" becomes "system", the
// role every template knows. Other members (tool_calls, tool_call_id,
// name, ...) are kept as they are, in order.
func ParseMessage(raw json.RawMessage) (Message, error) {
	var m Message
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return m, &FieldError{Field: "", Msg: "expected an object with role and content"}
	}
	hasRole, hasContent := false, false
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return m, &FieldError{Msg: "invalid JSON: " + err.Error()}
		}
		name := k.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return m, &FieldError{Field: name, Msg: "invalid JSON: " + err.Error()}
		}
		switch name {
		case "role":
			if err := json.Unmarshal(v, &m.Role); err != nil || m.Role == "" {
				return m, &FieldError{Field: "role", Msg: "expected a non-empty string"}
			}
			if m.Role == "developer" {
				m.Role = "system"
			}
			hasRole = true
		case "content":
			text, null, err := contentText(v)
			if err != nil {
				return m, &FieldError{Field: "content", Msg: err.Error()}
			}
			m.Content, m.Null, hasContent = text, null, true
		default:
			m.Fields = append(m.Fields, Field{Name: name, Value: v})
		}
	}
	if !hasRole {
		return m, &FieldError{Field: "role", Msg: "role is required"}
	}
	if !hasContent {
		// Templates see no content member at all, as HuggingFace passes the message.
		m.Null, m.noContent = true, true
	}
	return m, nil
}

// contentText reads a message's content: a string, null, or an array of
// text parts.
func contentText(raw json.RawMessage) (text string, null bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case string(raw) == "null":
		return "", true, nil
	case len(raw) > 0 && raw[0] == '"':
		err := json.Unmarshal(raw, &text)
		return text, false, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false, fmt.Errorf("expected a string or an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", false, fmt.Errorf("only text parts are supported, got %q", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), false, nil
}
