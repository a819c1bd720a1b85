package ollama

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // system, user, assistant or tool
	Content string
}

// Tool is a function offered to the model, in the shape of Ollama's and
// OpenAI's tools arrays. A template prints a Tool, its Function and the
// Tools list as JSON; Parameters (a JSON schema) keeps the caller's key
// order, where Ollama reorders it to its own structs'.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is a Tool's function.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Tools is the .Tools of a template.
type Tools []Tool

func (t Tool) String() string         { return jsonString(t) }
func (f ToolFunction) String() string { return jsonString(f) }
func (t Tools) String() string        { return jsonString(t) }

// turn is a message as templates see it: the fields Ollama's templates
// test (.ToolCalls, .Thinking, ...) exist, so that `{{ if .ToolCalls }}`
// is false rather than an error; only Role and Content are ever set.
type turn struct {
	Role       string
	Content    string
	Thinking   string
	Images     []string
	ToolCalls  []any
	ToolName   string
	ToolCallID string
}

// Template is an Ollama chat template: Go text/template source with
// .System, .Messages (each with .Role and .Content), .Tools, .Prompt and
// .Response, and the functions Ollama's library templates call: json,
// currentDate and yesterdayDate (the builtins slice, len, eq, ... are
// text/template's). toTypeScriptType, which only gpt-oss's template
// calls, is not provided: such a template fails to parse, naming it.
type Template struct {
	// Now is currentDate's clock; nil is time.Now.
	Now func() time.Time

	full *template.Template
	// cut is the template up to and including its first .Response, for
	// the last turn of a template without .Messages; nil otherwise.
	cut *template.Template
}

// ParseTemplate parses an Ollama template. As Ollama does, it appends
// {{ .Response }} to a template that mentions neither .Messages nor
// .Response.
func ParseTemplate(src string) (*Template, error) {
	t := &Template{}
	full, err := template.New("ollama").Option("missingkey=zero").Funcs(t.funcs()).Parse(src)
	if err != nil {
		return nil, fmt.Errorf("ollama: chat template: %w", err)
	}
	vars := map[string]bool{}
	for _, tt := range full.Templates() {
		if tt.Tree != nil {
			identifiers(tt.Tree.Root, vars)
		}
	}
	if !vars["messages"] && !vars["response"] {
		resp := template.Must(template.New("").Parse("{{ .Response }}"))
		full.Tree.Root.Nodes = append(full.Tree.Root.Nodes, resp.Tree.Root.Nodes...)
	}
	t.full = full
	if vars["messages"] {
		return t, nil
	}
	// Templates without .Messages render a conversation turn by turn;
	// the last turn stops after its .Response, leaving the reply open.
	cut, err := full.Clone()
	if err != nil {
		return nil, fmt.Errorf("ollama: chat template: %w", err)
	}
	root := full.Tree.Root.CopyList()
	pruneAfterResponse(root, new(bool))
	if _, err := cut.AddParseTree("ollama", &parse.Tree{Name: "ollama", Root: root}); err != nil {
		return nil, fmt.Errorf("ollama: chat template: %w", err)
	}
	t.cut = cut
	return t, nil
}

// Render renders a conversation as Ollama's chat endpoint does. system,
// when not "", is the model's system prompt: it becomes the first
// message unless the conversation starts with a system message of its
// own. Consecutive messages of one role (tool results excepted) are
// joined with a blank line, and .System is every system message's
// content so joined. A template with .Messages is executed once; one
// without is executed for each (system, prompt, response) triple, the
// last cut after its .Response, so that the reply follows.
func (t *Template) Render(system string, msgs []Message, tools Tools) (string, error) {
	if system != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
		msgs = append([]Message{{Role: "system", Content: system}}, msgs...)
	}
	var systems []string
	var turns []*turn
	for _, m := range msgs {
		if m.Role == "system" {
			systems = append(systems, m.Content)
		}
		if k := len(turns) - 1; k >= 0 && turns[k].Role == m.Role && m.Role != "tool" {
			turns[k].Content += "\n\n" + m.Content
			continue
		}
		turns = append(turns, &turn{Role: m.Role, Content: m.Content})
	}

	var b strings.Builder
	if t.cut == nil {
		err := t.full.Execute(&b, map[string]any{
			"System":     strings.Join(systems, "\n\n"),
			"Messages":   turns,
			"Tools":      tools,
			"Response":   "",
			"Think":      false,
			"ThinkLevel": "",
			"IsThinkSet": false,
		})
		if err != nil {
			return "", fmt.Errorf("ollama: chat template: %w", err)
		}
		return b.String(), nil
	}

	var sys, prompt, response string
	exec := func(tmpl *template.Template) error {
		err := tmpl.Execute(&b, map[string]any{
			"System":     sys,
			"Prompt":     prompt,
			"Response":   response,
			"Think":      false,
			"ThinkLevel": "",
			"IsThinkSet": false,
		})
		sys, prompt, response = "", "", ""
		return err
	}
	for _, m := range turns {
		var err error
		switch m.Role {
		case "system":
			if prompt != "" || response != "" {
				err = exec(t.full)
			}
			sys = m.Content
		case "user":
			if response != "" {
				err = exec(t.full)
			}
			prompt = m.Content
		case "assistant":
			response = m.Content
		}
		if err != nil {
			return "", fmt.Errorf("ollama: chat template: %w", err)
		}
	}
	if err := exec(t.cut); err != nil {
		return "", fmt.Errorf("ollama: chat template: %w", err)
	}
	return b.String(), nil
}

