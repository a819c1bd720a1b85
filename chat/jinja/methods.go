package jinja

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// absent marks an optional argument the caller left out.
type absentT struct{}

var absent any = absentT{}

// bind matches a call's arguments to parameter names, as Python does for
// builtins that take keywords; parameters after the first `required` are
// optional and come back as absent when left out.
func bind(fname string, args []any, kwargs *Dict, names []string, required int) ([]any, error) {
	if len(args) > len(names) {
		return nil, typeErr("%s() takes at most %d arguments (%d given)", fname, len(names), len(args))
	}
	out := make([]any, len(names))
	for i := range out {
		out[i] = absent
	}
	copy(out, args)
	if kwargs != nil {
		for i, k := range kwargs.keys {
			name, _ := k.(string)
			j := indexOf(names, name)
			if j < 0 {
				return nil, typeErr("%s() got an unexpected keyword argument '%s'", fname, name)
			}
			if j < len(args) {
				return nil, typeErr("%s() got multiple values for argument '%s'", fname, name)
			}
			out[j] = kwargs.vals[i]
		}
	}
	for i := range required {
		if out[i] == absent {
			return nil, typeErr("%s() missing required argument '%s'", fname, names[i])
		}
	}
	return out, nil
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

func method(self any, name string, fn func(args []any, kwargs *Dict) (any, error)) *Func {
	return &Func{Name: name, Fn: fn, self: typeName(self)}
}

// Methods that change a container: the immutable sandbox makes them
// unsafe attributes.
var (
	unsafeListMethods = []string{"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"}
	unsafeDictMethods = []string{"clear", "pop", "popitem", "setdefault", "update"}
)

func unsafeAttr(obj any, name string) Undefined {
	return Undefined{kind: "SecurityError", hint: fmt.Sprintf("access to attribute '%s' of '%s' object is unsafe.", name, typeName(obj))}
}

// attribute is Python's getattr(obj, name) through the sandbox: found
// reports whether obj has the attribute at all.
func attribute(obj any, name string) (v any, found bool, err error) {
	if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") {
		return unsafeAttr(obj, name), true, nil
	}
	switch o := obj.(type) {
	case string:
		if f := strMethod(o, name); f != nil {
			return f, true, nil
		}
	case *Dict:
		if indexOf(unsafeDictMethods, name) >= 0 {
			return unsafeAttr(obj, name), true, nil
		}
		if f := dictMethod(o, name); f != nil {
			return f, true, nil
		}
	case *List:
		if !o.Tuple && indexOf(unsafeListMethods, name) >= 0 {
			return unsafeAttr(obj, name), true, nil
		}
		if f := listMethod(o, name); f != nil {
			return f, true, nil
		}
	case *Namespace:
		v, ok := o.attrs.Get(name)
		return v, ok, nil
	case *loopState:
		v, ok := o.attr(name)
		return v, ok, nil
	case *macro:
		if name == "name" {
			return o.name, true, nil
		}
	case bool, int64, float64:
		i, f, isF, _ := number(o)
		switch name {
		case "real":
			if isF {
				return f, true, nil
			}
			return i, true, nil
		case "imag":
			if isF {
				return 0.0, true, nil
			}
			return int64(0), true, nil
		case "numerator", "denominator":
			if !isF {
				if name == "numerator" {
					return i, true, nil
				}
				return int64(1), true, nil
			}
		}
	}
	return nil, false, nil
}

func dictMethod(d *Dict, name string) *Func {
	switch name {
	case "get":
		return method(d, name, func(args []any, kwargs *Dict) (any, error) {
			a, err := bind("get", args, kwargs, []string{"key", "default"}, 1)
			if err != nil {
				return nil, err
			}
			if _, err := keyOf(a[0]); err != nil {
				return nil, err
			}
			if v, ok := d.Get(a[0]); ok {
				return v, nil
			}
			if a[1] == absent {
				return nil, nil
			}
			return a[1], nil
		})
	case "items":
		return method(d, name, func(args []any, kwargs *Dict) (any, error) {
			items := make([]any, d.Len())
			for i, k := range d.keys {
				items[i] = newTuple(k, d.vals[i])
			}
			return &List{Items: items, view: "dict_items"}, nil
		})
	case "keys":
		return method(d, name, func(args []any, kwargs *Dict) (any, error) {
			return &List{Items: append([]any(nil), d.keys...), view: "dict_keys"}, nil
		})
	case "values":
		return method(d, name, func(args []any, kwargs *Dict) (any, error) {
			return &List{Items: append([]any(nil), d.vals...), view: "dict_values"}, nil
		})
	case "copy":
		return method(d, name, func(args []any, kwargs *Dict) (any, error) {
			c := NewDict()
			for i, k := range d.keys {
				c.Set(k, d.vals[i])
			}
			return c, nil
		})
	}
	return nil
}

