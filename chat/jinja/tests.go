package jinja

// testFunc is a jinja2 test (x is name(args)).
type testFunc func(v any, args []any, kwargs *Dict) (bool, error)

var tests map[string]testFunc

func init() {
	cmpTest := func(op string) testFunc {
		return func(v any, args []any, kwargs *Dict) (bool, error) {
			a, err := bind(op, args, kwargs, []string{"other"}, 1)
			if err != nil {
				return false, err
			}
			return compareOp(op, v, a[0])
		}
	}
	is := func(f func(v any) bool) testFunc {
		return func(v any, args []any, kwargs *Dict) (bool, error) {
			if err := noArgs(args, kwargs); err != nil {
				return false, err
			}
			return f(v), nil
		}
	}
	tests = map[string]testFunc{
		"defined":   is(func(v any) bool { _, u := v.(Undefined); return !u }),
		"undefined": is(func(v any) bool { _, u := v.(Undefined); return u }),
		"none":      is(func(v any) bool { return v == nil }),
		"boolean":   is(func(v any) bool { _, ok := v.(bool); return ok }),
		"true":      is(func(v any) bool { b, ok := v.(bool); return ok && b }),
		"false":     is(func(v any) bool { b, ok := v.(bool); return ok && !b }),
		"integer":   is(func(v any) bool { _, ok := v.(int64); return ok }),
		"float":     is(func(v any) bool { _, ok := v.(float64); return ok }),
		"number":    is(func(v any) bool { _, _, _, ok := number(v); return ok }),
		"string":    is(func(v any) bool { _, ok := v.(string); return ok }),
		"mapping":   is(func(v any) bool { _, ok := v.(*Dict); return ok }),
		// Undefined is iterable (as nothing) and a sequence in jinja2; so is a dict.
		"iterable": is(func(v any) bool {
			switch v.(type) {
			case string, *List, *Dict, *iterator, Undefined:
				return true
			}
			return false
		}),
		// A sequence has a length and items by index: not a dict view nor
		// an iterator.
		"sequence": is(func(v any) bool {
			switch x := v.(type) {
			case string, *Dict, Undefined:
				return true
			case *List:
				return x.view == "" || x.view == "range"
			}
			return false
		}),
		"callable": is(func(v any) bool {
			switch v.(type) {
			case *Func, *macro:
				return true
			}
			return false
		}),
		"escaped": is(func(v any) bool { return false }),
		"lower": is(func(v any) bool {
			s := pyStr(v)
			return hasCased(s) && pyLower(s) == s
		}),
		"upper": is(func(v any) bool {
			s := pyStr(v)
			return hasCased(s) && pyUpper(s) == s
		}),
		"odd":  intTest(func(i int64) bool { return i%2 != 0 }),
		"even": intTest(func(i int64) bool { return i%2 == 0 }),
		"divisibleby": func(v any, args []any, kwargs *Dict) (bool, error) {
			a, err := bind("divisibleby", args, kwargs, []string{"num"}, 1)
			if err != nil {
				return false, err
			}
			m, err := binop("%", v, a[0])
			if err != nil {
				return false, err
			}
			return equal(m, int64(0)), nil
		},
		"sameas": func(v any, args []any, kwargs *Dict) (bool, error) {
			a, err := bind("sameas", args, kwargs, []string{"other"}, 1)
			if err != nil {
				return false, err
			}
			return sameAs(v, a[0]), nil
		},
		"in": func(v any, args []any, kwargs *Dict) (bool, error) {
			a, err := bind("in", args, kwargs, []string{"seq"}, 1)
			if err != nil {
				return false, err
			}
			return contains(a[0], v)
		},
		"filter": is(func(v any) bool { s, ok := v.(string); _, f := filters[s]; return ok && f }),
		"test":   is(func(v any) bool { s, ok := v.(string); _, t := tests[s]; return ok && t }),
	}
	for _, names := range [][]string{{"==", "eq", "equalto"}, {"!=", "ne"}, {"<", "lt", "lessthan"}, {"<=", "le"}, {">", "gt", "greaterthan"}, {">=", "ge"}} {
		for _, n := range names {
			tests[n] = cmpTest(names[0])
		}
	}
}

// noArgs refuses arguments to a test that takes none: "x is number not
// in y" passes `not` to the test, and jinja2 raises.
func noArgs(args []any, kwargs *Dict) error {
	if n := len(args); n > 0 || kwargs != nil && kwargs.Len() > 0 {
		return typeErr("the test takes 1 positional argument but %d were given", n+1)
	}
	return nil
}

func intTest(f func(int64) bool) testFunc {
	return func(v any, args []any, kwargs *Dict) (bool, error) {
		if err := noArgs(args, kwargs); err != nil {
			return false, err
		}
		if u, ok := v.(Undefined); ok {
			return false, u.err()
		}
		i, fl, isF, ok := number(v)
		if !ok {
			return false, typeErr("not all arguments converted during string formatting")
		}
		if isF {
			if fl != float64(int64(fl)) {
				return false, nil
			}
			i = int64(fl)
		}
		return f(i), nil
	}
}

// sameAs is Python's `is` for the values templates compare that way:
// None, booleans and the same container.
func sameAs(a, b any) bool {
	switch x := a.(type) {
	case nil, bool:
		return a == b
	case *List, *Dict, *Namespace, *Func, *macro:
		return a == b
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	}
	return false
}
