// Package jinja renders chat templates the way HuggingFace transformers
// does: jinja2 3.x in an ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True and the loopcontrols extension, and
// tojson replaced by json.dumps(ensure_ascii=False). Values follow
// Python's semantics, because templates are written against them: None
// prints as "None", "a" + None is a TypeError, dict.items is a method
// before it is a key, floats print as repr does, and so on.
//
// It covers what chat templates use: {{ }}, if/elif/else, for (with else,
// a filter condition and loop.*), set (names, tuples, namespace
// attributes, blocks), macro, filter, with, break/continue, raw, comments,
// HuggingFace's {% generation %}, jinja2's built-in filters and tests,
// range, dict and namespace, and the str, dict and list methods. Not
// covered: template inheritance and includes (HuggingFace has no loader),
// {% call %}, recursive loops, and integers beyond 64 bits. Anything
// outside that is a syntax error when the template is parsed, not a
// surprise when it renders.
//
// A template cannot take the process down: ranges are capped as in the
// jinja2 sandbox, macro recursion and expression nesting are bounded, and
// no string or rendering grows past MaxOutput.
//
// The engine is ringlm's own: the Go Jinja engines (gonja, ardanlabs/jinja)
// render these templates with Go's semantics where Python's are needed,
// which changes prompts.
package jinja

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Template is a parsed template. It is safe for concurrent use.
type Template struct {
	body []node
}

// Parse parses a template. Its errors are *Error values of kind
// TemplateSyntaxError (or TemplateAssertionError for an unknown filter or
// test), with the line.
func Parse(source string) (*Template, error) {
	segs, err := lex(source)
	if err != nil {
		return nil, err
	}
	body, err := parse(segs)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Render renders the template with the given variables. Values may be
// what FromJSON returns, *Dict, *List, *Func, or Go's string, bool, int,
// int64, float64, []any, []string and nil. Errors are *Error values named
// after the Python exception jinja2 would raise.
func (t *Template) Render(vars map[string]any) (out string, err error) {
	defer func() {
		// The engine must not panic on any template or input; should it,
		// the caller gets an error rather than a dead server.
		if r := recover(); r != nil {
			out, err = "", &Error{Kind: "InternalError", Msg: fmt.Sprint(r)}
		}
	}()
	root := &scope{vars: make(map[string]any, len(vars))}
	for k, v := range vars {
		root.vars[k] = normalize(v)
	}
	ev := &evaluator{}
	var b strings.Builder
	if err = ev.exec(t.body, root, &b); err != nil {
		if errors.As(err, new(errLoop)) {
			return "", syntaxErr(0, "'break' or 'continue' outside a loop")
		}
		return "", err
	}
	return b.String(), nil
}

// normalize turns Go values into template values.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	case []any:
		items := make([]any, len(x))
		for i, it := range x {
			items[i] = normalize(it)
		}
		return newList(items)
	case []string:
		items := make([]any, len(x))
		for i, it := range x {
			items[i] = it
		}
		return newList(items)
	}
	return v
}

// RaiseException is HuggingFace's raise_exception(message): it raises
// jinja2's TemplateError with the template's own message.
func RaiseException() *Func {
	return &Func{Name: "raise_exception", Fn: func(args []any, kwargs *Dict) (any, error) {
		a, err := bind("raise_exception", args, kwargs, []string{"message"}, 1)
		if err != nil {
			return nil, err
		}
		return nil, &Error{Kind: "TemplateError", Msg: pyStr(a[0])}
	}}
}

// StrftimeNow is HuggingFace's strftime_now(format): the time now (from
// now, nil for the local clock) formatted as datetime.strftime does.
func StrftimeNow(now func() time.Time) *Func {
	if now == nil {
		now = time.Now
	}
	return &Func{Name: "strftime_now", Fn: func(args []any, kwargs *Dict) (any, error) {
		a, err := bind("strftime_now", args, kwargs, []string{"format"}, 1)
		if err != nil {
			return nil, err
		}
		format, ok := a[0].(string)
		if !ok {
			return nil, typeErr("strftime() argument 1 must be str, not %s", typeName(a[0]))
		}
		return Strftime(now(), format), nil
	}}
}

