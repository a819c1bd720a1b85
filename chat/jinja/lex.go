package jinja

import (
	"strings"
	"unicode/utf8"
)

// tokKind is the kind of an expression token inside {{ }} or {% %}.
type tokKind uint8

const (
	tokName tokKind = iota + 1
	tokString
	tokInt
	tokFloat
	tokOp
	tokEnd // the tag's end
)

type token struct {
	kind tokKind
	s    string // name, operator, or the decoded string literal
	i    int64
	f    float64
	line int
}

// segKind is the kind of a piece of template source.
type segKind uint8

const (
	segText  segKind = iota + 1
	segVar           // {{ ... }}
	segBlock         // {% ... %}
)

type segment struct {
	kind segKind
	text string  // segText
	toks []token // segVar, segBlock: ends with a tokEnd
	line int
}

// lex splits source into text, {{ }} and {% %} segments as jinja2's lexer
// does under HuggingFace's settings: newlines normalised to \n, one trailing
// newline dropped (keep_trailing_newline=False), comments removed,
// trim_blocks (the newline after a block or comment tag goes) and
// lstrip_blocks (spaces and tabs before a block or comment tag on its own
// line go), and the -/+ whitespace modifiers.
func lex(src string) ([]segment, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")

	var segs []segment
	pos, line := 0, 1    // line: the line pos is on
	lineStarting := true // the previous match ended a line (or this is the start)
	emit := func(text string, line int) {
		if text != "" {
			segs = append(segs, segment{kind: segText, text: text, line: line})
		}
	}
	for pos < len(src) {
		at := nextTag(src, pos)
		if at < 0 {
			emit(src[pos:], line)
			break
		}
		text := src[pos:at]
		tagLine := line + strings.Count(text, "\n")
		opener := src[at+1] // '{', '%' or '#'
		mod := byte(0)
		if at+2 < len(src) && (src[at+2] == '-' || src[at+2] == '+') {
			mod = src[at+2]
		}
		switch {
		case mod == '-':
			text = rstripSpace(text)
		case mod != '+' && opener != '{':
			// lstrip_blocks: only whitespace between the line's start and the tag.
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || lineStarting) && lpos < len(text) && isAllSpace(text[lpos:]) {
				text = text[:lpos]
			}
		}
		emit(text, line)
		body := at + 2
		if mod != 0 {
			body++
		}
		var next int
		switch opener {
		case '#':
			var err error
			if next, err = commentEnd(src, body, tagLine); err != nil {
				return nil, err
			}
		case '%':
			if rawStart, ok := rawBegin(src, body); ok {
				raw, after, err := rawBody(src, rawStart, tagLine)
				if err != nil {
					return nil, err
				}
				emit(raw, tagLine+strings.Count(src[at:rawStart], "\n"))
				next = after
				break
			}
			fallthrough
		default:
			kind := segBlock
			if opener == '{' {
				kind = segVar
			}
			toks, after, err := lexTag(src, body, tagLine, kind)
			if err != nil {
				return nil, err
			}
			segs = append(segs, segment{kind: kind, toks: toks, line: tagLine})
			next = after
		}
		line += strings.Count(src[pos:next], "\n")
		pos = next
		lineStarting = src[next-1] == '\n'
	}
	return segs, nil
}

// nextTag finds the next "{{", "{%" or "{#" at or after pos.
func nextTag(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 || pos+i+1 >= len(src) {
			return -1
		}
		switch src[pos+i+1] {
		case '{', '%', '#':
			return pos + i
		}
		pos += i + 1
	}
}

// commentEnd finds the end of a comment whose body starts at pos: "#}"
// followed by one newline (trim_blocks), "-#}" followed by all whitespace,
// or "+#}".
func commentEnd(src string, pos, line int) (next int, err error) {
	i := strings.Index(src[pos:], "#}")
	if i < 0 {
		return 0, syntaxErr(line, "Missing end of comment tag")
	}
	end := pos + i
	next = end + 2
	switch {
	case end > pos && src[end-1] == '-':
		next += len(src[next:]) - len(lstripSpace(src[next:]))
	case end > pos && src[end-1] == '+':
	default:
		if next < len(src) && src[next] == '\n' {
			next++
		}
	}
	return next, nil
}

