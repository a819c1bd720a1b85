package jinja

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// binop applies a Python binary operator.
func binop(op string, l, r any) (any, error) {
	if op == "~" { // jinja2's concatenation: str() of both sides
		return limitStr(pyStr(l) + pyStr(r))
	}
	if u, ok := l.(Undefined); ok {
		return nil, u.err()
	}
	if u, ok := r.(Undefined); ok {
		if _, fmtStr := l.(string); !fmtStr || op != "%" { // "text" % Undefined formats it (as a mapping)
			return nil, u.err()
		}
	}
	li, lf, lF, lnum := number(l)
	ri, rf, rF, rnum := number(r)
	if lnum && rnum {
		if lF || rF {
			if !lF {
				lf = float64(li)
			}
			if !rF {
				rf = float64(ri)
			}
			return floatOp(op, lf, rf)
		}
		return intOp(op, li, ri)
	}
	switch op {
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				return limitStr(a + b)
			}
			return nil, typeErr("can only concatenate str (not \"%s\") to str", typeName(r))
		case *List:
			if b, ok := r.(*List); ok && a.Tuple == b.Tuple {
				items := make([]any, 0, len(a.Items)+len(b.Items))
				return &List{Items: append(append(items, a.Items...), b.Items...), Tuple: a.Tuple}, nil
			}
			return nil, typeErr("can only concatenate %s (not \"%s\") to %s", typeName(l), typeName(r), typeName(l))
		}
	case "*":
		if s, n, ok := seqTimes(l, r); ok {
			return repeat(s, n)
		}
	case "%":
		if s, ok := l.(string); ok {
			return percentFormat(s, r)
		}
	}
	return nil, typeErr("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

func seqTimes(l, r any) (seq any, n int64, ok bool) {
	if i, _, isF, num := number(r); num && !isF {
		switch l.(type) {
		case string, *List:
			return l, i, true
		}
	}
	if i, _, isF, num := number(l); num && !isF {
		switch r.(type) {
		case string, *List:
			return r, i, true
		}
	}
	return nil, 0, false
}

func repeat(seq any, n int64) (any, error) {
	n = max(n, 0)
	switch s := seq.(type) {
	case string:
		if n > 0 && int64(len(s)) > MaxOutput/n {
			return nil, &Error{Kind: "OverflowError", Msg: "repeated string is larger than the limit"}
		}
		return strings.Repeat(s, int(n)), nil
	case *List:
		if n > 0 && int64(len(s.Items)) > MaxOutput/n {
			return nil, &Error{Kind: "OverflowError", Msg: "repeated list is larger than the limit"}
		}
		items := make([]any, 0, len(s.Items)*int(n))
		for range n {
			items = append(items, s.Items...)
		}
		return &List{Items: items, Tuple: s.Tuple}, nil
	}
	return nil, nil
}

func limitStr(s string) (any, error) {
	if len(s) > MaxOutput {
		return nil, &Error{Kind: "OverflowError", Msg: "string is larger than the limit"}
	}
	return s, nil
}

var errOverflow = &Error{Kind: "OverflowError", Msg: "integer overflow (ringlm's integers are 64-bit)"}

func intOp(op string, a, b int64) (any, error) {
	switch op {
	case "+":
		s := a + b
		if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
			return nil, errOverflow
		}
		return s, nil
	case "-":
		s := a - b
		if (a >= 0) != (b >= 0) && (s >= 0) != (a >= 0) {
			return nil, errOverflow
		}
		return s, nil
	case "*":
		hi, lo := bits.Mul64(uint64(abs64(a)), uint64(abs64(b)))
		if hi != 0 || lo > math.MaxInt64 {
			return nil, errOverflow
		}
		if (a < 0) != (b < 0) {
			return -int64(lo), nil
		}
		return int64(lo), nil
	case "/":
		if b == 0 {
			return nil, &Error{Kind: "ZeroDivisionError", Msg: "division by zero"}
		}
		return float64(a) / float64(b), nil
	case "//":
		if b == 0 {
			return nil, &Error{Kind: "ZeroDivisionError", Msg: "integer division or modulo by zero"}
		}
		q := a / b
		if (a%b != 0) && ((a < 0) != (b < 0)) {
			q--
		}
		return q, nil
	case "%":
		if b == 0 {
			return nil, &Error{Kind: "ZeroDivisionError", Msg: "integer modulo by zero"}
		}
		m := a % b
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m, nil
	case "**":
		if b < 0 {
			return math.Pow(float64(a), float64(b)), nil
		}
		result, base := int64(1), a
		for e := b; e > 0; e >>= 1 { // by squaring, so (-1) ** huge ends
			if e&1 == 1 {
				v, err := intOp("*", result, base)
				if err != nil {
					return nil, err
				}
				result = v.(int64)
			}
			if e > 1 {
				v, err := intOp("*", base, base)
				if err != nil {
					return nil, err
				}
				base = v.(int64)
			}
		}
		return result, nil
	}
	return nil, typeErr("unsupported operator %s", op)
}

