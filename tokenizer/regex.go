package tokenizer

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A small backtracking regex engine for the pre-tokenizer patterns that
// have no hand-written scanner. Go's regexp has no look-ahead, and these
// patterns need it ((?!\S), (?=[\p{L}]), (?=(?:\d{3})*\b)), so they are
// compiled here into a program for a backtracking machine that tries
// alternatives in the order a Perl-style engine (Oniguruma in HF
// tokenizers, Python's regex module) does, and so returns the same match.
//
// Supported: literals, escapes (\r \n \t \f \v and escaped punctuation),
// classes with ranges, negation, nesting and intersection (&&), \p{...}
// general categories and scripts, \s \S \d \D \w \W, groups (...) and
// (?:...), case-insensitive groups (?i:...), look-ahead (?=...) (?!...),
// greedy and lazy quantifiers * + ? {n} {n,} {n,m}, anchors ^ $ \b \B and
// the dot. Classes follow Unicode: \s is White_Space, \d is Nd, \w is
// UTS #18's word class (alphabetic, marks, Nd, Pc, Join_Control).
//
// Matching memoizes (instruction, position) pairs that failed, as RE2's
// bit-state backtracker does: with no captures and no back-references the
// outcome from a state does not depend on how it was reached, so a search
// costs at most instructions × positions steps instead of exponential
// time.

type reOp uint8

const (
	opRune     reOp = iota // consume one character of class arg
	opSplit                // continue at arg, on failure at alt
	opJmp                  // continue at arg
	opMatch                // success
	opLook                 // look-ahead program arg (negated when alt == 1)
	opBegin                // ^: start of the text
	opEnd                  // $: end of the text
	opWordB                // \b
	opNotWordB             // \B
)

type reInst struct {
	op  reOp
	arg int32
	alt int32
}

// reProg is a compiled pattern.
type reProg struct {
	src     string
	inst    []reInst
	classes []*charClass
	looks   []*reProg
	// first holds the characters a match can start with, nil when a
	// match may start anywhere (an empty match, or an assertion first).
	first *charClass
	// run is set when the pattern is one class repeated (\p{N}+,
	// [0-9][0-9][0-9], \p{N}{1,3}): find then scans instead of backtracking.
	run *classRun
}

// classRun is the pattern class{min,max} (max < 0: unbounded), min >= 1.
type classRun struct {
	class    *charClass
	min, max int
}

func (p *reProg) String() string { return p.src }

// compileRegex parses and compiles a pattern.
func compileRegex(src string) (*reProg, error) {
	ps := &reParser{src: src}
	n, err := ps.alternation()
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	if ps.pos < len(src) {
		return nil, fmt.Errorf("regex %q: unbalanced ) at offset %d", src, ps.pos)
	}
	p, err := compileNode(n, src)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	p.run = asClassRun(n)
	return p, nil
}

// asClassRun recognizes a class repeated: C, C{n,m}, C+ or C C C with the
// same class.
func asClassRun(n *reNode) *classRun {
	switch n.kind {
	case nClass:
		return &classRun{n.class, 1, 1}
	case nRepeat:
		if s := n.subs[0]; s.kind == nClass && n.min >= 1 && !n.lazy {
			return &classRun{s.class, n.min, n.max}
		}
	case nCat:
		first := n.subs[0]
		for _, s := range n.subs {
			if s.kind != nClass || !reflect.DeepEqual(s.class, first.class) {
				return nil
			}
		}
		return &classRun{first.class, len(n.subs), len(n.subs)}
	}
	return nil
}

// ---- parse tree ----

type nodeKind uint8

const (
	nClass nodeKind = iota
	nCat
	nAlt
	nRepeat
	nLook
	nAssert
)

type reNode struct {
	kind     nodeKind
	class    *charClass
	subs     []*reNode
	min, max int // nRepeat; max < 0: unbounded
	lazy     bool
	neg      bool // nLook: (?!...)
	assert   reOp // nAssert
}

// canBeEmpty reports whether n can match without consuming anything.
func (n *reNode) canBeEmpty() bool {
	switch n.kind {
	case nClass:
		return false
	case nCat:
		for _, s := range n.subs {
			if !s.canBeEmpty() {
				return false
			}
		}
		return true
	case nAlt:
		for _, s := range n.subs {
			if s.canBeEmpty() {
				return true
			}
		}
		return false
	case nRepeat:
		return n.min == 0 || n.subs[0].canBeEmpty()
	}
	return true
}

type reParser struct {
	src  string
	pos  int
	fold bool // inside (?i:...)
}

