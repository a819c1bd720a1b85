package httpapi

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Streamed chunks are written with these appenders into a reused buffer:
// encoding/json would reflect and allocate for every token.

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD; U+2028 and U+2029 are escaped because JavaScript clients that
// eval or split on line terminators would otherwise break on them.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFloat appends f as a JSON number; JSON has no NaN or infinity, so
// those become null (a logprob of -Inf is a token the model ruled out).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendFloat32 keeps float32 values short (-0.25 rather than
// -0.25000000372529).
func appendFloat32(b []byte, f float32) []byte {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, float64(f), 'g', -1, 32)
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// appendByteArray appends the bytes of s as a JSON array of integers, the
// "bytes" field of OpenAI's chat logprobs.
func appendByteArray(b []byte, s string) []byte {
	b = append(b, '[')
	for i := 0; i < len(s); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(s[i]), 10)
	}
	return append(b, ']')
}

func strconvAppendUint(b []byte, n uint64) []byte { return strconv.AppendUint(b, n, 10) }

func quote(s string) string { return string(appendJSONString(nil, s)) }
