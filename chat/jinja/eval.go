package jinja

import (
	"errors"
	"math"
	"strings"
)

// Limits that keep a hostile template from taking the process down. jinja2
// has the first (the sandbox's MAX_RANGE); Python's recursion limit stands
// behind the second; the third has no jinja2 twin, only memory.
const (
	maxRange      = 100_000
	maxMacroDepth = 200
	// MaxOutput bounds a rendering and any string a template builds.
	MaxOutput = 16 << 20
)

type scope struct {
	vars   map[string]any
	parent *scope
}

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

func (s *scope) set(name string, v any) {
	if s.vars == nil {
		s.vars = map[string]any{}
	}
	s.vars[name] = v
}

func child(s *scope) *scope { return &scope{parent: s} }

type evaluator struct {
	depth int // macro calls in progress
}

// errLoop carries {% break %} and {% continue %} up to their loop.
type errLoop struct{ brk bool }

func (errLoop) Error() string { return "loop control outside a loop" }

// exec runs statements, writing their output to out.
func (ev *evaluator) exec(nodes []node, sc *scope, out *strings.Builder) error {
	for _, n := range nodes {
		if err := ev.execOne(n, sc, out); err != nil {
			return err
		}
		if out.Len() > MaxOutput {
			return &Error{Kind: "OverflowError", Msg: "the rendering is larger than the limit"}
		}
	}
	return nil
}