func (p *reParser) more() bool { return p.pos < len(p.src) }

func (p *reParser) peek() rune {
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return r
}

func (p *reParser) next() rune {
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return r
}

func (p *reParser) eat(s string) bool {
	if strings.HasPrefix(p.src[p.pos:], s) {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *reParser) alternation() (*reNode, error) {
	var alts []*reNode
	for {
		s, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		if !p.eat("|") {
			break
		}
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &reNode{kind: nAlt, subs: alts}, nil
}

func (p *reParser) sequence() (*reNode, error) {
	cat := &reNode{kind: nCat}
	for p.more() {
		if c := p.src[p.pos]; c == '|' || c == ')' {
			break
		}
		a, err := p.atom()
		if err != nil {
			return nil, err
		}
		if a, err = p.quantifier(a); err != nil {
			return nil, err
		}
		cat.subs = append(cat.subs, a)
	}
	if len(cat.subs) == 1 {
		return cat.subs[0], nil
	}
	return cat, nil
}

func (p *reParser) atom() (*reNode, error) {
	start := p.pos
	switch r := p.next(); r {
	case '(':
		fold := p.fold
		defer func() { p.fold = fold }()
		var look, neg bool
		switch {
		case p.eat("?:"):
		case p.eat("?="):
			look = true
		case p.eat("?!"):
			look, neg = true, true
		case p.eat("?i:"):
			p.fold = true
		case p.eat("?"):
			return nil, fmt.Errorf("unsupported group syntax at offset %d", start)
		}
		n, err := p.alternation()
		if err != nil {
			return nil, err
		}
		if !p.eat(")") {
			return nil, fmt.Errorf("missing ) for the group at offset %d", start)
		}
		if look {
			return &reNode{kind: nLook, subs: []*reNode{n}, neg: neg}, nil
		}
		return n, nil
	case '[':
		c, err := p.class()
		if err != nil {
			return nil, err
		}
		return &reNode{kind: nClass, class: c}, nil
	case '\\':
		return p.escape()
	case '.':
		c := &charClass{neg: true, ranges: []runeRange{{'\n', '\n'}}}
		return &reNode{kind: nClass, class: c.finish()}, nil
	case '^':
		return &reNode{kind: nAssert, assert: opBegin}, nil
	case '$':
		return &reNode{kind: nAssert, assert: opEnd}, nil
	case '*', '+', '?', '{':
		return nil, fmt.Errorf("quantifier %q without operand at offset %d", r, start)
	case utf8.RuneError:
		return nil, fmt.Errorf("invalid UTF-8 at offset %d", start)
	default:
		return &reNode{kind: nClass, class: p.literal(r)}, nil
	}
}

// literal is the class of one character, with its case variants in a
// case-insensitive group.
func (p *reParser) literal(r rune) *charClass {
	c := &charClass{}
	c.addRune(r, p.fold)
	return c.finish()
}

func (p *reParser) escape() (*reNode, error) {
	if !p.more() {
		return nil, fmt.Errorf("trailing backslash")
	}
	switch p.peek() {
	case 'b':
		p.pos++
		return &reNode{kind: nAssert, assert: opWordB}, nil
	case 'B':
		p.pos++
		return &reNode{kind: nAssert, assert: opNotWordB}, nil
	}
	c := &charClass{}
	if err := p.classEscape(c); err != nil {
		return nil, err
	}
	return &reNode{kind: nClass, class: c.finish()}, nil
}

// classEscape adds what the escape at p.pos (after the backslash) stands
// for to c: a class shorthand, a property, or one character.
func (p *reParser) classEscape(c *charClass) error {
	at := p.pos - 1
	r := p.next()
	switch r {
	case 's', 'd', 'w':
		c.tables = append(c.tables, shorthand[r]...)
	case 'S', 'D', 'W':
		c.subs = append(c.subs, (&charClass{neg: true, tables: shorthand[unicode.ToLower(r)]}).finish())
	case 'p', 'P':
		if !p.eat("{") {
			return fmt.Errorf("\\%c without {name} at offset %d", r, at)
		}
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return fmt.Errorf("unterminated \\%c{ at offset %d", r, at)
		}
		name := p.src[p.pos : p.pos+end]
		p.pos += end + 1
		t, ok := unicodeClass(name)
		if !ok {
			return fmt.Errorf("unknown property \\%c{%s}", r, name)
		}
		if r == 'p' {
			c.tables = append(c.tables, t...)
		} else {
			c.subs = append(c.subs, (&charClass{neg: true, tables: t}).finish())
		}
	default:
		lit, ok := escapedRune(r)
		if !ok {
			return fmt.Errorf("unsupported escape \\%c at offset %d", r, at)
		}
		c.addRune(lit, p.fold)
	}
	return nil
}

func escapedRune(r rune) (rune, bool) {
	switch r {
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'f':
		return '\f', true
	case 'v':
		return '\v', true
	case '0':
		return 0, true
	}
	if r < utf8.RuneSelf && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
		return r, true
	}
	return 0, false
}

