package jinja

import (
	"fmt"
	"html"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// filterFunc is a filter: the value, then the call's arguments.
type filterFunc func(ev *evaluator, v any, args []any, kwargs *Dict) (any, error)

// filters are jinja2's built-in filters that chat templates use, with
// HuggingFace's tojson in place of jinja2's.
var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs":         fAbs,
		"attr":        fAttr,
		"batch":       fBatch,
		"capitalize":  strFilter(pyCapitalize),
		"center":      fCenter,
		"count":       fLength,
		"d":           fDefault,
		"default":     fDefault,
		"dictsort":    fDictsort,
		"e":           fEscape,
		"escape":      fEscape,
		"first":       fFirst,
		"float":       fFloat,
		"forceescape": fEscape,
		"format":      fFormat,
		"groupby":     fGroupby,
		"indent":      fIndent,
		"int":         fInt,
		"items":       fItems,
		"join":        fJoin,
		"last":        fLast,
		"length":      fLength,
		"list":        fList,
		"lower":       strFilter(pyLower),
		"map":         fMap,
		"max":         fMinMax(true),
		"min":         fMinMax(false),
		"reject":      fSelect(false, false),
		"rejectattr":  fSelect(false, true),
		"replace":     fReplace,
		"reverse":     fReverse,
		"round":       fRound,
		"safe":        fSafe,
		"select":      fSelect(true, false),
		"selectattr":  fSelect(true, true),
		"slice":       fSlice,
		"sort":        fSort,
		"string":      fString,
		"striptags":   fStriptags,
		"sum":         fSum,
		"title":       strFilter(jinjaTitle),
		"tojson":      fToJSON,
		"trim":        fTrim,
		"truncate":    fTruncate,
		"unique":      fUnique,
		"upper":       strFilter(pyUpper),
		"wordcount":   fWordcount,
	}
}

func (ev *evaluator) applyFilter(f *filterExpr, v any, sc *scope) (any, error) {
	args, kwargs, err := ev.evalArgs(f.args, sc)
	if err != nil {
		return nil, err
	}
	out, err := filters[f.name](ev, v, args, kwargs)
	return out, atLine(err, f.line)
}

// strFilter applies a string function to str(value), as jinja2's string
// filters do (so None|upper is "NONE").
func strFilter(fn func(string) string) filterFunc {
	return func(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
		if _, err := bind("filter", args, kwargs, nil, 0); err != nil {
			return nil, err
		}
		return fn(pyStr(v)), nil
	}
}

var wordBeginning = regexp.MustCompile(`([-\s({\[<]+)`)

// jinjaTitle is jinja2's title filter (not str.title): each word starts
// upper case after a space, dash or opening bracket, the rest is lowered.
func jinjaTitle(s string) string {
	var b strings.Builder
	last := 0
	emit := func(part string) {
		if part == "" {
			return
		}
		r, n := utf8.DecodeRuneInString(part)
		b.WriteString(pyUpper(string(r)) + pyLower(part[n:]))
	}
	for _, m := range wordBeginning.FindAllStringIndex(s, -1) {
		emit(s[last:m[0]])
		emit(s[m[0]:m[1]])
		last = m[1]
	}
	emit(s[last:])
	return b.String()
}

func fTrim(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("trim", args, kwargs, []string{"chars"}, 0)
	if err != nil {
		return nil, err
	}
	return pyStrip(pyStr(v), a[0], true, true)
}

func fLength(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	n, err := length(v)
	return int64(n), err
}

func fDefault(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("default", args, kwargs, []string{"default_value", "boolean"}, 0)
	if err != nil {
		return nil, err
	}
	if a[0] == absent {
		a[0] = ""
	}
	_, undef := v.(Undefined)
	if undef || a[1] != absent && truthy(a[1]) && !truthy(v) {
		return a[0], nil
	}
	return v, nil
}

