package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// strFormat is Python's str.format: {} {0} {name} fields with .attr and
// [key] lookups, !r/!s/!a conversions and the format-spec mini-language.
func strFormat(format string, args []any, kwargs *Dict) (any, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '{' && i+1 < len(format) && format[i+1] == '{':
			b.WriteByte('{')
			i++
			continue
		case c == '}' && i+1 < len(format) && format[i+1] == '}':
			b.WriteByte('}')
			i++
			continue
		case c == '}':
			return nil, valueErr("Single '}' encountered in format string")
		case c != '{':
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(format[i:], '}')
		if end < 0 {
			return nil, valueErr("Single '{' encountered in format string")
		}
		field := format[i+1 : i+end]
		i += end
		spec := ""
		if j := strings.IndexByte(field, ':'); j >= 0 {
			field, spec = field[:j], field[j+1:]
		}
		conv := byte(0)
		if j := strings.IndexByte(field, '!'); j >= 0 {
			if j+2 != len(field) {
				return nil, valueErr("expected ':' after conversion specifier")
			}
			field, conv = field[:j], field[j+1]
		}
		// The first name or index, then .attr and [key] parts.
		j := strings.IndexAny(field, ".[")
		if j < 0 {
			j = len(field)
		}
		head, rest := field[:j], field[j:]
		var v any
		switch {
		case head == "":
			if auto >= len(args) {
				return nil, &Error{Kind: "IndexError", Msg: fmt.Sprintf("Replacement index %d out of range for positional args tuple", auto)}
			}
			v = args[auto]
			auto++
		case head[0] >= '0' && head[0] <= '9':
			n, err := strconv.Atoi(head)
			if err != nil || n >= len(args) {
				return nil, &Error{Kind: "IndexError", Msg: fmt.Sprintf("Replacement index %s out of range for positional args tuple", head)}
			}
			v = args[n]
		default:
			var ok bool
			if kwargs != nil {
				v, ok = kwargs.Get(head)
			}
			if !ok {
				return nil, &Error{Kind: "KeyError", Msg: pyRepr(head)}
			}
		}
		for rest != "" {
			var err error
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					k = len(rest) - 1
				}
				if v, err = getattr(v, rest[1:1+k]); err != nil {
					return nil, err
				}
				rest = rest[1+k:]
				continue
			}
			k := strings.IndexByte(rest, ']')
			if k < 0 {
				return nil, valueErr("Missing ']' in format string")
			}
			var key any = rest[1:k]
			if n, err := strconv.ParseInt(rest[1:k], 10, 64); err == nil {
				key = n
			}
			if v, err = getitem(v, key); err != nil {
				return nil, err
			}
			rest = rest[k+1:]
		}
		switch conv {
		case 'r', 'a':
			v = pyRepr(v)
		case 's':
			v = pyStr(v)
		case 0:
		default:
			return nil, valueErr("Unknown conversion specifier %c", conv)
		}
		s, err := formatSpec(v, spec)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
	}
	return limitStr(b.String())
}