// class parses a bracket expression after its [.
func (p *reParser) class() (*charClass, error) {
	start := p.pos - 1
	c := &charClass{}
	if p.eat("^") {
		c.neg = true
	}
	parts := []*charClass{c} // c and its && operands
	items := c
	// A ] first is a member, as in Perl, Python and Oniguruma.
	for first := true; ; first = false {
		if !p.more() {
			return nil, fmt.Errorf("unterminated [ at offset %d", start)
		}
		if !first && p.eat("]") {
			break
		}
		if p.eat("&&") {
			// [A&&B]: the items so far intersected with the rest.
			rest := &charClass{}
			items.and = rest
			items = rest
			parts = append(parts, rest)
			continue
		}
		if p.eat("[") {
			sub, err := p.class()
			if err != nil {
				return nil, err
			}
			items.subs = append(items.subs, sub)
			continue
		}
		lo, isChar, err := p.classChar(items)
		if err != nil {
			return nil, err
		}
		if !isChar {
			continue
		}
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			hi, isChar, err := p.classChar(nil)
			if err != nil {
				return nil, err
			}
			if !isChar || hi < lo {
				return nil, fmt.Errorf("bad range in class at offset %d", start)
			}
			if err := items.addRange(lo, hi, p.fold); err != nil {
				return nil, err
			}
			continue
		}
		items.addRune(lo, p.fold)
	}
	for i := len(parts) - 1; i >= 0; i-- {
		parts[i].finish()
	}
	return c, nil
}

// classChar reads one class member. A class escape (\p{L}, \s) is added
// to into and reported with isChar false; a character is returned.
func (p *reParser) classChar(into *charClass) (r rune, isChar bool, err error) {
	r = p.next()
	if r == utf8.RuneError {
		return 0, false, fmt.Errorf("invalid UTF-8 in class")
	}
	if r != '\\' {
		return r, true, nil
	}
	if !p.more() {
		return 0, false, fmt.Errorf("trailing backslash")
	}
	switch p.peek() {
	case 's', 'S', 'd', 'D', 'w', 'W', 'p', 'P':
		if into == nil {
			return 0, false, fmt.Errorf("class escape as range end")
		}
		return 0, false, p.classEscape(into)
	}
	e := p.next()
	lit, ok := escapedRune(e)
	if !ok {
		return 0, false, fmt.Errorf("unsupported escape \\%c in class", e)
	}
	return lit, true, nil
}

func (p *reParser) quantifier(a *reNode) (*reNode, error) {
	if !p.more() {
		return a, nil
	}
	at := p.pos
	mn, mx := 0, 0
	switch p.src[p.pos] {
	case '*':
		mn, mx = 0, -1
		p.pos++
	case '+':
		mn, mx = 1, -1
		p.pos++
	case '?':
		mn, mx = 0, 1
		p.pos++
	case '{':
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return nil, fmt.Errorf("unterminated { at offset %d", at)
		}
		body := p.src[p.pos+1 : p.pos+end]
		lo, hi, comma := strings.Cut(body, ",")
		var err error
		if mn, err = strconv.Atoi(lo); err != nil {
			return nil, fmt.Errorf("bad count {%s} at offset %d", body, at)
		}
		switch {
		case !comma:
			mx = mn
		case hi == "":
			mx = -1
		default:
			if mx, err = strconv.Atoi(hi); err != nil || mx < mn {
				return nil, fmt.Errorf("bad count {%s} at offset %d", body, at)
			}
		}
		if mn > 1000 || mx > 1000 {
			return nil, fmt.Errorf("count {%s} too large at offset %d", body, at)
		}
		p.pos += end + 1
	default:
		return a, nil
	}
	if a.kind == nLook || a.kind == nAssert {
		return nil, fmt.Errorf("quantified assertion at offset %d", at)
	}
	lazy := p.eat("?")
	if p.more() && p.src[p.pos] == '+' {
		return nil, fmt.Errorf("possessive quantifier at offset %d", at)
	}
	return &reNode{kind: nRepeat, subs: []*reNode{a}, min: mn, max: mx, lazy: lazy}, nil
}