func listMethod(l *List, name string) *Func {
	switch name {
	case "count":
		return method(l, name, func(args []any, kwargs *Dict) (any, error) {
			a, err := bind("count", args, kwargs, []string{"value"}, 1)
			if err != nil {
				return nil, err
			}
			n := int64(0)
			for _, x := range l.Items {
				if equal(x, a[0]) {
					n++
				}
			}
			return n, nil
		})
	case "index":
		return method(l, name, func(args []any, kwargs *Dict) (any, error) {
			a, err := bind("index", args, kwargs, []string{"value"}, 1)
			if err != nil {
				return nil, err
			}
			for i, x := range l.Items {
				if equal(x, a[0]) {
					return int64(i), nil
				}
			}
			return nil, valueErr("%s is not in list", pyRepr(a[0]))
		})
	case "copy":
		if l.Tuple {
			return nil
		}
		return method(l, name, func(args []any, kwargs *Dict) (any, error) {
			return newList(append([]any(nil), l.Items...)), nil
		})
	}
	return nil
}

// String methods.

// Casers carry state, so each use makes its own: templates render
// concurrently.
func pyUpper(s string) string { return cases.Upper(language.Und).String(s) }
func pyLower(s string) string { return cases.Lower(language.Und).String(s) }
func titleRune(r rune) string { return cases.Title(language.Und, cases.NoLower).String(string(r)) }

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyTitle is str.title: a letter after a cased letter is lowered, any
// other is title-cased (so "they're" becomes "They'Re", as in Python).
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteString(pyLower(string(r)))
		} else {
			b.WriteString(titleRune(r))
		}
		prevCased = isCased(r)
	}
	return b.String()
}

// pyCapitalize is str.capitalize: the first character title-cased, the
// rest lowered.
func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return titleRune(r) + pyLower(s[n:])
}