// rawBegin reports whether the block tag whose body starts at pos is
// {% raw %}, and where the raw text starts.
func rawBegin(src string, pos int) (int, bool) {
	p := pos + len(src[pos:]) - len(lstripSpace(src[pos:]))
	if !strings.HasPrefix(src[p:], "raw") {
		return 0, false
	}
	p += 3
	p += len(src[p:]) - len(lstripSpace(src[p:]))
	switch {
	case strings.HasPrefix(src[p:], "-%}"):
		p += 3
		return p + len(src[p:]) - len(lstripSpace(src[p:])), true
	case strings.HasPrefix(src[p:], "%}"):
		return p + 2, true
	}
	return 0, false
}

// rawBody reads raw text up to {% endraw %}, applying the endraw tag's
// whitespace control to the text before it.
func rawBody(src string, pos, line int) (text string, next int, err error) {
	for p := pos; ; {
		i := strings.Index(src[p:], "{%")
		if i < 0 {
			return "", 0, syntaxErr(line, "Missing end of raw directive")
		}
		at := p + i
		q := at + 2
		mod := byte(0)
		if q < len(src) && (src[q] == '-' || src[q] == '+') {
			mod = src[q]
			q++
		}
		q += len(src[q:]) - len(lstripSpace(src[q:]))
		if !strings.HasPrefix(src[q:], "endraw") {
			p = at + 2
			continue
		}
		q += len("endraw")
		q += len(src[q:]) - len(lstripSpace(src[q:]))
		var after int
		switch {
		case strings.HasPrefix(src[q:], "+%}"):
			after = q + 3
		case strings.HasPrefix(src[q:], "-%}"):
			after = q + 3
			after += len(src[after:]) - len(lstripSpace(src[after:]))
		case strings.HasPrefix(src[q:], "%}"):
			after = q + 2
			if after < len(src) && src[after] == '\n' {
				after++
			}
		default:
			p = at + 2
			continue
		}
		text = src[pos:at]
		switch {
		case mod == '-':
			text = rstripSpace(text)
		case mod != '+':
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos < len(text) && isAllSpace(text[lpos:]) && (lpos > 0 || pos == 0 || src[pos-1] == '\n') {
				text = text[:lpos]
			}
		}
		return text, after, nil
	}
}

// operators, longest first so that "//" wins over "/".
var operators = []string{"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

// lexTag reads the tokens of a {{ }} or {% %} tag whose body starts at pos,
// up to and including its end delimiter. Inside brackets the end delimiter
// is not looked for, as jinja2 does, so "{{ {'a': {}} }}" lexes.
func lexTag(src string, pos, line int, kind segKind) ([]token, int, error) {
	var toks []token
	depth := 0
	for {
		for pos < len(src) {
			r, n := utf8.DecodeRuneInString(src[pos:])
			if !isPySpace(r) {
				break
			}
			if r == '\n' {
				line++
			}
			pos += n
		}
		if pos >= len(src) {
			if kind == segVar {
				return nil, 0, syntaxErr(line, "unexpected end of template, expected 'end of print statement'")
			}
			return nil, 0, syntaxErr(line, "unexpected end of template, expected 'end of statement block'")
		}
		if depth == 0 {
			if next, ok := tagEnd(src, pos, kind); ok {
				toks = append(toks, token{kind: tokEnd, line: line})
				return toks, next, nil
			}
		}
		c := src[pos]
		switch {
		case c == '\'' || c == '"':
			s, n, err := lexString(src[pos:], line)
			if err != nil {
				return nil, 0, err
			}
			toks = append(toks, token{kind: tokString, s: s, line: line})
			line += strings.Count(src[pos:pos+n], "\n")
			pos += n
		case c >= '0' && c <= '9':
			t, n, err := lexNumber(src[pos:], line)
			if err != nil {
				return nil, 0, err
			}
			// jinja2's float pattern refuses a float right after a dot, so
			// "x.0.1" is two subscripts.
			if t.kind == tokFloat && len(toks) > 0 && toks[len(toks)-1].kind == tokOp && toks[len(toks)-1].s == "." {
				t, n, _ = lexInt(src[pos:], line)
			}
			toks = append(toks, t)
			pos += n
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			n := 1
			for pos+n < len(src) {
				d := src[pos+n]
				if d != '_' && !(d >= 'a' && d <= 'z') && !(d >= 'A' && d <= 'Z') && !(d >= '0' && d <= '9') {
					break
				}
				n++
			}
			toks = append(toks, token{kind: tokName, s: src[pos : pos+n], line: line})
			pos += n
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(src[pos:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[pos:])
				return nil, 0, syntaxErr(line, "unexpected char %q", r)
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				if depth == 0 {
					return nil, 0, syntaxErr(line, "unexpected '%s'", op)
				}
				depth--
			}
			toks = append(toks, token{kind: tokOp, s: op, line: line})
			pos += len(op)
		}
	}
}

// tagEnd matches a tag's end delimiter at pos: for blocks "%}" and one
// newline (trim_blocks), "-%}" and all whitespace, or "+%}"; for
// variables "}}" or "-}}" and all whitespace.
func tagEnd(src string, pos int, kind segKind) (int, bool) {
	closer := "}}"
	if kind == segBlock {
		closer = "%}"
	}
	switch {
	case strings.HasPrefix(src[pos:], "-"+closer):
		next := pos + 3
		return next + len(src[next:]) - len(lstripSpace(src[next:])), true
	case kind == segBlock && strings.HasPrefix(src[pos:], "+%}"):
		return pos + 3, true
	case strings.HasPrefix(src[pos:], closer):
		next := pos + 2
		if kind == segBlock && next < len(src) && src[next] == '\n' {
			next++
		}
		return next, true
	}
	return 0, false
}

// lexString decodes a quoted literal as jinja2 does: Python's
// unicode-escape decoding of the text between the quotes.
func lexString(s string, line int) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(s) {
				return "", 0, syntaxErr(line, "truncated \\%c escape in string literal", e)
			}
			v, ok := parseHex(s[i : i+n])
			if !ok || v > utf8.MaxRune {
				return "", 0, syntaxErr(line, "bad \\%c escape in string literal", e)
			}
			b.WriteRune(rune(v))
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := int(e-'0'), 0
			for n < 2 && i+n < len(s) && s[i+n] >= '0' && s[i+n] <= '7' {
				v = v*8 + int(s[i+n]-'0')
				n++
			}
			b.WriteRune(rune(v))
			i += n
		default:
			// Python keeps an unknown escape as it is.
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, syntaxErr(line, "unexpected end of string literal")
}