// ---- character classes ----

type runeRange struct{ lo, hi rune }

// charClass is a set of characters: the union of ranges, tables and
// nested classes, intersected with and, complemented when neg.
type charClass struct {
	neg    bool
	ranges []runeRange
	tables []*unicode.RangeTable
	subs   []*charClass
	and    *charClass
	ascii  [2]uint64 // membership of the ASCII characters, set by finish
}

var shorthand = map[rune][]*unicode.RangeTable{
	's': {unicode.White_Space},
	'd': {unicode.Nd},
	// UTS #18 \w: Alphabetic (L, Nl, Other_Alphabetic), M, Nd, Pc, Join_Control.
	'w': {unicode.L, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control},
}

// unicodeClass resolves \p{name}: a general category (one letter or
// two) or a script.
func unicodeClass(name string) ([]*unicode.RangeTable, bool) {
	if t, ok := unicode.Categories[name]; ok {
		return []*unicode.RangeTable{t}, true
	}
	if t, ok := unicode.Scripts[name]; ok {
		return []*unicode.RangeTable{t}, true
	}
	return nil, false
}

func (c *charClass) addRune(r rune, fold bool) {
	c.ranges = append(c.ranges, runeRange{r, r})
	if fold {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			c.ranges = append(c.ranges, runeRange{f, f})
		}
	}
}

func (c *charClass) addRange(lo, hi rune, fold bool) error {
	if !fold {
		c.ranges = append(c.ranges, runeRange{lo, hi})
		return nil
	}
	if hi-lo > 1024 {
		return fmt.Errorf("case-insensitive range %q-%q too wide", lo, hi)
	}
	for r := lo; r <= hi; r++ {
		c.addRune(r, true)
	}
	return nil
}

// finish fills the ASCII bitmap; nested classes are finished first.
func (c *charClass) finish() *charClass {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		if c.slow(r) {
			c.ascii[r>>6] |= 1 << (r & 63)
		}
	}
	return c
}

func (c *charClass) has(r rune) bool {
	if r < utf8.RuneSelf {
		return c.ascii[r>>6]&(1<<(r&63)) != 0
	}
	return c.slow(r)
}

func (c *charClass) slow(r rune) bool {
	in := c.union(r)
	if in && c.and != nil {
		in = c.and.has(r)
	}
	return in != c.neg
}

func (c *charClass) union(r rune) bool {
	for _, g := range c.ranges {
		if g.lo <= r && r <= g.hi {
			return true
		}
	}
	for _, t := range c.tables {
		if unicode.Is(t, r) {
			return true
		}
	}
	for _, s := range c.subs {
		if s.has(r) {
			return true
		}
	}
	return false
}

// ---- compiler ----

type reCompiler struct {
	p *reProg
}

func compileNode(n *reNode, src string) (*reProg, error) {
	c := &reCompiler{p: &reProg{src: src}}
	if err := c.emit(n); err != nil {
		return nil, err
	}
	c.add(reInst{op: opMatch})
	c.p.first = c.firstClass()
	return c.p, nil
}

func (c *reCompiler) add(i reInst) int32 {
	c.p.inst = append(c.p.inst, i)
	return int32(len(c.p.inst) - 1)
}

func (c *reCompiler) pc() int32 { return int32(len(c.p.inst)) }

// split adds a split whose targets patchSplit sets.
func (c *reCompiler) split() int32 { return c.add(reInst{op: opSplit, alt: -1, arg: -1}) }

// patchSplit sets the split at at to try body first and skip otherwise,
// or the reverse when lazy.
func (c *reCompiler) patchSplit(at, body, skip int32, lazy bool) {
	if lazy {
		body, skip = skip, body
	}
	c.p.inst[at].arg, c.p.inst[at].alt = body, skip
}

// maxInsts bounds a program: nested counted repetitions multiply.
const maxInsts = 1 << 16

