package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Values are Go values standing for Python's:
//
//	nil         None
//	Undefined   jinja2's Undefined (a missing variable, attribute or item)
//	bool        bool
//	int64       int
//	float64     float
//	string      str
//	*List       list, or tuple when Tuple is set (or a dict view, or a range)
//	*Dict       dict, keeping insertion order
//	*iterator   a generator or reversed() iterator: what map, select,
//	            unique, items, reverse... return
//	*Namespace  namespace()
//	*Func       a function or bound method (globals, str/dict methods)
//	*macro      a {% macro %}
//	*loopState  a for loop's `loop`
//
// Lists and dicts are never changed after they are built: the sandbox
// HuggingFace renders in (ImmutableSandboxedEnvironment) refuses every
// method that would change one, so values are shared freely.

// Undefined is jinja2's default Undefined: empty when printed, false,
// iterable as nothing, and an UndefinedError for anything else.
type Undefined struct {
	hint string // the UndefinedError message
	kind string // the error kind it raises when used: UndefinedError, or SecurityError for an unsafe attribute
}

func undefinedName(name string) Undefined {
	return Undefined{hint: fmt.Sprintf("'%s' is undefined", name)}
}

func undefinedAttr(obj any, name string) Undefined {
	return Undefined{hint: fmt.Sprintf("'%s object' has no attribute '%s'", typeName(obj), name)}
}

func (u Undefined) err() *Error {
	if u.kind != "" {
		return &Error{Kind: u.kind, Msg: u.hint}
	}
	hint := u.hint
	if hint == "" {
		hint = "value is undefined"
	}
	return &Error{Kind: "UndefinedError", Msg: hint}
}

// List is a Python list, or a tuple when Tuple is set.
type List struct {
	Items []any
	Tuple bool
	// view names what else the items stand for: dict_items, dict_keys or
	// dict_values (a dict's methods), or range; text is a range's repr.
	// Those print, subscript and serialise as Python's do.
	view, text string
}

// iterator is a one-pass iterator: a generator (the map, select, reject,
// selectattr, rejectattr, unique, batch, slice and items filters) or a
// reversed() iterator. Its items are computed when it is made; an error
// met doing so is raised only when iteration reaches it, as a Python
// generator raises it. It is always true, has no length, and is empty once
// iterated.
type iterator struct {
	kind  string // its Python type: generator, list_reverseiterator, ...
	fn    string // the generator function, for its repr
	items []any
	err   error
	pos   int
}

func newGenerator(fn string, items []any, err error) *iterator {
	return &iterator{kind: "generator", fn: fn, items: items, err: err}
}

// next returns the next item; ok is false at the end, err when the
// generator raised there.
func (it *iterator) next() (v any, ok bool, err error) {
	if it.pos < len(it.items) {
		it.pos++
		return it.items[it.pos-1], true, nil
	}
	err, it.err = it.err, nil
	return nil, false, err
}

// Dict is a Python dict: keys are hashable values, in insertion order.
type Dict struct {
	keys  []any
	vals  []any
	index map[hashKey]int
}

type hashKey struct {
	kind byte // 's' string, 'n' number (ints, bools and integral floats alike), 'f' float, 'z' None, 't' tuple, 'u' Undefined, 'p' an object by identity
	s    string
	n    int64
	f    float64
}

// NewDict returns an empty dict.
func NewDict() *Dict { return &Dict{index: map[hashKey]int{}} }

func keyOf(k any) (hashKey, error) {
	switch k := k.(type) {
	case string:
		return hashKey{kind: 's', s: k}, nil
	case bool:
		if k {
			return hashKey{kind: 'n', n: 1}, nil
		}
		return hashKey{kind: 'n'}, nil
	case int64:
		return hashKey{kind: 'n', n: k}, nil
	case float64:
		if k == math.Trunc(k) && math.Abs(k) < 1<<62 {
			return hashKey{kind: 'n', n: int64(k)}, nil
		}
		return hashKey{kind: 'f', f: k}, nil
	case nil:
		return hashKey{kind: 'z'}, nil
	case *List:
		if k.Tuple {
			return hashKey{kind: 't', s: pyRepr(k)}, nil
		}
	case Undefined:
		return hashKey{kind: 'u'}, nil
	case *iterator, *Namespace, *Func, *macro, *loopState:
		return hashKey{kind: 'p', s: fmt.Sprintf("%p", k)}, nil // hashable by identity
	}
	return hashKey{}, &Error{Kind: "TypeError", Msg: fmt.Sprintf("unhashable type: '%s'", typeName(k))}
}