// pyStrip strips whitespace, or the characters in chars, from the sides.
func pyStrip(s string, chars any, left, right bool) (string, error) {
	cut := isPySpace
	switch c := chars.(type) {
	case nil:
	case absentT:
	case string:
		cut = func(r rune) bool { return strings.ContainsRune(c, r) }
	default:
		return "", typeErr("strip arg must be None or str")
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s, nil
}

// pySplit is str.split (and rsplit when fromRight).
func pySplit(s string, sep any, maxsplit int64, fromRight bool) (*List, error) {
	var parts []string
	switch sp := sep.(type) {
	case nil, absentT:
		parts = splitSpace(s, maxsplit, fromRight)
	case string:
		if sp == "" {
			return nil, valueErr("empty separator")
		}
		if maxsplit < 0 {
			parts = strings.Split(s, sp)
		} else if !fromRight {
			parts = strings.SplitN(s, sp, int(maxsplit)+1)
		} else {
			for int64(len(parts)) < maxsplit {
				i := strings.LastIndex(s, sp)
				if i < 0 {
					break
				}
				parts = append([]string{s[i+len(sp):]}, parts...)
				s = s[:i]
			}
			parts = append([]string{s}, parts...)
		}
	default:
		return nil, typeErr("must be str or None, not %s", typeName(sep))
	}
	items := make([]any, len(parts))
	for i, p := range parts {
		items[i] = p
	}
	return newList(items), nil
}

// splitSpace splits on runs of whitespace, dropping empty pieces; with
// maxsplit the remainder keeps its inner whitespace.
func splitSpace(s string, maxsplit int64, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.FieldsFunc(s, isPySpace)
	}
	var parts []string
	if !fromRight {
		s = lstripSpace(s)
		for s != "" && int64(len(parts)) < maxsplit {
			i := strings.IndexFunc(s, isPySpace)
			if i < 0 {
				break
			}
			parts = append(parts, s[:i])
			s = lstripSpace(s[i:])
		}
		if s != "" {
			parts = append(parts, s)
		}
		return parts
	}
	s = rstripSpace(s)
	for s != "" && int64(len(parts)) < maxsplit {
		i := strings.LastIndexFunc(s, isPySpace)
		if i < 0 {
			break
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		parts = append([]string{s[i+n:]}, parts...)
		s = rstripSpace(s[:i])
	}
	if s != "" {
		parts = append([]string{s}, parts...)
	}
	return parts
}

// pySplitLines is str.splitlines: every Unicode line boundary.
func pySplitLines(s string, keepends bool) []string {
	var lines []string
	for len(s) > 0 {
		i, n := -1, 0
		for j, r := range s {
			switch r {
			case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
				i, n = j, utf8.RuneLen(r)
			case '\r':
				i, n = j, 1
				if strings.HasPrefix(s[j:], "\r\n") {
					n = 2
				}
			}
			if i >= 0 {
				break
			}
		}
		if i < 0 {
			lines = append(lines, s)
			break
		}
		if keepends {
			lines = append(lines, s[:i+n])
		} else {
			lines = append(lines, s[:i])
		}
		s = s[i+n:]
	}
	return lines
}

// runeRange resolves Python's optional start/end arguments to byte
// offsets in s.
func runeRange(s string, start, end any) (int, int, error) {
	n := int64(utf8.RuneCountInString(s))
	resolve := func(v any, def int64) (int64, error) {
		if v == absent || v == nil {
			return def, nil
		}
		i, _, isF, ok := number(v)
		if !ok || isF {
			return 0, typeErr("slice indices must be integers or None or have an __index__ method")
		}
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n), nil
	}
	a, err := resolve(start, 0)
	if err != nil {
		return 0, 0, err
	}
	b, err := resolve(end, n)
	if err != nil {
		return 0, 0, err
	}
	return byteOffset(s, int(a)), byteOffset(s, int(max(a, b))), nil
}

func byteOffset(s string, runes int) int {
	for i := range s {
		if runes == 0 {
			return i
		}
		runes--
	}
	return len(s)
}

func runeIndex(s string, byteIdx int) int64 { return int64(utf8.RuneCountInString(s[:byteIdx])) }

// affixes reads startswith/endswith's argument: a string or a tuple of them.
func affixes(v any, fname string) ([]string, error) {
	switch a := v.(type) {
	case string:
		return []string{a}, nil
	case *List:
		if a.Tuple {
			out := make([]string, len(a.Items))
			for i, x := range a.Items {
				s, ok := x.(string)
				if !ok {
					return nil, typeErr("tuple for %s must only contain str, not %s", fname, typeName(x))
				}
				out[i] = s
			}
			return out, nil
		}
	}
	return nil, typeErr("%s first arg must be str or a tuple of str, not %s", fname, typeName(v))
}

func intArg(v any, def int64, what string) (int64, error) {
	if v == absent {
		return def, nil
	}
	i, _, isF, ok := number(v)
	if !ok || isF {
		return 0, typeErr("'%s' object cannot be interpreted as an integer (%s)", typeName(v), what)
	}
	return i, nil
}

func strArg(v any, what string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", typeErr("%s must be str, not %s", what, typeName(v))
	}
	return s, nil
}

// pad returns s centred or justified in width runes with fill.
func pad(s string, width int64, fill any, align byte) (string, error) {
	f := " "
	if fill != absent {
		fs, ok := fill.(string)
		if !ok || utf8.RuneCountInString(fs) != 1 {
			return "", typeErr("The fill character must be exactly one character long")
		}
		f = fs
	}
	n := int64(utf8.RuneCountInString(s))
	if width <= n {
		return s, nil
	}
	if width > MaxOutput {
		return "", &Error{Kind: "OverflowError", Msg: "width is larger than the limit"}
	}
	marg := width - n
	switch align {
	case '<':
		return s + strings.Repeat(f, int(marg)), nil
	case '>':
		return strings.Repeat(f, int(marg)) + s, nil
	}
	left := marg/2 + (marg & width & 1)
	return strings.Repeat(f, int(left)) + s + strings.Repeat(f, int(marg-left)), nil
}