func (c *reCompiler) emit(n *reNode) error {
	if len(c.p.inst) > maxInsts {
		return fmt.Errorf("pattern compiles to more than %d instructions", maxInsts)
	}
	switch n.kind {
	case nClass:
		c.p.classes = append(c.p.classes, n.class)
		c.add(reInst{op: opRune, arg: int32(len(c.p.classes) - 1)})
	case nCat:
		for _, s := range n.subs {
			if err := c.emit(s); err != nil {
				return err
			}
		}
	case nAlt:
		var jumps []int32
		for i, s := range n.subs {
			if i == len(n.subs)-1 {
				if err := c.emit(s); err != nil {
					return err
				}
				break
			}
			sp := c.split()
			if err := c.emit(s); err != nil {
				return err
			}
			jumps = append(jumps, c.add(reInst{op: opJmp}))
			c.patchSplit(sp, sp+1, c.pc(), false)
		}
		for _, j := range jumps {
			c.p.inst[j].arg = c.pc()
		}
	case nRepeat:
		body := n.subs[0]
		if n.max < 0 && body.canBeEmpty() {
			return fmt.Errorf("unbounded repetition of a pattern that can match empty")
		}
		for range n.min {
			if err := c.emit(body); err != nil {
				return err
			}
		}
		if n.max < 0 {
			loop := c.split()
			if err := c.emit(body); err != nil {
				return err
			}
			c.add(reInst{op: opJmp, arg: loop})
			c.patchSplit(loop, loop+1, c.pc(), n.lazy)
			break
		}
		// x{n,m}: m-n nested optional copies, each skipping to the end.
		var splits []int32
		for range n.max - n.min {
			splits = append(splits, c.split())
			if err := c.emit(body); err != nil {
				return err
			}
		}
		for _, sp := range splits {
			c.patchSplit(sp, sp+1, c.pc(), n.lazy)
		}
	case nLook:
		sub, err := compileNode(n.subs[0], c.p.src)
		if err != nil {
			return err
		}
		c.p.looks = append(c.p.looks, sub)
		neg := int32(0)
		if n.neg {
			neg = 1
		}
		c.add(reInst{op: opLook, arg: int32(len(c.p.looks) - 1), alt: neg})
	case nAssert:
		c.add(reInst{op: n.assert})
	}
	return nil
}

// firstClass collects the classes of the instructions that can consume
// the first character of a match; nil when an assertion or an empty match
// may come first.
func (c *reCompiler) firstClass() *charClass {
	var tables []*charClass
	seen := make([]bool, len(c.p.inst))
	var walk func(pc int32) bool
	walk = func(pc int32) bool {
		if seen[pc] {
			return true
		}
		seen[pc] = true
		in := c.p.inst[pc]
		switch in.op {
		case opRune:
			tables = append(tables, c.p.classes[in.arg])
			return true
		case opSplit:
			return walk(in.arg) && walk(in.alt)
		case opJmp:
			return walk(in.arg)
		}
		return false
	}
	if !walk(0) {
		return nil
	}
	return (&charClass{subs: tables}).finish()
}

// ---- matcher ----

type reThread struct {
	pc  int32
	pos int
}

// reMatcher is the scratch space of searches: the backtracking stack and
// the memo of failed states, and a child for look-ahead programs.
type reMatcher struct {
	stack   []reThread
	visited []uint64
	base    int // the position of the memo's first column
	cols    int // columns in use
	n       int // instructions per column
	child   *reMatcher
}

// maxMemoBits bounds the memo; a search exploring beyond it runs without
// memoization (correct, but no longer guaranteed linear).
const maxMemoBits = 1 << 28

// seen marks state (pc, pos) and reports whether it was marked already.
func (m *reMatcher) seen(n int, pc int32, pos int) bool {
	col := pos - m.base
	if col >= m.cols {
		need := (col + 1) * n
		if need > maxMemoBits {
			return false
		}
		words := (need + 63) / 64
		if words > len(m.visited) {
			m.visited = append(m.visited, make([]uint64, words-len(m.visited))...)
		}
		m.cols = col + 1
	}
	bit := col*n + int(pc)
	w, b := bit>>6, uint64(1)<<(bit&63)
	if m.visited[w]&b != 0 {
		return true
	}
	m.visited[w] |= b
	return false
}

// reset forgets the memo before a search of a program of n instructions
// starting at base.
func (m *reMatcher) reset(n, base int) {
	used := (m.cols*m.n + 63) / 64
	clear(m.visited[:min(used, len(m.visited))])
	m.base, m.cols, m.n = base, 0, n
}

// find returns the first match of p in s starting at from or later, as
// a Perl-style engine finds it. An empty match at notEmptyAt is skipped,
// as an iterator must after an empty match there.
func (m *reMatcher) find(p *reProg, s string, from, notEmptyAt int) (start, end int, ok bool) {
	if p.run != nil {
		return p.run.find(s, from)
	}
	m.reset(len(p.inst), from)
	for i := from; i <= len(s); {
		if p.first == nil || i < len(s) && p.first.has(runeAt(s, i)) {
			if e, ok := m.run(p, s, i, notEmptyAt); ok {
				return i, e, true
			}
		}
		if i == len(s) {
			break
		}
		i += runeLen(s, i)
	}
	return 0, 0, false
}