func abs64(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

func floatOp(op string, a, b float64) (any, error) {
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, &Error{Kind: "ZeroDivisionError", Msg: "float division by zero"}
		}
		return a / b, nil
	case "//":
		if b == 0 {
			return nil, &Error{Kind: "ZeroDivisionError", Msg: "float floor division by zero"}
		}
		return math.Floor(a / b), nil
	case "%":
		if b == 0 {
			return nil, &Error{Kind: "ZeroDivisionError", Msg: "float modulo"}
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m, nil
	case "**":
		if a == 0 && b < 0 {
			return nil, &Error{Kind: "ZeroDivisionError", Msg: "0.0 cannot be raised to a negative power"}
		}
		return math.Pow(a, b), nil
	}
	return nil, typeErr("unsupported operator %s", op)
}

// percentFormat is Python's printf-style str % args.
func percentFormat(format string, args any) (any, error) {
	var list []any
	var mapping *Dict
	switch a := args.(type) {
	case *List:
		if a.Tuple {
			list = a.Items
		} else {
			list = []any{a}
		}
	case *Dict:
		mapping = a
		list = []any{a}
	case Undefined:
		mapping = NewDict() // it has __getitem__: Python takes it for a mapping
		list = []any{a}
	default:
		list = []any{a}
	}
	var b strings.Builder
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return nil, valueErr("incomplete format")
		}
		var arg any
		haveArg := false
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 || mapping == nil {
				return nil, typeErr("format requires a mapping")
			}
			if u, ok := args.(Undefined); ok {
				return nil, u.err()
			}
			v, ok := mapping.Get(format[i+1 : i+end])
			if !ok {
				return nil, &Error{Kind: "KeyError", Msg: pyRepr(format[i+1 : i+end])}
			}
			arg, haveArg = v, true
			i += end + 1
		}
		spec := fmtSpec{precision: -1}
		for ; i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0; i++ {
			spec.flags += string(format[i])
		}
		for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
			spec.width = min(spec.width*10+int(format[i]-'0'), MaxOutput+1)
		}
		if i < len(format) && format[i] == '.' {
			spec.precision = 0
			for i++; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
				spec.precision = min(spec.precision*10+int(format[i]-'0'), MaxOutput+1)
			}
		}
		if spec.width > MaxOutput || spec.precision > MaxOutput {
			return nil, &Error{Kind: "OverflowError", Msg: "format width is larger than the limit"}
		}
		if i >= len(format) {
			return nil, valueErr("incomplete format")
		}
		verb := format[i]
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if !haveArg {
			if next >= len(list) {
				return nil, typeErr("not enough arguments for format string")
			}
			arg = list[next]
			next++
		}
		s, err := formatOne(verb, spec, arg)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
	}
	// A list or dict argument has __getitem__, so Python takes it for a
	// mapping and does not complain that it went unused.
	if l, ok := args.(*List); next < len(list) && mapping == nil && !(ok && !l.Tuple) {
		return nil, typeErr("not all arguments converted during string formatting")
	}
	return limitStr(b.String())
}

type fmtSpec struct {
	flags     string
	width     int
	precision int
}

func (s fmtSpec) has(flag byte) bool { return strings.IndexByte(s.flags, flag) >= 0 }