// globals are jinja2's default global functions (HuggingFace adds
// raise_exception and strftime_now through the variables).
var globals = map[string]any{
	"range": &Func{Name: "range", Fn: func(args []any, kwargs *Dict) (any, error) {
		if kwargs != nil && kwargs.Len() > 0 {
			return nil, typeErr("range() takes no keyword arguments")
		}
		var start, stop, step int64 = 0, 0, 1
		ints := make([]int64, len(args))
		for i, a := range args {
			n, _, isF, ok := number(a)
			if !ok || isF {
				return nil, typeErr("'%s' object cannot be interpreted as an integer", typeName(a))
			}
			ints[i] = n
		}
		switch len(ints) {
		case 1:
			stop = ints[0]
		case 2:
			start, stop = ints[0], ints[1]
		case 3:
			start, stop, step = ints[0], ints[1], ints[2]
		default:
			return nil, typeErr("range expected at most 3 arguments, got %d", len(args))
		}
		if step == 0 {
			return nil, valueErr("range() arg 3 must not be zero")
		}
		var items []any
		for i := start; step > 0 && i < stop || step < 0 && i > stop; i += step {
			if len(items) >= maxRange {
				return nil, &Error{Kind: "OverflowError", Msg: fmt.Sprintf("Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)}
			}
			items = append(items, i)
		}
		return &List{Items: items, view: "range", text: rangeRepr(start, stop, step)}, nil
	}},
	"dict": &Func{Name: "dict", Fn: func(args []any, kwargs *Dict) (any, error) {
		d := NewDict()
		if len(args) > 1 {
			return nil, typeErr("dict expected at most 1 argument, got %d", len(args))
		}
		if len(args) == 1 {
			src, ok := args[0].(*Dict)
			if !ok {
				return nil, typeErr("dict() argument must be a mapping")
			}
			for i, k := range src.keys {
				d.Set(k, src.vals[i])
			}
		}
		if kwargs != nil {
			for i, k := range kwargs.keys {
				d.Set(k, kwargs.vals[i])
			}
		}
		return d, nil
	}},
	"joiner": &Func{Name: "joiner", Fn: func(args []any, kwargs *Dict) (any, error) {
		a, err := bind("joiner", args, kwargs, []string{"sep"}, 0)
		if err != nil {
			return nil, err
		}
		sep := ", "
		if a[0] != absent {
			sep = pyStr(a[0])
		}
		used := false
		return &Func{Name: "joiner", Fn: func([]any, *Dict) (any, error) {
			if !used {
				used = true
				return "", nil
			}
			return sep, nil
		}}, nil
	}},
	"namespace": &Func{Name: "namespace", Fn: func(args []any, kwargs *Dict) (any, error) {
		ns := &Namespace{attrs: NewDict()}
		for _, a := range args {
			src, ok := a.(*Dict)
			if !ok {
				return nil, typeErr("namespace() arguments must be mappings")
			}
			for i, k := range src.keys {
				ns.attrs.Set(k, src.vals[i])
			}
		}
		if kwargs != nil {
			for i, k := range kwargs.keys {
				ns.attrs.Set(k, kwargs.vals[i])
			}
		}
		return ns, nil
	}},
}

func rangeRepr(start, stop, step int64) string {
	if step == 1 {
		return fmt.Sprintf("range(%d, %d)", start, stop)
	}
	return fmt.Sprintf("range(%d, %d, %d)", start, stop, step)
}

// rangeOf is the range a slice of a range is, as Python writes it: the
// stop one step past the last item.
func rangeOf(items []any, step int64) *List {
	text := "range(0, 0)"
	if len(items) > 0 {
		first := items[0].(int64)
		if len(items) > 1 {
			step = items[1].(int64) - first
		}
		text = rangeRepr(first, items[len(items)-1].(int64)+step, step)
	}
	return &List{Items: items, view: "range", text: text}
}