// find is the leftmost-first match of the run: the first position from
// which at least min characters of the class follow, taking up to max.
// A shorter run cannot hold a match at any of its positions, so the scan
// skips past it.
func (c *classRun) find(s string, from int) (start, end int, ok bool) {
	for i := from; i < len(s); {
		if !c.class.has(runeAt(s, i)) {
			i += runeLen(s, i)
			continue
		}
		j, n := i, 0
		for j < len(s) && (c.max < 0 || n < c.max) && c.class.has(runeAt(s, j)) {
			j += runeLen(s, j)
			n++
		}
		if n >= c.min {
			return i, j, true
		}
		i = j
	}
	return 0, 0, false
}

// matchesAt reports whether p matches at i (for look-ahead).
func (m *reMatcher) matchesAt(p *reProg, s string, i int) bool {
	m.reset(len(p.inst), i)
	_, ok := m.run(p, s, i, -1)
	return ok
}

func runeAt(s string, i int) rune {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c)
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r
}

func runeLen(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

// isWordBefore / isWordAt: \w on either side of position i.
func isWordBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return wordClass.has(r)
}

func isWordAt(s string, i int) bool {
	return i < len(s) && wordClass.has(runeAt(s, i))
}

var wordClass = (&charClass{tables: shorthand['w']}).finish()

// run is the backtracking machine: depth first, preferred branch first,
// so the first Match reached is the match a Perl-style engine reports.
func (m *reMatcher) run(p *reProg, s string, at, notEmptyAt int) (int, bool) {
	n := len(p.inst)
	m.stack = append(m.stack[:0], reThread{0, at})
	for len(m.stack) > 0 {
		t := m.stack[len(m.stack)-1]
		m.stack = m.stack[:len(m.stack)-1]
		pc, pos := t.pc, t.pos
	thread:
		for {
			if m.seen(n, pc, pos) {
				break
			}
			in := &p.inst[pc]
			switch in.op {
			case opRune:
				if pos >= len(s) {
					break thread
				}
				c := s[pos]
				if c < utf8.RuneSelf {
					if !p.classes[in.arg].has(rune(c)) {
						break thread
					}
					pos++
				} else {
					r, w := utf8.DecodeRuneInString(s[pos:])
					if !p.classes[in.arg].has(r) {
						break thread
					}
					pos += w
				}
				pc++
			case opSplit:
				m.stack = append(m.stack, reThread{in.alt, pos})
				pc = in.arg
			case opJmp:
				pc = in.arg
			case opMatch:
				if pos == at && at == notEmptyAt {
					break thread
				}
				return pos, true
			case opLook:
				if m.child == nil {
					m.child = &reMatcher{}
				}
				if m.child.matchesAt(p.looks[in.arg], s, pos) == (in.alt == 1) {
					break thread
				}
				pc++
			case opBegin:
				if pos != 0 {
					break thread
				}
				pc++
			case opEnd:
				if pos != len(s) {
					break thread
				}
				pc++
			case opWordB, opNotWordB:
				if (isWordBefore(s, pos) != isWordAt(s, pos)) != (in.op == opWordB) {
					break thread
				}
				pc++
			}
		}
	}
	return 0, false
}

// splitRegex cuts s into the pieces a split pre-tokenizer with the
// Isolated behaviour gives (HF's Split, llama.cpp's unicode_regex_split):
// every match, and every stretch between matches, is a piece. Empty pieces
// are dropped. The pieces' [start,end) pairs are appended to dst, offset
// by off.
func (m *reMatcher) splitRegex(p *reProg, s string, off int, dst []span) []span {
	last, pos, notEmptyAt := 0, 0, -1
	for pos <= len(s) {
		a, b, ok := m.find(p, s, pos, notEmptyAt)
		if !ok {
			break
		}
		if a > last {
			dst = append(dst, span{off + last, off + a})
		}
		if b > a {
			dst = append(dst, span{off + a, off + b})
		}
		last = b
		notEmptyAt = -1
		if b == a {
			notEmptyAt = b
		}
		pos = b
	}
	if last < len(s) {
		dst = append(dst, span{off + last, off + len(s)})
	}
	return dst
}

// span is a pre-token: text[start:end].
type span struct{ start, end int }