func fFirst(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	if it, ok := v.(*iterator); ok { // takes one item, as Python's next() does
		x, ok, err := it.next()
		if err != nil || ok {
			return x, err
		}
		return Undefined{hint: "No first item, sequence was empty."}, nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{hint: "No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

// fLast is next(reversed(seq)): iterators are not reversible.
func fLast(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	if _, ok := v.(*iterator); ok {
		return nil, typeErr("'%s' object is not reversible", typeName(v))
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{hint: "No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

func fList(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return newList(append([]any{}, items...)), nil
}

func fJoin(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("join", args, kwargs, []string{"d", "attribute"}, 0)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	sep := ""
	if a[0] != absent {
		sep = pyStr(a[0])
	}
	parts := make([]string, len(items))
	for i, it := range items {
		if a[1] != absent {
			if it, err = attrPath(it, a[1]); err != nil {
				return nil, err
			}
		}
		parts[i] = pyStr(it)
	}
	return limitStr(strings.Join(parts, sep))
}

// attrPath looks up a filter's attribute= argument: "a.b" or an index.
func attrPath(v any, attr any) (any, error) {
	s, ok := attr.(string)
	if !ok {
		return getitem(v, attr)
	}
	for _, part := range strings.Split(s, ".") {
		var key any = part
		if n, err := strconv.ParseInt(part, 10, 64); err == nil {
			key = n
		}
		var err error
		if v, err = getitem(v, key); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// fMap is jinja2's map: a generator of each item through a filter, or of
// an attribute of each item. A false value maps to nothing.
func fMap(ev *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	var fn func(any) (any, error)
	if len(args) == 0 && kwargs != nil && hasKey(kwargs, "attribute") {
		attr, _ := kwargs.Get("attribute")
		def, hasDef := kwargs.Get("default")
		fn = func(it any) (any, error) {
			x, err := attrPath(it, attr)
			if _, undef := x.(Undefined); undef && hasDef {
				x = def
			}
			return x, err
		}
	} else {
		if len(args) == 0 {
			return nil, &Error{Kind: "FilterArgumentError", Msg: "map requires a filter argument"}
		}
		name, ok := args[0].(string)
		f, known := filters[name]
		if !ok || !known {
			return nil, &Error{Kind: "TemplateRuntimeError", Msg: "No filter named " + pyRepr(args[0]) + "."}
		}
		rest := args[1:]
		fn = func(it any) (any, error) { return f(ev, it, rest, kwargs) }
	}
	return generate("sync_do_map", v, true, func(it any) (any, bool, error) {
		x, err := fn(it)
		return x, true, err
	}), nil
}

// generate makes a generator over v's items, as jinja2's filters written
// as Python generators behave: each item through fn (which may drop it),
// and an error (v not iterable, fn failing) kept until iteration reaches
// it. With guard, a false v yields nothing (jinja2's "if value:").
func generate(name string, v any, guard bool, fn func(any) (any, bool, error)) *iterator {
	if guard && !truthy(v) {
		return newGenerator(name, nil, nil)
	}
	items, err := iterate(v)
	var out []any
	for _, it := range items {
		x, keep, ferr := fn(it)
		if ferr != nil {
			return newGenerator(name, out, ferr)
		}
		if keep {
			out = append(out, x)
		}
	}
	return newGenerator(name, out, err)
}

// fSelect makes select, reject, selectattr and rejectattr: generators of
// the items that pass (or fail) a test.
func fSelect(keep, byAttr bool) filterFunc {
	return func(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
		var attr any
		if byAttr {
			if len(args) == 0 {
				return nil, &Error{Kind: "FilterArgumentError", Msg: "Missing parameter for attribute name"}
			}
			attr, args = args[0], args[1:]
		}
		test := func(x any) (bool, error) { return truthy(x), nil }
		if len(args) > 0 {
			name, _ := args[0].(string)
			t, ok := tests[name]
			if !ok {
				return nil, &Error{Kind: "TemplateRuntimeError", Msg: "No test named " + pyRepr(args[0]) + "."}
			}
			rest := args[1:]
			test = func(x any) (bool, error) { return t(x, rest, kwargs) }
		}
		return generate("select_or_reject", v, true, func(it any) (any, bool, error) {
			x := it
			if byAttr {
				var err error
				if x, err = attrPath(it, attr); err != nil {
					return nil, false, err
				}
			}
			ok, err := test(x)
			return it, ok == keep, err
		}), nil
	}
}

// fItems is jinja2's items: a generator of a mapping's (key, value)
// pairs; nothing for Undefined, and a TypeError, when iterated, for
// anything else.
func fItems(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	switch d := v.(type) {
	case Undefined:
		return newGenerator("do_items", nil, nil), nil
	case *Dict:
		return newGenerator("do_items", dictItems(d), nil), nil
	}
	return newGenerator("do_items", nil, typeErr("Can only get item pairs from a mapping.")), nil
}

func dictItems(d *Dict) []any {
	items := make([]any, d.Len())
	for i, k := range d.keys {
		items[i] = newTuple(k, d.vals[i])
	}
	return items
}

// sortKey is the key jinja2's sorting filters compare: lower-cased strings
// unless case_sensitive.
func sortKey(v any, caseSensitive bool) any {
	if s, ok := v.(string); ok && !caseSensitive {
		return pyLower(s)
	}
	return v
}

func sortValues(items []any, keyOf func(any) (any, error), reverse bool) ([]any, error) {
	keys := make([]any, len(items))
	for i, it := range items {
		k, err := keyOf(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var sortErr error
	slices.SortStableFunc(idx, func(a, b int) int {
		c, err := compare(keys[a], keys[b], "<")
		if err != nil && sortErr == nil {
			sortErr = err
		}
		if reverse {
			return -c
		}
		return c
	})
	if sortErr != nil {
		return nil, sortErr
	}
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

func fSort(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("sort", args, kwargs, []string{"reverse", "case_sensitive", "attribute"}, 0)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	cs := a[1] != absent && truthy(a[1])
	out, err := sortValues(items, func(x any) (any, error) {
		if a[2] != absent {
			var err error
			if x, err = attrPath(x, a[2]); err != nil {
				return nil, err
			}
		}
		return sortKey(x, cs), nil
	}, a[0] != absent && truthy(a[0]))
	if err != nil {
		return nil, err
	}
	return newList(out), nil
}

func fDictsort(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("dictsort", args, kwargs, []string{"case_sensitive", "by", "reverse"}, 0)
	if err != nil {
		return nil, err
	}
	d, ok := v.(*Dict)
	if !ok {
		if u, ok := v.(Undefined); ok {
			return nil, u.err()
		}
		return nil, &Error{Kind: "AttributeError", Msg: fmt.Sprintf("'%s' object has no attribute 'items'", typeName(v))}
	}
	pos := 0
	if a[1] != absent {
		switch a[1] {
		case "key":
		case "value":
			pos = 1
		default:
			return nil, &Error{Kind: "FilterArgumentError", Msg: "You can only sort by either \"key\" or \"value\""}
		}
	}
	cs := a[0] != absent && truthy(a[0])
	out, err := sortValues(dictItems(d), func(x any) (any, error) {
		return sortKey(x.(*List).Items[pos], cs), nil
	}, a[2] != absent && truthy(a[2]))
	if err != nil {
		return nil, err
	}
	return newList(out), nil
}

func fUnique(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("unique", args, kwargs, []string{"case_sensitive", "attribute"}, 0)
	if err != nil {
		return nil, err
	}
	cs := a[0] != absent && truthy(a[0])
	seen := NewDict()
	return generate("do_unique", v, false, func(it any) (any, bool, error) {
		k := it
		if a[1] != absent {
			var err error
			if k, err = attrPath(it, a[1]); err != nil {
				return nil, false, err
			}
		}
		k = sortKey(k, cs)
		if _, dup := seen.Get(k); dup {
			return nil, false, nil
		}
		return it, true, seen.Set(k, true)
	}), nil
}

func fMinMax(isMax bool) filterFunc {
	return func(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
		a, err := bind("min/max", args, kwargs, []string{"case_sensitive", "attribute"}, 0)
		if err != nil {
			return nil, err
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{hint: "No aggregated item, sequence was empty."}, nil
		}
		cs := a[0] != absent && truthy(a[0])
		key := func(x any) (any, error) {
			if a[1] != absent {
				var err error
				if x, err = attrPath(x, a[1]); err != nil {
					return nil, err
				}
			}
			return sortKey(x, cs), nil
		}
		best := items[0]
		bk, err := key(best)
		if err != nil {
			return nil, err
		}
		for _, it := range items[1:] {
			k, err := key(it)
			if err != nil {
				return nil, err
			}
			c, err := compare(k, bk, "<")
			if err != nil {
				return nil, err
			}
			if isMax && c > 0 || !isMax && c < 0 {
				best, bk = it, k
			}
		}
		return best, nil
	}
}

func fSum(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("sum", args, kwargs, []string{"attribute", "start"}, 0)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var total any = int64(0)
	if a[1] != absent {
		total = a[1]
	}
	for _, it := range items {
		if a[0] != absent {
			if it, err = attrPath(it, a[0]); err != nil {
				return nil, err
			}
		}
		if total, err = binop("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func fAbs(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	i, f, isF, ok := number(v)
	switch {
	case !ok:
		return nil, typeErr("bad operand type for abs(): '%s'", typeName(v))
	case isF:
		return math.Abs(f), nil
	case i == math.MinInt64:
		return nil, errOverflow
	}
	return abs64(i), nil
}

func fAttr(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("attr", args, kwargs, []string{"name"}, 1)
	if err != nil {
		return nil, err
	}
	name, err := strArg(a[0], "attr name")
	if err != nil {
		return nil, err
	}
	if u, ok := v.(Undefined); ok {
		return nil, u.err()
	}
	if x, ok, err := attribute(v, name); ok || err != nil {
		return x, err
	}
	return undefinedAttr(v, name), nil
}

func fBatch(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("batch", args, kwargs, []string{"linecount", "fill_with"}, 1)
	if err != nil {
		return nil, err
	}
	n, err := intArg(a[0], 0, "linecount")
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > maxRange {
		return nil, valueErr("batch size must be between 1 and %d", maxRange)
	}
	items, ierr := iterate(v)
	var out []any
	for i := 0; i < len(items); i += int(n) {
		end := min(i+int(n), len(items))
		row := append([]any{}, items[i:end]...)
		for a[1] != absent && int64(len(row)) < n {
			row = append(row, a[1])
		}
		out = append(out, newList(row))
	}
	return newGenerator("do_batch", out, ierr), nil
}

// fCenter is str(value).center(width).
func fCenter(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("center", args, kwargs, []string{"width"}, 0)
	if err != nil {
		return nil, err
	}
	w, err := intArg(a[0], 80, "width")
	if err != nil {
		return nil, err
	}
	return pad(pyStr(v), w, absent, '^')
}

func fEscape(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	// markupsafe's escape; html.EscapeString writes &#39; and &#34; as markupsafe does.
	return html.EscapeString(pyStr(v)), nil
}

func fSafe(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) { return pyStr(v), nil }

func fString(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) { return pyStr(v), nil }

func fFloat(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("float", args, kwargs, []string{"default"}, 0)
	if err != nil {
		return nil, err
	}
	def := any(0.0)
	if a[0] != absent {
		def = a[0]
	}
	switch x := v.(type) {
	case Undefined: // float(Undefined) raises
		return nil, x.err()
	case string:
		f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimFunc(x, isPySpace), "_", ""), 64)
		if err != nil {
			return def, nil
		}
		return f, nil
	case bool, int64, float64:
		return toFloat(x), nil
	}
	return def, nil
}

func fInt(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("int", args, kwargs, []string{"default", "base"}, 0)
	if err != nil {
		return nil, err
	}
	def := any(int64(0))
	if a[0] != absent {
		def = a[0]
	}
	base, err := intArg(a[1], 10, "base")
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case Undefined: // int(Undefined) raises
		return nil, x.err()
	case string:
		s := strings.ReplaceAll(strings.TrimFunc(x, isPySpace), "_", "")
		if base == 16 || base == 8 || base == 2 {
			s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.ToLower(s), "0x"), "0o"), "0b")
		}
		if i, err := strconv.ParseInt(s, int(base), 64); err == nil {
			return i, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
		return def, nil
	case bool:
		i, _, _, _ := number(x)
		return i, nil
	case int64:
		return x, nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return def, nil
		}
		return int64(x), nil
	}
	return def, nil
}

func fRound(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("round", args, kwargs, []string{"precision", "method"}, 0)
	if err != nil {
		return nil, err
	}
	prec, err := intArg(a[0], 0, "precision")
	if err != nil {
		return nil, err
	}
	methodName := "common"
	if a[1] != absent {
		methodName = pyStr(a[1])
	}
	i, f, isF, ok := number(v)
	if !ok {
		return nil, typeErr("type %s doesn't define __round__ method", typeName(v))
	}
	scale := math.Pow(10, float64(prec))
	switch methodName {
	case "common":
		if !isF {
			return i, nil // round(int, n) keeps an int
		}
		// Python's round: the decimal nearest to the binary value, ties to even.
		r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(max(prec, 0)), 64), 64)
		if err != nil || prec < 0 {
			r = math.RoundToEven(f*scale) / scale
		}
		return r, nil
	case "ceil":
		return math.Ceil(toFloat(v)*scale) / scale, nil
	case "floor":
		return math.Floor(toFloat(v)*scale) / scale, nil
	}
	return nil, &Error{Kind: "FilterArgumentError", Msg: "method must be common, ceil or floor"}
}

func fReplace(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("replace", args, kwargs, []string{"old", "new", "count"}, 2)
	if err != nil {
		return nil, err
	}
	n, err := intArg(a[2], -1, "count")
	if err != nil {
		if a[2] != nil {
			return nil, err
		}
		n = -1
	}
	return limitStr(strings.Replace(pyStr(v), pyStr(a[0]), pyStr(a[1]), int(max(n, -1))))
}

// fReverse is jinja2's reverse: a string reversed, else reversed(value)
// (an iterator), else a list of the items reversed.
func fReverse(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	kind := ""
	switch x := v.(type) {
	case string:
		r := []rune(x)
		slices.Reverse(r)
		return string(r), nil
	case *List:
		kind = map[string]string{"": "list_reverseiterator", "dict_keys": "dict_reversekeyiterator",
			"dict_values": "dict_reversevalueiterator", "dict_items": "dict_reverseitemiterator", "range": "range_iterator"}[x.view]
		if x.Tuple {
			kind = "reversed"
		}
	case *Dict:
		kind = "dict_reversekeyiterator"
	case Undefined:
		kind = "reversed"
	}
	items, err := iterate(v)
	if err != nil {
		return nil, &Error{Kind: "FilterArgumentError", Msg: "argument must be iterable"}
	}
	out := append([]any{}, items...)
	slices.Reverse(out)
	if kind == "" { // list(value), reversed: a generator, say
		return newList(out), nil
	}
	return &iterator{kind: kind, items: out}, nil
}

func fFormat(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	if kwargs != nil && kwargs.Len() > 0 {
		if len(args) > 0 {
			return nil, &Error{Kind: "FilterArgumentError", Msg: "can't handle positional and keyword arguments at the same time"}
		}
		return percentFormat(pyStr(v), kwargs)
	}
	return percentFormat(pyStr(v), newTuple(args...))
}

// fIndent is jinja2's indent: every line but the first (and the first
// with first=true) gets the indentation; blank lines only with blank=true.
func fIndent(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("indent", args, kwargs, []string{"width", "first", "blank"}, 0)
	if err != nil {
		return nil, err
	}
	ind := "    "
	switch w := a[0].(type) {
	case absentT:
	case string:
		ind = w
	default:
		n, err := intArg(w, 4, "width")
		if err != nil {
			return nil, err
		}
		if n > MaxOutput {
			return nil, &Error{Kind: "OverflowError", Msg: "indent is larger than the limit"}
		}
		ind = strings.Repeat(" ", int(max(n, 0)))
	}
	src, ok := v.(string)
	if !ok { // jinja2 adds "\n" to the value as it is
		if u, isU := v.(Undefined); isU {
			return nil, u.err()
		}
		if l, isList := v.(*List); isList && !l.Tuple && l.view == "" {
			return nil, &Error{Kind: "AttributeError", Msg: "'list' object has no attribute 'splitlines'"}
		}
		return nil, typeErr("unsupported operand type(s) for +=: '%s' and 'str'", typeName(v))
	}
	lines := pySplitLines(src+"\n", false)
	var rv string
	if a[2] != absent && truthy(a[2]) {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		rv = lines[0]
		for _, l := range lines[1:] {
			rv += "\n"
			if l != "" {
				rv += ind + l
			}
		}
	}
	if a[1] != absent && truthy(a[1]) {
		rv = ind + rv
	}
	return limitStr(rv)
}

// fToJSON is HuggingFace's tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False).
func fToJSON(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("tojson", args, kwargs, []string{"ensure_ascii", "indent", "separators", "sort_keys"}, 0)
	if err != nil {
		return nil, err
	}
	o := jsonOpts{itemSep: ", ", keySep: ": "}
	o.ensureASCII = a[0] != absent && truthy(a[0])
	o.sortKeys = a[3] != absent && truthy(a[3])
	switch ind := a[1].(type) {
	case absentT, nil:
	case string:
		o.hasIndent, o.indent = true, ind
	default:
		n, err := intArg(ind, 0, "indent")
		if err != nil {
			return nil, err
		}
		o.hasIndent, o.indent = true, strings.Repeat(" ", int(min(max(n, 0), 64)))
	}
	if o.hasIndent {
		o.itemSep = ","
	}
	if a[2] != absent && a[2] != nil {
		seps, ok := a[2].(*List)
		if !ok || len(seps.Items) != 2 {
			return nil, valueErr("separators must be a pair of strings")
		}
		item, ok1 := seps.Items[0].(string)
		key, ok2 := seps.Items[1].(string)
		if !ok1 || !ok2 {
			return nil, valueErr("separators must be a pair of strings")
		}
		o.itemSep, o.keySep = item, key
	}
	return toJSON(v, o)
}

func fTruncate(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("truncate", args, kwargs, []string{"length", "killwords", "end", "leeway"}, 0)
	if err != nil {
		return nil, err
	}
	n, err := intArg(a[0], 255, "length")
	if err != nil {
		return nil, err
	}
	s, isStr := v.(string)
	if !isStr { // jinja2 measures the value as it is: short enough, it comes back unchanged
		l, err := length(v)
		if err != nil {
			return nil, err
		}
		if int64(l) <= n+5 {
			return v, nil
		}
		s = pyStr(v)
	}
	end := "..."
	if a[2] != absent {
		end = pyStr(a[2])
	}
	leeway, err := intArg(a[3], 5, "leeway")
	if err != nil {
		return nil, err
	}
	runes := []rune(s)
	if int64(len(runes)) <= n+leeway {
		return s, nil
	}
	cut := max(int(n)-utf8.RuneCountInString(end), 0)
	if a[1] != absent && truthy(a[1]) {
		return string(runes[:cut]) + end, nil
	}
	head := string(runes[:cut])
	if i := strings.LastIndexByte(head, ' '); i >= 0 {
		head = head[:i]
	}
	return head + end, nil
}

var wordRE = regexp.MustCompile(`[\pL\pN_]+`)

func fWordcount(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	return int64(len(wordRE.FindAllStringIndex(pyStr(v), -1))), nil
}

// fGroupby is jinja2's groupby: (grouper, items) pairs, sorted by the
// attribute.
func fGroupby(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("groupby", args, kwargs, []string{"attribute", "default", "case_sensitive"}, 1)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	cs := a[2] != absent && truthy(a[2])
	key := func(x any) (any, error) {
		k, err := attrPath(x, a[0])
		if _, undef := k.(Undefined); undef && a[1] != absent {
			k = a[1]
		}
		return k, err
	}
	sorted, err := sortValues(items, func(x any) (any, error) {
		k, err := key(x)
		return sortKey(k, cs), err
	}, false)
	if err != nil {
		return nil, err
	}
	var out []any
	var group *List
	var last any
	for _, it := range sorted {
		k, _ := key(it)
		if group == nil || !equal(sortKey(k, cs), sortKey(last, cs)) {
			group = newList(nil)
			out = append(out, newTuple(k, group))
			last = k
		}
		group.Items = append(group.Items, it)
	}
	return newList(out), nil
}

// fSlice is jinja2's slice: the items in n columns, the first ones
// longer (padded with fill_with when given), as a generator.
func fSlice(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	a, err := bind("slice", args, kwargs, []string{"slices", "fill_with"}, 1)
	if err != nil {
		return nil, err
	}
	n, err := intArg(a[0], 0, "slices")
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > maxRange {
		return nil, valueErr("slices must be between 1 and %d", maxRange)
	}
	items, err := iterate(v)
	if err != nil {
		return newGenerator("do_slice", nil, err), nil
	}
	per, extra := len(items)/int(n), len(items)%int(n)
	var out []any
	offset := 0
	for i := range int(n) {
		start := offset + i*per
		if i < extra {
			offset++
		}
		end := offset + (i+1)*per
		row := append([]any{}, items[start:end]...)
		if a[1] != absent && i >= extra && extra > 0 {
			row = append(row, a[1])
		}
		out = append(out, newList(row))
	}
	return newGenerator("do_slice", out, nil), nil
}

var tagRE = regexp.MustCompile(`(?s)<!--.*?-->|<[^>]*>`)

// fStriptags is jinja2's striptags: tags and comments removed, runs of
// whitespace made one space, HTML entities decoded.
func fStriptags(_ *evaluator, v any, args []any, kwargs *Dict) (any, error) {
	s := tagRE.ReplaceAllString(pyStr(v), "")
	return html.UnescapeString(strings.Join(strings.FieldsFunc(s, isPySpace), " ")), nil
}