// formatSpec is Python's format(v, spec): [[fill]align][sign][#][0][width][,|_][.precision][type].
func formatSpec(v any, spec string) (string, error) {
	if spec == "" {
		return pyStr(v), nil
	}
	fill, align := " ", byte(0)
	if r, n := utf8.DecodeRuneInString(spec); n > 0 && n < len(spec) && strings.IndexByte("<>=^", spec[n]) >= 0 {
		fill, align, spec = string(r), spec[n], spec[n+1:]
	} else if spec != "" && strings.IndexByte("<>=^", spec[0]) >= 0 {
		align, spec = spec[0], spec[1:]
	}
	sign := byte('-')
	if spec != "" && strings.IndexByte("+- ", spec[0]) >= 0 {
		sign, spec = spec[0], spec[1:]
	}
	alt := false
	if spec != "" && spec[0] == '#' {
		alt, spec = true, spec[1:]
	}
	if spec != "" && spec[0] == '0' {
		if align == 0 {
			fill, align = "0", '='
		}
		spec = spec[1:]
	}
	width := 0
	for spec != "" && spec[0] >= '0' && spec[0] <= '9' {
		width = min(width*10+int(spec[0]-'0'), MaxOutput+1)
		spec = spec[1:]
	}
	group := ""
	if spec != "" && (spec[0] == ',' || spec[0] == '_') {
		group, spec = spec[:1], spec[1:]
	}
	prec := -1
	if spec != "" && spec[0] == '.' {
		prec = 0
		spec = spec[1:]
		for spec != "" && spec[0] >= '0' && spec[0] <= '9' {
			prec = min(prec*10+int(spec[0]-'0'), MaxOutput+1)
			spec = spec[1:]
		}
	}
	typ := byte(0)
	if len(spec) == 1 {
		typ = spec[0]
	} else if spec != "" {
		return "", valueErr("Invalid format specifier")
	}
	if width > MaxOutput || prec > MaxOutput {
		return "", &Error{Kind: "OverflowError", Msg: "width is larger than the limit"}
	}

	var body string
	neg := false
	switch x := v.(type) {
	case string:
		if typ != 0 && typ != 's' {
			return "", valueErr("Unknown format code '%c' for object of type 'str'", typ)
		}
		body = x
		if prec >= 0 && utf8.RuneCountInString(body) > prec {
			body = string([]rune(body)[:prec])
		}
		if align == 0 {
			align = '<'
		}
	case bool, int64, float64:
		i, f, isF, _ := number(x)
		if _, isBool := x.(bool); isBool && typ == 0 {
			body = pyStr(x)
			break
		}
		switch {
		case !isF && (typ == 0 || typ == 'd' || typ == 'n'):
			neg, body = i < 0, strconv.FormatUint(uint64(abs64(i)), 10)
			body = groupDigits(body, group)
		case !isF && strings.IndexByte("xXob", typ) >= 0:
			base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'b': 2}[typ]
			neg, body = i < 0, strconv.FormatUint(uint64(abs64(i)), base)
			if typ == 'X' {
				body = strings.ToUpper(body)
			}
			if alt {
				body = "0" + string(typ) + body
			}
		case !isF && typ == 'c':
			body = string(rune(i))
		default:
			if !isF {
				f = float64(i)
			}
			neg = math.Signbit(f) && !math.IsNaN(f)
			switch typ {
			case 0:
				if prec < 0 {
					body = floatRepr(math.Abs(f))
				} else {
					body = formatFloat(math.Abs(f), 'g', max(prec, 1), alt)
				}
			case '%':
				p := prec
				if p < 0 {
					p = 6
				}
				body = formatFloat(math.Abs(f)*100, 'f', p, alt) + "%"
			case 'f', 'F', 'e', 'E', 'g', 'G':
				p := prec
				if p < 0 {
					p = 6
				}
				body = formatFloat(math.Abs(f), typ, p, alt)
			default:
				return "", valueErr("Unknown format code '%c' for object of type '%s'", typ, typeName(v))
			}
			if group != "" {
				intPart, frac, _ := strings.Cut(body, ".")
				body = groupDigits(intPart, group)
				if frac != "" || strings.Contains(body, ".") {
					body += "." + frac
				}
			}
		}
		if align == 0 {
			align = '>'
		}
	default:
		if typ != 0 && typ != 's' {
			return "", valueErr("Unknown format code '%c' for object of type '%s'", typ, typeName(v))
		}
		body = pyStr(v)
		if align == 0 {
			align = '<'
		}
	}
	prefix := ""
	switch {
	case neg:
		prefix = "-"
	case sign == '+':
		prefix = "+"
	case sign == ' ':
		prefix = " "
	}
	n := utf8.RuneCountInString(prefix + body)
	if n >= width {
		return prefix + body, nil
	}
	padding := width - n
	switch align {
	case '<':
		return prefix + body + strings.Repeat(fill, padding), nil
	case '^':
		left := padding / 2
		return strings.Repeat(fill, left) + prefix + body + strings.Repeat(fill, padding-left), nil
	case '=':
		return prefix + strings.Repeat(fill, padding) + body, nil
	}
	return strings.Repeat(fill, padding) + prefix + body, nil
}

