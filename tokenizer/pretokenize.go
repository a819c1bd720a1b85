package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regexes every family applies: the four patterns most
// vocabularies use are written as hand scanners (here), the rest run on
// the small regex engine of regex.go (the families are in prefamilies.go).
// Go's regexp has no look-ahead (\s+(?!\S)) and is slow here, so each
// scanner walks the alternatives in the order the backtracking engine
// (Oniguruma, in HF tokenizers) tries them and returns the same match.
//
// Every scanner returns the end of the pre-token starting at i (> i). The
// text is valid UTF-8: Encode repairs it first.

// Character classes of the regexes.
const (
	cL     = 1 << iota // \p{L}
	cN                 // \p{N}
	cS                 // \s
	cNL                // [\r\n]
	cUpper             // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k)
	cLower             // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k)
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for b := 0; b < utf8.RuneSelf; b++ {
		asciiClass[b] = classify(rune(b))
	}
}

func classify(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		switch {
		case unicode.Is(unicode.Lo, r), unicode.Is(unicode.Lm, r):
			return cL | cUpper | cLower
		case unicode.IsLower(r):
			return cL | cLower
		default: // Lu, Lt
			return cL | cUpper
		}
	case unicode.IsNumber(r):
		return cN
	case unicode.IsMark(r):
		return cUpper | cLower
	case r == '\r' || r == '\n':
		return cS | cNL
	case unicode.IsSpace(r):
		return cS
	}
	return 0
}

// classAt returns the class and size of the character at s[i].
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return classify(r), n
}

// isOther is [^\s\p{L}\p{N}].
func isOther(c uint8) bool { return c&(cS|cL|cN) == 0 }

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at s[i] (s[i] == '\”) and
// returns its length, 0 if none. With fold, matching is case-insensitive
// as (?i:...) is: Unicode simple case folding also lets ſ (U+017F) match s.
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	c := s[i+1]
	if fold && c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	switch c {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v', 'l':
		if i+2 >= len(s) {
			return 0
		}
		c2 := s[i+2]
		if fold && c2 >= 'A' && c2 <= 'Z' {
			c2 += 'a' - 'A'
		}
		if (c == 'r' || c == 'v') && c2 == 'e' || c == 'l' && c2 == 'l' {
			return 3
		}
	case 0xC5: // ſ is C5 BF
		if fold && i+2 < len(s) && s[i+2] == 0xBF {
			return 3
		}
	}
	return 0
}

// runOf extends from j over characters having any of the class bits.
func runOf(s string, j int, bits uint8) int {
	for j < len(s) {
		c, n := classAt(s, j)
		if c&bits == 0 {
			break
		}
		j += n
	}
	return j
}

// scanSpaces handles the whitespace alternatives shared by all patterns:
// \s*[\r\n]+ (when withNL), then \s+(?!\S), then \s+. c0 must be \s.
func scanSpaces(s string, i int, withNL bool) int {
	j, last, lastNL, count := i, i, -1, 0
	for j < len(s) {
		c, n := classAt(s, j)
		if c&cS == 0 {
			break
		}
		if c&cNL != 0 {
			lastNL = j + n
		}
		last = j
		j += n
		count++
	}
	if withNL && lastNL > 0 {
		// Greedy \s* then backtracking to the last line break.
		return lastNL
	}
	if j == len(s) || count == 1 {
		return j
	}
	// \s+(?!\S) gives back the last whitespace so the next pre-token can
	// start with it (" word").
	return last
}

// scanGPT2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func scanGPT2(s string, i int) int {
	if s[i] == '\'' {
		if k := contraction(s, i, false); k > 0 {
			return i + k
		}
	}
	c0, n0 := classAt(s, i)
	j, c := i, c0
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
		c, _ = classAt(s, j)
	}
	switch {
	case c&cL != 0:
		return runOf(s, j, cL)
	case c&cN != 0:
		return runOf(s, j, cN)
	case isOther(c):
		for j < len(s) {
			c, n := classAt(s, j)
			if !isOther(c) {
				break
			}
			j += n
		}
		return j
	}
	if c0&cS != 0 {
		return scanSpaces(s, i, false)
	}
	return i + n0
}