// formatOne formats one printf-style conversion.
func formatOne(verb byte, spec fmtSpec, arg any) (string, error) {
	var s string
	numeric := false
	switch verb {
	case 's', 'r', 'a':
		if verb == 's' {
			s = pyStr(arg)
		} else {
			s = pyRepr(arg)
		}
		if spec.precision >= 0 && utf8.RuneCountInString(s) > spec.precision {
			s = string([]rune(s)[:spec.precision])
		}
	case 'd', 'i', 'u', 'x', 'X', 'o':
		i, f, isF, ok := number(arg)
		if !ok {
			return "", typeErr("%%%c format: a real number is required, not %s", verb, typeName(arg))
		}
		if isF {
			i = int64(f)
		}
		neg := i < 0
		u := uint64(abs64(i))
		switch verb {
		case 'x':
			s = strconv.FormatUint(u, 16)
		case 'X':
			s = strings.ToUpper(strconv.FormatUint(u, 16))
		case 'o':
			s = strconv.FormatUint(u, 8)
		default:
			s = strconv.FormatUint(u, 10)
		}
		if spec.has('#') && (verb == 'x' || verb == 'X' || verb == 'o') {
			s = "0" + string(verb) + s
		}
		s = signed(s, neg, spec)
		numeric = true
	case 'f', 'F', 'e', 'E', 'g', 'G':
		f := toFloatArg(arg)
		if _, _, _, ok := number(arg); !ok {
			return "", typeErr("must be real number, not %s", typeName(arg))
		}
		p := spec.precision
		if p < 0 {
			p = 6
		}
		s = formatFloat(math.Abs(f), verb, p, spec.has('#'))
		s = signed(s, math.Signbit(f) && !math.IsNaN(f), spec)
		numeric = true
	case 'c':
		switch a := arg.(type) {
		case string:
			s = a
		case int64:
			s = string(rune(a))
		default:
			return "", typeErr("%%c requires int or char")
		}
	default:
		return "", valueErr("unsupported format character '%c'", verb)
	}
	n := utf8.RuneCountInString(s)
	if n < spec.width {
		pad := spec.width - n
		switch {
		case spec.has('-'):
			s += strings.Repeat(" ", pad)
		case spec.has('0') && numeric:
			sign := ""
			if s != "" && (s[0] == '-' || s[0] == '+' || s[0] == ' ') {
				sign, s = s[:1], s[1:]
			}
			s = sign + strings.Repeat("0", pad) + s
		default:
			s = strings.Repeat(" ", pad) + s
		}
	}
	return s, nil
}

func toFloatArg(v any) float64 {
	i, f, isF, _ := number(v)
	if isF {
		return f
	}
	return float64(i)
}

func signed(s string, neg bool, spec fmtSpec) string {
	switch {
	case neg:
		return "-" + s
	case spec.has('+'):
		return "+" + s
	case spec.has(' '):
		return " " + s
	}
	return s
}

// formatFloat formats a non-negative float as C's printf does for f, e
// and g (Python's float formatting), with Python's names for the
// non-finite values.
func formatFloat(f float64, verb byte, prec int, alt bool) string {
	upper := verb == 'F' || verb == 'E' || verb == 'G'
	if math.IsInf(f, 0) || math.IsNaN(f) {
		s := "inf"
		if math.IsNaN(f) {
			s = "nan"
		}
		if upper {
			s = strings.ToUpper(s)
		}
		return s
	}
	var s string
	switch verb {
	case 'f', 'F':
		s = strconv.FormatFloat(f, 'f', prec, 64)
		if alt && prec == 0 {
			s += "."
		}
	case 'e', 'E':
		s = strconv.FormatFloat(f, 'e', prec, 64) // Go writes C's two-digit exponent
		if alt && prec == 0 {
			m, e, _ := strings.Cut(s, "e")
			s = m + ".e" + e
		}
	default: // g: scientific when the exponent is < -4 or >= the precision
		if prec == 0 {
			prec = 1
		}
		exp := 0
		if f != 0 {
			e := strconv.FormatFloat(f, 'e', prec-1, 64)
			exp, _ = strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
		}
		if exp < -4 || exp >= prec {
			s = strconv.FormatFloat(f, 'e', prec-1, 64)
			if !alt {
				m, e, _ := strings.Cut(s, "e")
				s = trimZeros(m) + "e" + e
			}
		} else {
			s = strconv.FormatFloat(f, 'f', prec-1-exp, 64)
			if !alt {
				s = trimZeros(s)
			}
		}
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return s
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