func groupDigits(digits, sep string) string {
	if sep == "" || len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	first := len(digits) % 3
	if first > 0 {
		b.WriteString(digits[:first])
	}
	for i := first; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

var (
	weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months   = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// Strftime formats t as Python's datetime.strftime does on Linux (glibc,
// C locale) for a naive datetime: %z and %Z are empty. glibc's flags -
// (no padding), _ (space padding), 0 and ^ (upper case) are understood;
// an unknown directive is kept as it is.
func Strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		start := i
		i++
		flag := byte(0)
		if strings.IndexByte("-_0^#", format[i]) >= 0 && i+1 < len(format) {
			flag = format[i]
			i++
		}
		num := func(v, width int, padc byte) string {
			s := strconv.Itoa(v)
			switch flag {
			case '-':
				return s
			case '_':
				padc = ' '
			case '0':
				padc = '0'
			}
			for len(s) < width {
				s = string(padc) + s
			}
			return s
		}
		text := func(s string) string {
			if flag == '^' {
				return strings.ToUpper(s)
			}
			return s
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		isoYear, isoWeek := t.ISOWeek()
		switch format[i] {
		case 'a':
			b.WriteString(text(weekdays[t.Weekday()][:3]))
		case 'A':
			b.WriteString(text(weekdays[t.Weekday()]))
		case 'b', 'h':
			b.WriteString(text(months[t.Month()-1][:3]))
		case 'B':
			b.WriteString(text(months[t.Month()-1]))
		case 'c':
			b.WriteString(Strftime(t, "%a %b %e %H:%M:%S %Y"))
		case 'C':
			b.WriteString(num(t.Year()/100, 2, '0'))
		case 'd':
			b.WriteString(num(t.Day(), 2, '0'))
		case 'D', 'x':
			b.WriteString(Strftime(t, "%m/%d/%y"))
		case 'e':
			b.WriteString(num(t.Day(), 2, ' '))
		case 'f':
			b.WriteString(fmt.Sprintf("%06d", t.Nanosecond()/1000))
		case 'F':
			b.WriteString(Strftime(t, "%Y-%m-%d"))
		case 'g':
			b.WriteString(num(isoYear%100, 2, '0'))
		case 'G':
			b.WriteString(num(isoYear, 1, '0'))
		case 'H':
			b.WriteString(num(t.Hour(), 2, '0'))
		case 'I':
			b.WriteString(num(hour12, 2, '0'))
		case 'j':
			b.WriteString(num(t.YearDay(), 3, '0'))
		case 'k':
			b.WriteString(num(t.Hour(), 2, ' '))
		case 'l':
			b.WriteString(num(hour12, 2, ' '))
		case 'm':
			b.WriteString(num(int(t.Month()), 2, '0'))
		case 'M':
			b.WriteString(num(t.Minute(), 2, '0'))
		case 'n':
			b.WriteByte('\n')
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'P':
			if t.Hour() < 12 {
				b.WriteString("am")
			} else {
				b.WriteString("pm")
			}
		case 'r':
			b.WriteString(Strftime(t, "%I:%M:%S %p"))
		case 'R':
			b.WriteString(Strftime(t, "%H:%M"))
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'S':
			b.WriteString(num(t.Second(), 2, '0'))
		case 't':
			b.WriteByte('\t')
		case 'T', 'X':
			b.WriteString(Strftime(t, "%H:%M:%S"))
		case 'u':
			b.WriteString(strconv.Itoa((int(t.Weekday())+6)%7 + 1))
		case 'U':
			b.WriteString(num((t.YearDay()+6-int(t.Weekday()))/7, 2, '0'))
		case 'V':
			b.WriteString(num(isoWeek, 2, '0'))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'W':
			b.WriteString(num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2, '0'))
		case 'y':
			b.WriteString(num(t.Year()%100, 2, '0'))
		case 'Y':
			b.WriteString(num(t.Year(), 1, '0'))
		case 'z', 'Z':
		case '%':
			b.WriteByte('%')
		default:
			b.WriteString(format[start : i+1])
		}
	}
	return b.String()
}