// scanLlama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func scanLlama3(s string, i int) int { return scanCL100k(s, i, 3) }

// scanQwen2 is scanLlama3 with \p{N} taking single digits.
func scanQwen2(s string, i int) int { return scanCL100k(s, i, 1) }

func scanCL100k(s string, i int, maxDigits int) int {
	if s[i] == '\'' {
		if k := contraction(s, i, true); k > 0 {
			return i + k
		}
	}
	c0, n0 := classAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0&cL != 0 {
		return runOf(s, i+n0, cL)
	}
	if c0&(cNL|cN) == 0 && i+n0 < len(s) {
		if c1, n1 := classAt(s, i+n0); c1&cL != 0 {
			return runOf(s, i+n0+n1, cL)
		}
	}
	// \p{N}{1,3}
	if c0&cN != 0 {
		return digitRun(s, i+n0, maxDigits)
	}
	// ?[^\s\p{L}\p{N}]+[\r\n]*
	if j := otherRun(s, i, c0, n0); j > i {
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	if c0&cS != 0 {
		return scanSpaces(s, i, true)
	}
	return i + n0
}

// otherRun matches " ?[^\s\p{L}\p{N}]+" at i and returns its end, or i.
func otherRun(s string, i int, c0 uint8, n0 int) int {
	j := i
	if s[i] == ' ' {
		if i+1 >= len(s) {
			return i
		}
		j = i + 1
		c0, n0 = classAt(s, j)
	}
	if !isOther(c0) {
		return i
	}
	j += n0
	for j < len(s) {
		c, n := classAt(s, j)
		if !isOther(c) {
			break
		}
		j += n
	}
	return j
}

// scanO200k is the gpt-oss / GPT-4o pattern:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func scanO200k(s string, i int) int {
	c0, n0 := classAt(s, i)
	// The optional prefix is tried taken first, then empty.
	prefix := c0&(cNL|cL|cN) == 0
	if prefix {
		if e := upperLower(s, i+n0); e > 0 {
			return e + contraction(s, e, true)
		}
	}
	if e := upperLower(s, i); e > 0 {
		return e + contraction(s, e, true)
	}
	if prefix {
		if e := upperThenLower(s, i+n0); e > 0 {
			return e + contraction(s, e, true)
		}
	}
	if e := upperThenLower(s, i); e > 0 {
		return e + contraction(s, e, true)
	}
	if c0&cN != 0 {
		return digitRun(s, i+n0, 3)
	}
	if j := otherRun(s, i, c0, n0); j > i {
		for j < len(s) && (s[j] == '\r' || s[j] == '\n' || s[j] == '/') {
			j++
		}
		return j
	}
	if c0&cS != 0 {
		return scanSpaces(s, i, true)
	}
	return i + n0
}

// upperLower matches [Upper]*[Lower]+ at j and returns its end, or 0.
// Greedy [Upper]* may have to give characters back, since Lm, Lo and M are
// in both classes: then [Lower]+ gets the last such character of the run.
func upperLower(s string, j int) int {
	lastLowerEnd := 0
	k := j
	for k < len(s) {
		c, n := classAt(s, k)
		if c&cUpper == 0 {
			break
		}
		k += n
		if c&cLower != 0 {
			lastLowerEnd = k
		}
	}
	if k < len(s) {
		if c, n := classAt(s, k); c&cLower != 0 {
			return runOf(s, k+n, cLower)
		}
	}
	return lastLowerEnd
}

// upperThenLower matches [Upper]+[Lower]* at j and returns its end, or 0.
func upperThenLower(s string, j int) int {
	if j >= len(s) {
		return 0
	}
	k := runOf(s, j, cUpper)
	if k == j {
		return 0
	}
	return runOf(s, k, cLower)
}

// digitRun extends a run of \p{N} that started with one digit ending at j
// to at most limit digits, and returns where it ends.
func digitRun(s string, j, limit int) int {
	for k := 1; k < limit && j < len(s); k++ {
		c, n := classAt(s, j)
		if c&cN == 0 {
			break
		}
		j += n
	}
	return j
}