func (ev *evaluator) execOne(n node, sc *scope, out *strings.Builder) error {
	switch n := n.(type) {
	case *textNode:
		out.WriteString(n.s)
	case *outputNode:
		v, err := ev.eval(n.x, sc)
		if err != nil {
			return atLine(err, n.line)
		}
		out.WriteString(pyStr(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := ev.eval(c, sc)
			if err != nil {
				return atLine(err, n.line)
			}
			if truthy(v) {
				return ev.exec(n.bodies[i], sc, out)
			}
		}
		return ev.exec(n.orelse, sc, out)
	case *forNode:
		return ev.execFor(n, sc, out)
	case *setNode:
		v, err := ev.eval(n.x, sc)
		if err != nil {
			return atLine(err, n.line)
		}
		if n.attr != "" {
			obj, _ := sc.lookup(n.target[0])
			ns, ok := obj.(*Namespace)
			if !ok {
				return &Error{Kind: "TemplateRuntimeError", Msg: "cannot assign attribute on non-namespace object", Line: n.line}
			}
			return atLine(ns.attrs.Set(n.attr, v), n.line)
		}
		return atLine(assign(sc, n.target, v), n.line)
	case *setBlockNode:
		v, err := ev.renderFiltered(n.body, n.filters, sc, n.line)
		if err != nil {
			return err
		}
		sc.set(n.name, v)
	case *macroNode:
		sc.set(n.m.name, &macro{macroDef: n.m, sc: sc, ev: ev})
	case *filterBlockNode:
		v, err := ev.renderFiltered(n.body, n.filters, sc, n.line)
		if err != nil {
			return err
		}
		out.WriteString(pyStr(v))
	case *withNode:
		inner := child(sc)
		for i, name := range n.names {
			v, err := ev.eval(n.vals[i], sc)
			if err != nil {
				return atLine(err, n.line)
			}
			inner.set(name, v)
		}
		return ev.exec(n.body, inner, out)
	case *scopeNode:
		return ev.exec(n.body, sc, out)
	case *loopControl:
		return errLoop{brk: n.brk}
	}
	return nil
}

// assign binds names to v, unpacking v when there are several.
func assign(sc *scope, names []string, v any) error {
	if len(names) == 1 {
		sc.set(names[0], v)
		return nil
	}
	items, err := iterate(v)
	if err != nil {
		return typeErr("cannot unpack non-iterable %s object", typeName(v))
	}
	if len(items) < len(names) {
		return valueErr("not enough values to unpack (expected %d, got %d)", len(names), len(items))
	}
	if len(items) > len(names) {
		return valueErr("too many values to unpack (expected %d)", len(names))
	}
	for i, name := range names {
		sc.set(name, items[i])
	}
	return nil
}

func (ev *evaluator) execFor(n *forNode, sc *scope, out *strings.Builder) error {
	seq, err := ev.eval(n.iter, sc)
	if err != nil {
		return atLine(err, n.line)
	}
	items, err := iterate(seq)
	if err != nil {
		return atLine(err, n.line)
	}
	if n.cond != nil {
		// The filter runs before the loop, so loop.length counts what passes.
		var kept []any
		for _, it := range items {
			inner := child(sc)
			if err := assign(inner, n.target, it); err != nil {
				return atLine(err, n.line)
			}
			v, err := ev.eval(n.cond, inner)
			if err != nil {
				return atLine(err, n.line)
			}
			if truthy(v) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return ev.exec(n.orelse, sc, out)
	}
	loop := &loopState{items: items}
	for i, it := range items {
		// Each pass gets a fresh scope: what the body sets does not outlive
		// the pass, as in jinja2.
		inner := child(sc)
		loop.index = i
		inner.set("loop", loop)
		if err := assign(inner, n.target, it); err != nil {
			return atLine(err, n.line)
		}
		err := ev.exec(n.body, inner, out)
		var lc errLoop
		if errors.As(err, &lc) {
			if lc.brk {
				break
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// atLine records where an error happened, unless it already says.
func atLine(err error, line int) error {
	var e *Error
	if errors.As(err, &e) && e.Line == 0 {
		e.Line = line
	}
	return err
}

func (ev *evaluator) eval(x expr, sc *scope) (any, error) {
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(x.name); ok {
			return v, nil
		}
		if v, ok := globals[x.name]; ok {
			return v, nil
		}
		return undefinedName(x.name), nil
	case *listExpr:
		items := make([]any, len(x.items))
		for i, it := range x.items {
			v, err := ev.eval(it, sc)
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return &List{Items: items, Tuple: x.tuple}, nil
	case *dictExpr:
		d := NewDict()
		for i := range x.keys {
			k, err := ev.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := ev.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			if err := d.Set(k, v); err != nil {
				return nil, err
			}
		}
		return d, nil
	case *attrExpr:
		obj, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return getattr(obj, x.name)
	case *itemExpr:
		obj, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		key, err := ev.eval(x.key, sc)
		if err != nil {
			return nil, err
		}
		return getitem(obj, key)
	case *sliceExpr:
		return ev.evalSlice(x, sc)
	case *callExpr:
		fn, err := ev.eval(x.fn, sc)
		if err != nil {
			return nil, err
		}
		args, kwargs, err := ev.evalArgs(x.args, sc)
		if err != nil {
			return nil, err
		}
		return call(fn, args, kwargs)
	case *filterExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return ev.applyFilter(x, v, sc)
	case *testExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		args, kwargs, err := ev.evalArgs(x.args, sc)
		if err != nil {
			return nil, err
		}
		ok, err := tests[x.name](v, args, kwargs)
		if err != nil {
			return nil, err
		}
		return ok != x.negate, nil
	case *binExpr:
		l, err := ev.eval(x.l, sc)
		if err != nil {
			return nil, err
		}
		switch x.op { // and/or return an operand, evaluating the right one only when needed
		case "and":
			if !truthy(l) {
				return l, nil
			}
			return ev.eval(x.r, sc)
		case "or":
			if truthy(l) {
				return l, nil
			}
			return ev.eval(x.r, sc)
		}
		r, err := ev.eval(x.r, sc)
		if err != nil {
			return nil, err
		}
		return binop(x.op, l, r)
	case *unaryExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "not":
			return !truthy(v), nil
		case "-":
			i, f, isF, ok := number(v)
			switch {
			case !ok:
				if u, ok := v.(Undefined); ok {
					return nil, u.err()
				}
				return nil, typeErr("bad operand type for unary -: '%s'", typeName(v))
			case isF:
				return -f, nil
			case i == math.MinInt64:
				return nil, &Error{Kind: "OverflowError", Msg: "integer overflow"}
			}
			return -i, nil
		default:
			i, f, isF, ok := number(v)
			switch {
			case !ok:
				if u, ok := v.(Undefined); ok {
					return nil, u.err()
				}
				return nil, typeErr("bad operand type for unary +: '%s'", typeName(v))
			case isF:
				return f, nil
			}
			return i, nil
		}
	case *compareExpr:
		l, err := ev.eval(x.first, sc)
		if err != nil {
			return nil, err
		}
		for i, op := range x.ops {
			r, err := ev.eval(x.rest[i], sc)
			if err != nil {
				return nil, err
			}
			ok, err := compareOp(op, l, r)
			if err != nil {
				return nil, err
			}
			if !ok {
				return false, nil
			}
			l = r
		}
		return true, nil
	case *condExpr:
		c, err := ev.eval(x.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return ev.eval(x.then, sc)
		}
		if x.orelse == nil {
			return Undefined{hint: "the inline if-expression on line evaluated to false and no else section was defined."}, nil
		}
		return ev.eval(x.orelse, sc)
	}
	return nil, &Error{Kind: "TemplateRuntimeError", Msg: "unknown expression"}
}

func compareOp(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	c, err := compare(l, r, op)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// evalArgs evaluates call arguments, spreading *args and **kwargs.
func (ev *evaluator) evalArgs(a callArgs, sc *scope) ([]any, *Dict, error) {
	var args []any
	for _, x := range a.pos {
		v, err := ev.eval(x, sc)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	if a.star != nil {
		v, err := ev.eval(a.star, sc)
		if err != nil {
			return nil, nil, err
		}
		items, err := iterate(v)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, items...)
	}
	var kwargs *Dict
	if len(a.kwNames) > 0 || a.dstar != nil {
		kwargs = NewDict()
	}
	for i, name := range a.kwNames {
		v, err := ev.eval(a.kwVals[i], sc)
		if err != nil {
			return nil, nil, err
		}
		kwargs.Set(name, v)
	}
	if a.dstar != nil {
		v, err := ev.eval(a.dstar, sc)
		if err != nil {
			return nil, nil, err
		}
		d, ok := v.(*Dict)
		if !ok {
			return nil, nil, typeErr("argument after ** must be a mapping, not %s", typeName(v))
		}
		for i, k := range d.keys {
			kwargs.Set(k, d.vals[i])
		}
	}
	return args, kwargs, nil
}

func (ev *evaluator) evalSlice(x *sliceExpr, sc *scope) (any, error) {
	obj, err := ev.eval(x.x, sc)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, b := range []expr{x.start, x.stop, x.step} {
		if b == nil {
			continue
		}
		v, err := ev.eval(b, sc)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		n, _, isF, ok := number(v)
		if !ok || isF {
			return nil, typeErr("slice indices must be integers or None or have an __index__ method")
		}
		bounds[i] = &n
	}
	step := int64(1)
	if bounds[2] != nil {
		step = *bounds[2]
		if step == 0 {
			return nil, valueErr("slice step cannot be zero")
		}
	}
	pick := func(n int) []int {
		start, stop := sliceBounds(n, bounds[0], bounds[1], step)
		var idx []int
		for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += int(step) {
			idx = append(idx, i)
		}
		return idx
	}
	switch o := obj.(type) {
	case string:
		runes := []rune(o)
		var b strings.Builder
		for _, i := range pick(len(runes)) {
			b.WriteRune(runes[i])
		}
		return b.String(), nil
	case *List:
		if o.view != "" && o.view != "range" {
			break
		}
		idx := pick(len(o.Items))
		items := make([]any, len(idx))
		for k, i := range idx {
			items[k] = o.Items[i]
		}
		if o.view == "range" {
			return rangeOf(items, step), nil
		}
		return &List{Items: items, Tuple: o.Tuple}, nil
	case Undefined:
		return nil, o.err()
	case *Dict:
		return nil, typeErr("unhashable type: 'slice'")
	}
	// A slice is Python's own subscript, not the sandbox's getitem: an
	// object without one raises.
	return nil, typeErr("'%s' object is not subscriptable", typeName(obj))
}

// sliceBounds is Python's slice.indices for a sequence of length n.
func sliceBounds(n int, start, stop *int64, step int64) (int, int) {
	clamp := func(v *int64, def int, lo, hi int) int {
		if v == nil {
			return def
		}
		i := int(*v)
		if i < 0 {
			i += n
		}
		return min(max(i, lo), hi)
	}
	if step > 0 {
		return clamp(start, 0, 0, n), clamp(stop, n, 0, n)
	}
	return clamp(start, n-1, -1, n-1), clamp(stop, -1, -1, n-1)
}

// getattr is the sandbox's attribute lookup (x.name): the object's
// attribute (a dict's methods come first), else its item, else Undefined.
// Methods that would change a list or dict are unsafe in the immutable
// sandbox: they look up as an Undefined that raises SecurityError.
func getattr(obj any, name string) (any, error) {
	if u, ok := obj.(Undefined); ok {
		return nil, u.err()
	}
	if v, ok, err := attribute(obj, name); ok || err != nil {
		return v, err
	}
	if v, ok := item(obj, name); ok {
		return v, nil
	}
	return undefinedAttr(obj, name), nil
}

// getitem is the sandbox's subscript (x[key]): the item, else for a string
// key the attribute, else Undefined.
func getitem(obj, key any) (any, error) {
	if u, ok := obj.(Undefined); ok {
		return nil, u.err()
	}
	if v, ok := item(obj, key); ok {
		return v, nil
	}
	if name, ok := key.(string); ok {
		if v, ok, err := attribute(obj, name); ok || err != nil {
			return v, err
		}
	}
	if _, ok := key.(Undefined); ok {
		return Undefined{hint: "'" + typeName(obj) + " object' has no attribute 'Undefined'"}, nil
	}
	return Undefined{hint: "'" + typeName(obj) + " object' has no attribute " + pyRepr(key)}, nil
}

func item(obj, key any) (any, bool) {
	switch o := obj.(type) {
	case *Dict:
		return o.Get(key)
	case *List, string:
		i, _, isF, ok := number(key)
		if !ok || isF {
			return nil, false
		}
		if l, isList := o.(*List); isList {
			if l.view != "" && l.view != "range" {
				return nil, false // dict views are not subscriptable
			}
			n := int64(len(l.Items))
			if i < 0 {
				i += n
			}
			if i < 0 || i >= n {
				return nil, false
			}
			return l.Items[i], true
		}
		runes := []rune(o.(string))
		n := int64(len(runes))
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return nil, false
		}
		return string(runes[i]), true
	}
	return nil, false
}

// call calls a function, method or macro.
func call(fn any, args []any, kwargs *Dict) (any, error) {
	switch f := fn.(type) {
	case *Func:
		return f.Fn(args, kwargs)
	case *macro:
		return f.call(args, kwargs)
	case *loopState:
		return nil, typeErr("recursive loops are not supported")
	case Undefined:
		return nil, f.err()
	}
	return nil, typeErr("'%s' object is not callable", typeName(fn))
}

// macro is a {% macro %} bound to the scope it was defined in: it sees
// that scope as it is when called, as a jinja2 macro does.
type macro struct {
	*macroDef
	sc *scope
	ev *evaluator
}

func (m *macro) call(args []any, kwargs *Dict) (any, error) {
	if m.ev.depth >= maxMacroDepth {
		return nil, &Error{Kind: "RecursionError", Msg: "maximum recursion depth exceeded in macro " + m.name}
	}
	m.ev.depth++
	defer func() { m.ev.depth-- }()
	sc := child(m.sc)
	if len(args) > len(m.params) && !m.varargs {
		return nil, typeErr("macro '%s' takes not more than %d argument(s)", m.name, len(m.params))
	}
	extra := NewDict()
	if kwargs != nil {
		for i, k := range kwargs.keys {
			name, _ := k.(string)
			found := false
			for j, p := range m.params {
				if p == name {
					if j < len(args) {
						return nil, typeErr("macro '%s' got multiple values for argument '%s'", m.name, name)
					}
					found = true
				}
			}
			if !found {
				if !m.kwargs {
					return nil, typeErr("macro '%s' takes no keyword argument '%s'", m.name, name)
				}
				extra.Set(k, kwargs.vals[i])
			}
		}
	}
	for i, p := range m.params {
		switch {
		case i < len(args):
			sc.set(p, args[i])
		case kwargs != nil && hasKey(kwargs, p):
			v, _ := kwargs.Get(p)
			sc.set(p, v)
		case m.defaults[i] != nil:
			v, err := m.ev.eval(m.defaults[i], sc)
			if err != nil {
				return nil, err
			}
			sc.set(p, v)
		default:
			sc.set(p, Undefined{hint: "parameter '" + p + "' was not provided"})
		}
	}
	if m.varargs {
		var rest []any
		if len(args) > len(m.params) {
			rest = args[len(m.params):]
		}
		sc.set("varargs", newTuple(rest...))
	}
	if m.kwargs {
		sc.set("kwargs", extra)
	}
	var b strings.Builder
	err := m.ev.exec(m.body, sc, &b)
	var lc errLoop
	if errors.As(err, &lc) {
		return nil, &Error{Kind: "TemplateSyntaxError", Msg: "'break' or 'continue' outside a loop"}
	}
	if err != nil {
		return nil, err
	}
	return b.String(), nil
}

func hasKey(d *Dict, k any) bool {
	_, ok := d.Get(k)
	return ok
}

// loopState is a for loop's `loop` variable.
type loopState struct {
	items []any
	index int
}

func (l *loopState) attr(name string) (any, bool) {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index + 1), true
	case "index0":
		return int64(l.index), true
	case "revindex":
		return int64(n - l.index), true
	case "revindex0":
		return int64(n - l.index - 1), true
	case "first":
		return l.index == 0, true
	case "last":
		return l.index == n-1, true
	case "length":
		return int64(n), true
	case "depth":
		return int64(1), true
	case "depth0":
		return int64(0), true
	case "previtem":
		if l.index == 0 {
			return Undefined{hint: "there is no previous item"}, true
		}
		return l.items[l.index-1], true
	case "nextitem":
		if l.index == n-1 {
			return Undefined{hint: "there is no next item"}, true
		}
		return l.items[l.index+1], true
	case "cycle":
		idx := l.index
		return &Func{Name: "cycle", Fn: func(args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, typeErr("no items for cycling given")
			}
			return args[idx%len(args)], nil
		}}, true
	}
	return nil, false
}

// renderFiltered renders body in a child scope and passes the text through
// filters in order: the value of {% set x %}…{% endset %} and of a
// {% filter %} block.
func (ev *evaluator) renderFiltered(body []node, filters []*filterExpr, sc *scope, line int) (any, error) {
	var b strings.Builder
	if err := ev.exec(body, child(sc), &b); err != nil {
		return nil, err
	}
	var v any = b.String()
	for _, f := range filters {
		var err error
		if v, err = ev.applyFilter(f, v, sc); err != nil {
			return nil, atLine(err, line)
		}
	}
	return v, nil
}
