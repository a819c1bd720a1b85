package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting FromJSON accepts.
const maxJSONDepth = 200

// FromJSON decodes a JSON document into template values as Python's
// json.loads does: objects keep their key order (a repeated key keeps its
// first place and last value), integers stay ints and numbers with a
// fraction or exponent are floats.
func FromJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("jinja: JSON: data after the value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("jinja: JSON nested deeper than %d", maxJSONDepth)
	}
	t, err := d.Token()
	if err != nil {
		return nil, fmt.Errorf("jinja: JSON: %w", err)
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '[':
			items := []any{}
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				items = append(items, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, fmt.Errorf("jinja: JSON: %w", err)
			}
			return newList(items), nil
		case '{':
			m := NewDict()
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, fmt.Errorf("jinja: JSON: %w", err)
				}
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				m.Set(k.(string), v)
			}
			if _, err := d.Token(); err != nil {
				return nil, fmt.Errorf("jinja: JSON: %w", err)
			}
			return m, nil
		}
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
		}
		// Beyond int64 Python keeps an exact int; ringlm has only floats there.
		return parsePyFloat(s)
	case string, bool, nil:
		return x, nil
	}
	return nil, fmt.Errorf("jinja: JSON: unexpected %v", t)
}

// jsonOpts are json.dumps's options as HuggingFace's tojson passes them.
type jsonOpts struct {
	ensureASCII bool
	indent      string // "" with hasIndent: newlines without indentation
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

// toJSON is json.dumps(v, ...) with Python's formatting: ", " and ": "
// between items (", " becomes "," when indenting), floats as repr, no
// escaping of non-ASCII unless ensure_ascii.
func toJSON(v any, o jsonOpts) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, o, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, v any, o jsonOpts, depth int) error {
	if depth > maxJSONDepth {
		return valueErr("Circular reference detected")
	}
	if b.Len() > MaxOutput {
		return &Error{Kind: "OverflowError", Msg: "JSON is larger than the limit"}
	}
	newline := func(d int) {
		if o.hasIndent {
			b.WriteByte('\n')
			for range d {
				b.WriteString(o.indent)
			}
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(floatRepr(x))
		}
	case string:
		writeJSONString(b, x, o.ensureASCII)
	case *List:
		if x.view != "" {
			return typeErr("Object of type %s is not JSON serializable", x.view)
		}
		if len(x.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range x.Items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			if err := writeJSON(b, it, o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case *Dict:
		if x.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		order := make([]int, x.Len())
		keys := make([]string, x.Len())
		for i, k := range x.keys {
			order[i] = i
			switch k := k.(type) {
			case string:
				keys[i] = k
			case nil:
				keys[i] = "null"
			case bool, int64, float64:
				s := strings.Builder{}
				if err := writeJSON(&s, k, o, depth+1); err != nil {
					return err
				}
				keys[i] = s.String()
			default:
				return typeErr("keys must be str, int, float, bool or None, not %s", typeName(k))
			}
		}
		if o.sortKeys {
			for _, k := range x.keys {
				if _, ok := k.(string); !ok {
					return typeErr("'<' not supported between instances of '%s' and 'str'", typeName(k))
				}
			}
			slices.SortStableFunc(order, func(a, c int) int { return strings.Compare(keys[a], keys[c]) })
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			writeJSONString(b, keys[i], o.ensureASCII)
			b.WriteString(o.keySep)
			if err := writeJSON(b, x.vals[i], o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		return typeErr("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// writeJSONString quotes s as Python's json module: \" \\ \n \r \t \b \f
// by name, other control characters as \u00XX; with ensureASCII also
// everything outside printable ASCII, as \uXXXX (surrogate pairs above
// U+FFFF).
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case !ensureASCII || r < 0x7f:
				b.WriteRune(r)
			case r <= 0xffff:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			}
		}
	}
	b.WriteByte('"')
}