func parseHex(s string) (int, bool) {
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v*16 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// lexNumber reads an integer (decimal, 0b, 0o, 0x, with _ separators) or a
// float (a fraction and/or an exponent).
func lexNumber(s string, line int) (token, int, error) {
	digits := func(p int) int { // [0-9] with single _ between digits
		q := p
		for q < len(s) && (s[q] >= '0' && s[q] <= '9' || s[q] == '_' && q > p && q+1 < len(s) && s[q+1] >= '0' && s[q+1] <= '9') {
			q++
		}
		return q
	}
	if len(s) > 1 && s[0] == '0' && strings.ContainsRune("bBoOxX", rune(s[1])) {
		return lexInt(s, line)
	}
	p := digits(0)
	isFloat := false
	if p+1 < len(s) && s[p] == '.' && s[p+1] >= '0' && s[p+1] <= '9' {
		p = digits(p + 1)
		isFloat = true
	}
	if p < len(s) && (s[p] == 'e' || s[p] == 'E') {
		q := p + 1
		if q < len(s) && (s[q] == '+' || s[q] == '-') {
			q++
		}
		if q < len(s) && s[q] >= '0' && s[q] <= '9' {
			p = digits(q)
			isFloat = true
		}
	}
	if !isFloat {
		return lexInt(s, line)
	}
	f, err := parsePyFloat(strings.ReplaceAll(s[:p], "_", ""))
	if err != nil {
		return token{}, 0, syntaxErr(line, "bad number %q", s[:p])
	}
	return token{kind: tokFloat, f: f, line: line}, p, nil
}

func lexInt(s string, line int) (token, int, error) {
	base, p := 10, 0
	if len(s) > 1 && s[0] == '0' {
		switch s[1] {
		case 'b', 'B':
			base, p = 2, 2
		case 'o', 'O':
			base, p = 8, 2
		case 'x', 'X':
			base, p = 16, 2
		}
	}
	start := p
	var v int64
	for p < len(s) {
		c := s[p]
		d := -1
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		case c == '_':
			p++
			continue
		}
		if d < 0 || d >= base {
			break
		}
		if v > (1<<63-1-int64(d))/int64(base) {
			return token{}, 0, syntaxErr(line, "integer literal %q is too large", s[:p+1])
		}
		v = v*int64(base) + int64(d)
		p++
	}
	if p == start {
		return token{}, 0, syntaxErr(line, "bad number %q", s[:p])
	}
	return token{kind: tokInt, i: v, line: line}, p, nil
}