// Set adds or replaces the value for key k (a new key goes last).
func (d *Dict) Set(k, v any) error {
	h, err := keyOf(k)
	if err != nil {
		return err
	}
	if i, ok := d.index[h]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[h] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// Get returns the value for key k.
func (d *Dict) Get(k any) (any, bool) {
	h, err := keyOf(k)
	if err != nil {
		return nil, false
	}
	i, ok := d.index[h]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// Namespace is jinja2's namespace(): the one object a template may assign
// attributes on ({% set ns.x = ... %}).
type Namespace struct{ attrs *Dict }

// Func is a function a template can call: a global such as
// raise_exception, or a bound method such as "text".strip.
type Func struct {
	Name string
	Fn   func(args []any, kwargs *Dict) (any, error)
	self string // the Python type of the bound object, for messages
}

// Error is a template error: a syntax error when a template is parsed, or
// the Python exception jinja2 would raise while rendering it. Kind is the
// exception's class name (TemplateSyntaxError, TemplateError for
// raise_exception, UndefinedError, TypeError, ValueError, ...).
type Error struct {
	Kind string
	Msg  string
	Line int // 0 when unknown
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Kind, e.Msg)
	}
	return e.Kind + ": " + e.Msg
}

func syntaxErr(line int, format string, args ...any) *Error {
	return &Error{Kind: "TemplateSyntaxError", Msg: fmt.Sprintf(format, args...), Line: line}
}

func typeErr(format string, args ...any) *Error {
	return &Error{Kind: "TypeError", Msg: fmt.Sprintf(format, args...)}
}

func valueErr(format string, args ...any) *Error {
	return &Error{Kind: "ValueError", Msg: fmt.Sprintf(format, args...)}
}

// typeName is Python's type(v).__name__.
func typeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *List:
		switch {
		case v.view != "":
			return v.view
		case v.Tuple:
			return "tuple"
		}
		return "list"
	case *iterator:
		return v.kind
	case *Dict:
		return "dict"
	case *Namespace:
		return "Namespace"
	case *Func:
		return "builtin_function_or_method"
	case *macro:
		return "Macro"
	case *loopState:
		return "LoopContext"
	}
	return fmt.Sprintf("%T", v)
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch v := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case string:
		return v != ""
	case *List:
		return len(v.Items) > 0
	case *Dict:
		return v.Len() > 0
	}
	return true
}

// pyStr is Python's str(v), as {{ v }} prints it.
func pyStr(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case Undefined:
		return ""
	}
	return pyRepr(v)
}

// pyRepr is Python's repr(v).
func pyRepr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, nil)
	return b.String()
}

// writeRepr writes repr(v). seen holds the dicts being written: a
// namespace can hold itself, and Python writes the repeat as {...}.
func writeRepr(b *strings.Builder, v any, seen map[*Dict]bool) {
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case Undefined:
		// jinja2's Undefined has no repr of its own worth matching; "Undefined" is what it prints.
		b.WriteString("Undefined")
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(floatRepr(v))
	case string:
		writeStrRepr(b, v)
	case *List:
		if v.view == "range" {
			b.WriteString(v.text)
			return
		}
		open, close := "[", "]"
		switch {
		case v.view != "":
			open, close = v.view+"([", "])"
		case v.Tuple:
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, x := range v.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x, seen)
		}
		if v.Tuple && len(v.Items) == 1 {
			b.WriteByte(',')
		}
		b.WriteString(close)
	case *Dict:
		if seen[v] {
			b.WriteString("{...}")
			return
		}
		if seen == nil {
			seen = map[*Dict]bool{}
		}
		seen[v] = true
		defer delete(seen, v)
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, k, seen)
			b.WriteString(": ")
			writeRepr(b, v.vals[i], seen)
		}
		b.WriteByte('}')
	case *Namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, v.attrs, seen)
		b.WriteByte('>')
	case *Func:
		fmt.Fprintf(b, "<built-in method %s>", v.Name)
	case *macro:
		fmt.Fprintf(b, "<Macro '%s'>", v.name)
	case *loopState:
		fmt.Fprintf(b, "<LoopContext %d/%d>", v.index+1, len(v.items))
	case *iterator:
		// Python shows the object's address, which no rendering can match;
		// the rest is as Python writes it.
		if v.fn != "" {
			fmt.Fprintf(b, "<generator object %s at 0x7f0000000000>", v.fn)
		} else {
			fmt.Fprintf(b, "<%s object at 0x7f0000000000>", v.kind)
		}
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

// writeStrRepr quotes s as Python's repr: single quotes unless s holds a
// single quote and no double quote, printable characters as they are.
func writeStrRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError:
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x7f || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
}

// floatRepr is Python's repr(float): the shortest digits that round-trip,
// positional when the decimal exponent is in [-4, 16), else scientific
// with a signed two-digit exponent; integral values keep ".0".
func floatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // digits are 0.d1d2... × 10^decpt
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			return sign + digits[:decpt] + "." + digits[decpt:]
		}
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es, exp = "-", -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
}

// parsePyFloat parses a float literal; out-of-range values are ±inf as in
// Python.
func parsePyFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, nil
		}
		return 0, err
	}
	return f, nil
}

// isPySpace is Python's str.isspace for one character: Unicode white space
// plus the information separators U+001C to U+001F.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}

func isAllSpace(s string) bool {
	for _, r := range s {
		if !isPySpace(r) {
			return false
		}
	}
	return true
}

func lstripSpace(s string) string { return strings.TrimLeftFunc(s, isPySpace) }
func rstripSpace(s string) string { return strings.TrimRightFunc(s, isPySpace) }