func strMethod(s, name string) *Func {
	m := func(params []string, required int, fn func(a []any) (any, error)) *Func {
		return method(s, name, func(args []any, kwargs *Dict) (any, error) {
			a, err := bind(name, args, kwargs, params, required)
			if err != nil {
				return nil, err
			}
			return fn(a)
		})
	}
	pred := func(test func(string) bool) *Func {
		return m(nil, 0, func([]any) (any, error) { return s != "" && test(s), nil })
	}
	switch name {
	case "strip", "lstrip", "rstrip":
		return m([]string{"chars"}, 0, func(a []any) (any, error) {
			return pyStrip(s, a[0], name != "rstrip", name != "lstrip")
		})
	case "split", "rsplit":
		return m([]string{"sep", "maxsplit"}, 0, func(a []any) (any, error) {
			n, err := intArg(a[1], -1, "maxsplit")
			if err != nil {
				return nil, err
			}
			return pySplit(s, a[0], n, name == "rsplit")
		})
	case "splitlines":
		return m([]string{"keepends"}, 0, func(a []any) (any, error) {
			lines := pySplitLines(s, a[0] != absent && truthy(a[0]))
			items := make([]any, len(lines))
			for i, l := range lines {
				items[i] = l
			}
			return newList(items), nil
		})
	case "startswith", "endswith":
		return m([]string{"prefix", "start", "end"}, 1, func(a []any) (any, error) {
			fixes, err := affixes(a[0], name)
			if err != nil {
				return nil, err
			}
			lo, hi, err := runeRange(s, a[1], a[2])
			if err != nil {
				return nil, err
			}
			sub := s[lo:hi]
			for _, f := range fixes {
				if name == "startswith" && strings.HasPrefix(sub, f) || name == "endswith" && strings.HasSuffix(sub, f) {
					return true, nil
				}
			}
			return false, nil
		})
	case "upper":
		return m(nil, 0, func([]any) (any, error) { return pyUpper(s), nil })
	case "lower", "casefold":
		return m(nil, 0, func([]any) (any, error) { return pyLower(s), nil })
	case "title":
		return m(nil, 0, func([]any) (any, error) { return pyTitle(s), nil })
	case "capitalize":
		return m(nil, 0, func([]any) (any, error) { return pyCapitalize(s), nil })
	case "swapcase":
		return m(nil, 0, func([]any) (any, error) {
			return strings.Map(func(r rune) rune {
				if unicode.IsUpper(r) {
					return unicode.ToLower(r)
				}
				return unicode.ToUpper(r)
			}, s), nil
		})
	case "replace":
		return m([]string{"old", "new", "count"}, 2, func(a []any) (any, error) {
			old, err := strArg(a[0], "replace() argument 1")
			if err != nil {
				return nil, err
			}
			nw, err := strArg(a[1], "replace() argument 2")
			if err != nil {
				return nil, err
			}
			n, err := intArg(a[2], -1, "count")
			if err != nil {
				return nil, err
			}
			return limitStr(strings.Replace(s, old, nw, int(max(n, -1))))
		})
	case "find", "rfind", "index", "rindex", "count":
		return m([]string{"sub", "start", "end"}, 1, func(a []any) (any, error) {
			sub, err := strArg(a[0], name+"() argument 1")
			if err != nil {
				return nil, err
			}
			lo, hi, err := runeRange(s, a[1], a[2])
			if err != nil {
				return nil, err
			}
			in := s[lo:hi]
			if name == "count" {
				if sub == "" {
					return int64(utf8.RuneCountInString(in) + 1), nil
				}
				return int64(strings.Count(in, sub)), nil
			}
			var i int
			if name[0] == 'r' {
				i = strings.LastIndex(in, sub)
			} else {
				i = strings.Index(in, sub)
			}
			if i < 0 {
				if strings.HasSuffix(name, "index") {
					return nil, valueErr("substring not found")
				}
				return int64(-1), nil
			}
			return runeIndex(s, lo+i), nil
		})
	case "join":
		return m([]string{"iterable"}, 1, func(a []any) (any, error) {
			items, err := iterate(a[0])
			if err != nil {
				return nil, err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				str, ok := it.(string)
				if !ok {
					return nil, typeErr("sequence item %d: expected str instance, %s found", i, typeName(it))
				}
				parts[i] = str
			}
			return limitStr(strings.Join(parts, s))
		})
	case "partition", "rpartition":
		return m([]string{"sep"}, 1, func(a []any) (any, error) {
			sep, err := strArg(a[0], "sep")
			if err != nil {
				return nil, err
			}
			if sep == "" {
				return nil, valueErr("empty separator")
			}
			i := strings.Index(s, sep)
			if name == "rpartition" {
				i = strings.LastIndex(s, sep)
			}
			switch {
			case i >= 0:
				return newTuple(s[:i], sep, s[i+len(sep):]), nil
			case name == "rpartition":
				return newTuple("", "", s), nil
			}
			return newTuple(s, "", ""), nil
		})
	case "removeprefix":
		return m([]string{"prefix"}, 1, func(a []any) (any, error) {
			p, err := strArg(a[0], "removeprefix() argument")
			return strings.TrimPrefix(s, p), err
		})
	case "removesuffix":
		return m([]string{"suffix"}, 1, func(a []any) (any, error) {
			p, err := strArg(a[0], "removesuffix() argument")
			return strings.TrimSuffix(s, p), err
		})
	case "center", "ljust", "rjust":
		return m([]string{"width", "fillchar"}, 1, func(a []any) (any, error) {
			w, err := intArg(a[0], 0, "width")
			if err != nil {
				return nil, err
			}
			return pad(s, w, a[1], map[string]byte{"center": '^', "ljust": '<', "rjust": '>'}[name])
		})
	case "zfill":
		return m([]string{"width"}, 1, func(a []any) (any, error) {
			w, err := intArg(a[0], 0, "width")
			if err != nil {
				return nil, err
			}
			n := int64(utf8.RuneCountInString(s))
			if w <= n {
				return s, nil
			}
			if w > MaxOutput {
				return nil, &Error{Kind: "OverflowError", Msg: "width is larger than the limit"}
			}
			sign, rest := "", s
			if s != "" && (s[0] == '+' || s[0] == '-') {
				sign, rest = s[:1], s[1:]
			}
			return sign + strings.Repeat("0", int(w-n)) + rest, nil
		})
	case "format":
		return method(s, name, func(args []any, kwargs *Dict) (any, error) { return strFormat(s, args, kwargs) })
	case "isdigit", "isdecimal":
		return pred(func(s string) bool { return allRunes(s, unicode.IsDigit) })
	case "isnumeric":
		return pred(func(s string) bool { return allRunes(s, unicode.IsNumber) })
	case "isalpha":
		return pred(func(s string) bool { return allRunes(s, unicode.IsLetter) })
	case "isalnum":
		return pred(func(s string) bool {
			return allRunes(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) })
		})
	case "isspace":
		return pred(func(s string) bool { return allRunes(s, isPySpace) })
	case "isascii":
		return m(nil, 0, func([]any) (any, error) {
			return allRunes(s, func(r rune) bool { return r < 0x80 }), nil
		})
	case "islower":
		return pred(func(s string) bool { return hasCased(s) && pyLower(s) == s })
	case "isupper":
		return pred(func(s string) bool { return hasCased(s) && pyUpper(s) == s })
	case "istitle":
		return pred(func(s string) bool { return hasCased(s) && pyTitle(s) == s })
	case "isidentifier":
		return pred(func(s string) bool {
			for i, r := range s {
				if !(r == '_' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r)) {
					return false
				}
			}
			return true
		})
	case "encode", "expandtabs", "format_map", "isprintable", "maketrans", "translate":
		return method(s, name, func([]any, *Dict) (any, error) {
			return nil, &Error{Kind: "NotImplementedError", Msg: "str." + name + "() is not supported by ringlm's template engine"}
		})
	}
	return nil
}

func allRunes(s string, f func(rune) bool) bool {
	for _, r := range s {
		if !f(r) {
			return false
		}
	}
	return true
}

func hasCased(s string) bool {
	for _, r := range s {
		if isCased(r) {
			return true
		}
	}
	return false
}