func (t *Template) funcs() template.FuncMap {
	now := func() time.Time {
		if t.Now != nil {
			return t.Now()
		}
		return time.Now()
	}
	return template.FuncMap{
		"json": jsonString,
		// Ollama's take a format argument and ignore it.
		"currentDate":   func(...string) string { return now().Format("2006-01-02") },
		"yesterdayDate": func(...string) string { return now().AddDate(0, 0, -1).Format("2006-01-02") },
	}
}

// jsonString is v as JSON, "" if it has none (a template cannot handle
// an error from a printing function any better).
func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// identifiers adds to vars, lower-cased, every field and variable name
// the tree mentions: whether .Messages is among them decides how a
// template is executed, as in Ollama.
func identifiers(n parse.Node, vars map[string]bool) {
	add := func(idents []string) {
		for _, id := range idents {
			vars[strings.ToLower(id)] = true
		}
	}
	if b := branch(n); b != nil {
		identifiers(b.Pipe, vars)
		identifiers(b.List, vars)
		if b.ElseList != nil {
			identifiers(b.ElseList, vars)
		}
		return
	}
	switch n := n.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			identifiers(c, vars)
		}
	case *parse.ActionNode:
		identifiers(n.Pipe, vars)
	case *parse.TemplateNode:
		if n.Pipe != nil {
			identifiers(n.Pipe, vars)
		}
	case *parse.PipeNode:
		for _, c := range n.Cmds {
			for _, a := range c.Args {
				identifiers(a, vars)
			}
		}
	case *parse.ChainNode:
		identifiers(n.Node, vars)
		add(n.Field)
	case *parse.FieldNode:
		add(n.Ident)
	case *parse.VariableNode:
		add(n.Ident)
	}
}

// pruneAfterResponse removes from n everything after the first
// {{ .Response }} field in the order Ollama walks a template (lists in
// order, an if/range/with's body then its else, an action's arguments),
// keeping that field; it reports whether n itself stays.
func pruneAfterResponse(n parse.Node, cut *bool) bool {
	if *cut {
		return false
	}
	if b := branch(n); b != nil {
		pruneAfterResponse(b.List, cut)
		if b.ElseList != nil && !pruneAfterResponse(b.ElseList, cut) {
			b.ElseList = nil
		}
		return true
	}
	switch n := n.(type) {
	case *parse.ListNode:
		n.Nodes = slices.DeleteFunc(n.Nodes, func(c parse.Node) bool { return !pruneAfterResponse(c, cut) })
	case *parse.ActionNode:
		cmds := n.Pipe.Cmds[:0]
		for _, c := range n.Pipe.Cmds {
			c.Args = slices.DeleteFunc(c.Args, func(a parse.Node) bool { return !pruneAfterResponse(a, cut) })
			if len(c.Args) > 0 {
				cmds = append(cmds, c)
			}
		}
		n.Pipe.Cmds = cmds
		return len(cmds) > 0
	case *parse.FieldNode:
		*cut = slices.Contains(n.Ident, "Response")
	}
	return true
}

// branch is the body and else of an if, range or with node; nil for
// other nodes.
func branch(n parse.Node) *parse.BranchNode {
	switch n := n.(type) {
	case *parse.IfNode:
		return &n.BranchNode
	case *parse.RangeNode:
		return &n.BranchNode
	case *parse.WithNode:
		return &n.BranchNode
	}
	return nil
}