// RStrip is Python's str.rstrip(): s without trailing whitespace.
func RStrip(s string) string { return rstripSpace(s) }

// number returns v as a Python number: bools are ints.
func number(v any) (i int64, f float64, isFloat, ok bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return 1, 0, false, true
		}
		return 0, 0, false, true
	case int64:
		return v, 0, false, true
	case float64:
		return 0, v, true, true
	}
	return 0, 0, false, false
}

func toFloat(v any) float64 {
	i, f, isF, _ := number(v)
	if isF {
		return f
	}
	return float64(i)
}

// equal is Python's ==.
func equal(a, b any) bool {
	if ai, af, aF, ok := number(a); ok {
		bi, bf, bF, ok := number(b)
		if !ok {
			return false
		}
		if !aF && !bF {
			return ai == bi
		}
		if !aF {
			af = float64(ai)
		}
		if !bF {
			bf = float64(bi)
		}
		return af == bf
	}
	switch a := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case *List:
		bl, ok := b.(*List)
		if !ok || a.Tuple != bl.Tuple || a.view != bl.view || len(a.Items) != len(bl.Items) {
			return false
		}
		switch a.view {
		case "dict_values":
			return a == bl
		case "dict_keys", "dict_items": // set equality
			for _, x := range a.Items {
				if ok, _ := contains(bl, x); !ok {
					return false
				}
			}
			return true
		}
		for i := range a.Items {
			if !equal(a.Items[i], bl.Items[i]) {
				return false
			}
		}
		return true
	case *Dict:
		bd, ok := b.(*Dict)
		if !ok || a.Len() != bd.Len() {
			return false
		}
		for i, k := range a.keys {
			v, ok := bd.Get(k)
			if !ok || !equal(a.vals[i], v) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare is Python's ordering for <, <=, >, >=: -1, 0 or 1, or a
// TypeError for values Python does not order.
func compare(a, b any, op string) (int, error) {
	if ai, af, aF, ok := number(a); ok {
		if bi, bf, bF, ok := number(b); ok {
			if !aF && !bF {
				return cmp3(ai < bi, ai > bi), nil
			}
			if !aF {
				af = float64(ai)
			}
			if !bF {
				bf = float64(bi)
			}
			return cmp3(af < bf, af > bf), nil
		}
	}
	if _, ok := a.(Undefined); ok {
		return 0, a.(Undefined).err()
	}
	if _, ok := b.(Undefined); ok {
		return 0, b.(Undefined).err()
	}
	switch a := a.(type) {
	case string:
		if bs, ok := b.(string); ok {
			return strings.Compare(a, bs), nil // UTF-8 byte order is code point order
		}
	case *List:
		if bl, ok := b.(*List); ok && a.Tuple == bl.Tuple {
			for i := 0; i < len(a.Items) && i < len(bl.Items); i++ {
				if equal(a.Items[i], bl.Items[i]) {
					continue
				}
				return compare(a.Items[i], bl.Items[i], op)
			}
			return cmp3(len(a.Items) < len(bl.Items), len(a.Items) > len(bl.Items)), nil
		}
	}
	return 0, typeErr("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

// iterate returns the items a for loop over v sees: a list's items, a
// string's characters, a dict's keys; nothing for Undefined.
func iterate(v any) ([]any, error) {
	switch v := v.(type) {
	case *List:
		return v.Items, nil
	case *iterator:
		items := v.items[v.pos:]
		v.pos = len(v.items)
		err := v.err
		v.err = nil
		return items, err
	case string:
		out := make([]any, 0, len(v))
		for _, r := range v {
			out = append(out, string(r))
		}
		return out, nil
	case *Dict:
		return append([]any(nil), v.keys...), nil
	case Undefined:
		if v.kind != "" {
			return nil, v.err()
		}
		return nil, nil
	}
	return nil, typeErr("'%s' object is not iterable", typeName(v))
}

// length is Python's len(v); Undefined has length 0.
func length(v any) (int, error) {
	switch v := v.(type) {
	case string:
		return utf8.RuneCountInString(v), nil
	case *List:
		return len(v.Items), nil
	case *Dict:
		return v.Len(), nil
	case Undefined:
		return 0, nil
	}
	return 0, typeErr("object of type '%s' has no len()", typeName(v))
}

// contains is Python's `item in container`.
func contains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, typeErr("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case *List:
		for _, x := range c.Items {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case *iterator:
		// Python's `in` consumes a generator up to the first match.
		for {
			x, ok, err := c.next()
			if err != nil || !ok {
				return false, err
			}
			if equal(x, item) {
				return true, nil
			}
		}
	case *Dict:
		if _, err := keyOf(item); err != nil {
			return false, err
		}
		_, ok := c.Get(item)
		return ok, nil
	case Undefined:
		return false, nil
	}
	return false, typeErr("argument of type '%s' is not iterable", typeName(container))
}

func newList(items []any) *List   { return &List{Items: items} }
func newTuple(items ...any) *List { return &List{Items: items, Tuple: true} }
