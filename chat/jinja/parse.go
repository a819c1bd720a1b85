package jinja

import (
	"fmt"
	"slices"
)

// Statements.
type (
	node interface{}

	textNode   struct{ s string }
	outputNode struct {
		x    expr
		line int
	}
	ifNode struct {
		conds  []expr
		bodies [][]node
		orelse []node
		line   int
	}
	forNode struct {
		target []string // one name, or several to unpack
		iter   expr
		cond   expr // {% for x in xs if cond %}; nil when absent
		body   []node
		orelse []node
		line   int
	}
	setNode struct {
		target []string // names; or one name and attr for {% set ns.attr = %}
		attr   string
		x      expr
		line   int
	}
	setBlockNode struct {
		name    string
		filters []*filterExpr // applied to the captured text, innermost first
		body    []node
		line    int
	}
	macroNode       struct{ m *macroDef }
	filterBlockNode struct {
		filters []*filterExpr
		body    []node
		line    int
	}
	withNode struct {
		names []string
		vals  []expr
		body  []node
		line  int
	}
	loopControl struct {
		brk  bool
		line int
	}
	// scopeNode runs its body in place: {% generation %} (HuggingFace's
	// assistant-mask tag, a no-op when rendering) and {% block %} in a
	// template that extends nothing.
	scopeNode struct{ body []node }
)

// Expressions.
type (
	expr interface{}

	constExpr struct{ v any }
	nameExpr  struct {
		name string
		line int
	}
	listExpr struct {
		items []expr
		tuple bool
	}
	dictExpr struct{ keys, vals []expr }
	attrExpr struct {
		x    expr
		name string
		line int
	}
	itemExpr struct {
		x, key expr
		line   int
	}
	sliceExpr struct {
		x                 expr
		start, stop, step expr // nil when absent
		line              int
	}
	callExpr struct {
		fn   expr
		args callArgs
		line int
	}
	filterExpr struct {
		x    expr // nil in {% filter %} and {% set x | f %}: the captured text
		name string
		args callArgs
		line int
	}
	testExpr struct {
		x      expr
		name   string
		args   callArgs
		negate bool
		line   int
	}
	binExpr struct {
		op   string // + - * / // % ** ~ and or
		l, r expr
		line int
	}
	unaryExpr struct {
		op   string // - + not
		x    expr
		line int
	}
	compareExpr struct {
		first expr
		ops   []string // == != < <= > >= in notin
		rest  []expr
		line  int
	}
	condExpr struct {
		cond, then, orelse expr // orelse nil: Undefined
		line               int
	}
)

type callArgs struct {
	pos     []expr
	kwNames []string
	kwVals  []expr
	star    expr // *args
	dstar   expr // **kwargs
}

type macroDef struct {
	name     string
	params   []string
	defaults []expr // aligned with params; nil where there is none
	body     []node
	varargs  bool // the body reads varargs / kwargs: extra arguments are collected
	kwargs   bool
}

// maxNesting bounds how deeply expressions and blocks nest, so that a
// hostile template cannot exhaust the stack.
const maxNesting = 100

type parser struct {
	depth int
	segs  []segment
	si    int     // current segment
	toks  []token // tokens of the current tag
	ti    int
}

func parse(segs []segment) ([]node, error) {
	p := &parser{segs: segs}
	body, end, err := p.parseBody(nil)
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, syntaxErr(p.line(), "Encountered unknown tag '%s'.", end)
	}
	return body, nil
}

func (p *parser) line() int {
	if p.toks != nil && p.ti < len(p.toks) {
		return p.toks[p.ti].line
	}
	if p.si < len(p.segs) {
		return p.segs[p.si].line
	}
	if len(p.segs) > 0 {
		return p.segs[len(p.segs)-1].line
	}
	return 1
}

// parseBody parses statements until a block tag named in ends; it returns
// that tag's name with the parser positioned on its next token (or "" at
// the end of the template).
func (p *parser) parseBody(ends []string) ([]node, string, error) {
	var body []node
	for p.si < len(p.segs) {
		seg := p.segs[p.si]
		switch seg.kind {
		case segText:
			body = append(body, &textNode{s: seg.text})
			p.si++
		case segVar:
			p.toks, p.ti = seg.toks, 0
			x, err := p.parseTuple(false)
			if err != nil {
				return nil, "", err
			}
			if err := p.expectEnd(); err != nil {
				return nil, "", err
			}
			body = append(body, &outputNode{x: x, line: seg.line})
			p.si++
		case segBlock:
			p.toks, p.ti = seg.toks, 0
			tag := p.next()
			if tag.kind != tokName {
				return nil, "", syntaxErr(tag.line, "tag name expected")
			}
			if slices.Contains(ends, tag.s) {
				return body, tag.s, nil
			}
			n, err := p.parseStatement(tag)
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				body = append(body, n)
			}
		}
	}
	if len(ends) > 0 {
		return nil, "", syntaxErr(p.line(), "Unexpected end of template. Jinja was looking for the following tags: %s.", quoteTags(ends))
	}
	return body, "", nil
}

func quoteTags(tags []string) string {
	s := ""
	for i, t := range tags {
		if i > 0 {
			s += " or "
		}
		s += "'" + t + "'"
	}
	return s
}

// parseStatement parses the block tag tag (already consumed) and advances
// past its last segment.
func (p *parser) parseStatement(tag token) (node, error) {
	line := tag.line
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch tag.s {
	case "if":
		return p.parseIf(line)
	case "for":
		return p.parseFor(line)
	case "set":
		return p.parseSet(line)
	case "macro":
		return p.parseMacro(line)
	case "filter":
		var filters []*filterExpr
		for {
			f, err := p.parseFilter(nil)
			if err != nil {
				return nil, err
			}
			filters = append(filters, f)
			if !p.skipOp("|") {
				break
			}
		}
		body, err := p.block("endfilter")
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{filters: filters, body: body, line: line}, nil
	case "with":
		n := &withNode{line: line}
		for !p.atEnd() {
			if len(n.names) > 0 {
				if err := p.expectOp(","); err != nil {
					return nil, err
				}
			}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			v, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			n.names, n.vals = append(n.names, name), append(n.vals, v)
		}
		body, err := p.block("endwith")
		if err != nil {
			return nil, err
		}
		n.body = body
		return n, nil
	case "break", "continue":
		if err := p.expectEnd(); err != nil {
			return nil, err
		}
		p.si++
		return &loopControl{brk: tag.s == "break", line: line}, nil
	case "generation", "block":
		if tag.s == "block" {
			if _, err := p.expectName(); err != nil {
				return nil, err
			}
			p.skipName("scoped")
			p.skipName("required")
		}
		body, err := p.block("end" + tag.s)
		if err != nil {
			return nil, err
		}
		return &scopeNode{body: body}, nil
	}
	// do, include, import, extends, call...: not in HuggingFace's environment
	// or not loadable there.
	return nil, syntaxErr(line, "Encountered unknown tag '%s'.", tag.s)
}

// block ends the current tag, parses a body up to {% end %} and consumes
// that tag.
func (p *parser) block(end string) ([]node, error) {
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	p.si++
	body, _, err := p.parseBody([]string{end})
	if err != nil {
		return nil, err
	}
	return body, p.closeTag()
}

// closeTag checks that the end tag the parser stands on has nothing more,
// and moves past it. jinja2 allows the block's name after endblock and
// endmacro.
func (p *parser) closeTag() error {
	if p.toks[p.ti].kind == tokName && p.ti+1 < len(p.toks) && p.toks[p.ti+1].kind == tokEnd {
		p.ti++
	}
	if err := p.expectEnd(); err != nil {
		return err
	}
	p.si++
	return nil
}

func (p *parser) parseIf(line int) (node, error) {
	n := &ifNode{line: line}
	for {
		cond, err := p.parseTuple(false)
		if err != nil {
			return nil, err
		}
		if err := p.expectEnd(); err != nil {
			return nil, err
		}
		p.si++
		body, end, err := p.parseBody([]string{"elif", "else", "endif"})
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, cond), append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			orelse, err := p.block("endif")
			if err != nil {
				return nil, err
			}
			n.orelse = orelse
			return n, nil
		}
		return n, p.closeTag()
	}
}

func (p *parser) parseFor(line int) (node, error) {
	n := &forNode{line: line}
	for {
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.target = append(n.target, name)
		if !p.skipOp(",") {
			break
		}
		if p.peek().kind == tokName && p.peek().s == "in" {
			break
		}
	}
	if !p.skipName("in") {
		return nil, syntaxErr(p.line(), "expected 'in'")
	}
	iter, err := p.parseTupleNoCond()
	if err != nil {
		return nil, err
	}
	n.iter = iter
	if p.skipName("if") {
		if n.cond, err = p.parseExpr(); err != nil {
			return nil, err
		}
	}
	if p.skipName("recursive") {
		return nil, syntaxErr(line, "recursive for loops are not supported")
	}
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	p.si++
	body, end, err := p.parseBody([]string{"else", "endfor"})
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if n.orelse, err = p.block("endfor"); err != nil {
			return nil, err
		}
		return n, nil
	}
	return n, p.closeTag()
}

func (p *parser) parseSet(line int) (node, error) {
	first, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n := &setNode{target: []string{first}, line: line}
	switch {
	case p.skipOp("."):
		if n.attr, err = p.expectName(); err != nil {
			return nil, err
		}
	case p.isOp(","):
		for p.skipOp(",") {
			if p.isOp("=") {
				break
			}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			n.target = append(n.target, name)
		}
	}
	if !p.skipOp("=") {
		if n.attr != "" || len(n.target) > 1 {
			return nil, syntaxErr(p.line(), "expected '='")
		}
		// {% set name %}...{% endset %}, optionally with filters.
		b := &setBlockNode{name: first, line: line}
		for p.skipOp("|") {
			f, err := p.parseFilter(nil)
			if err != nil {
				return nil, err
			}
			b.filters = append(b.filters, f)
		}
		if b.body, err = p.block("endset"); err != nil {
			return nil, err
		}
		return b, nil
	}
	if n.x, err = p.parseTuple(false); err != nil {
		return nil, err
	}
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	p.si++
	return n, nil
}

func (p *parser) parseMacro(line int) (node, error) {
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	m := &macroDef{name: name}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.skipOp(")") {
		if len(m.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.skipOp(")") {
				break
			}
		}
		param, err := p.expectName()
		if err != nil {
			return nil, err
		}
		var def expr
		if p.skipOp("=") {
			if def, err = p.parseExpr(); err != nil {
				return nil, err
			}
		} else if len(m.defaults) > 0 && m.defaults[len(m.defaults)-1] != nil {
			return nil, syntaxErr(p.line(), "non-default argument follows default argument")
		}
		m.params, m.defaults = append(m.params, param), append(m.defaults, def)
	}
	if m.body, err = p.block("endmacro"); err != nil {
		return nil, err
	}
	m.varargs, m.kwargs = usesName(m.body, "varargs"), usesName(m.body, "kwargs")
	return &macroNode{m: m}, nil
}

// Expression parsing, by jinja2's precedence: conditional, or, and, not,
// comparisons, + -, ~, * / // %, **, unary - +, then postfix (attribute,
// subscript, call) and filters/tests.

// enter counts one more level of nesting.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxNesting {
		return syntaxErr(p.line(), "the template nests deeper than %d levels", maxNesting)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) parseExpr() (expr, error) {
	line := p.line()
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		cond, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		c := &condExpr{cond: cond, then: x, line: line}
		if p.skipName("else") {
			if c.orelse, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		x = c
	}
	return x, nil
}

// leftAssoc parses operand (op operand)* while more says an operator is
// next, folding to the left: the binary levels of jinja2's grammar.
func (p *parser) leftAssoc(operand func() (expr, error), more func() bool) (expr, error) {
	x, err := operand()
	for err == nil && more() {
		t := p.next()
		var r expr
		if r, err = operand(); err == nil {
			x = &binExpr{op: t.s, l: x, r: r, line: t.line}
		}
	}
	return x, err
}

func (p *parser) parseOr() (expr, error) {
	return p.leftAssoc(p.parseAnd, func() bool { return p.isName("or") })
}

func (p *parser) parseAnd() (expr, error) {
	return p.leftAssoc(p.parseNot, func() bool { return p.isName("and") })
}

func (p *parser) parseNot() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if p.isName("not") {
		line := p.next().line
		x, err := p.parseNot()
		return &unaryExpr{op: "not", x: x, line: line}, err
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	line := p.line()
	x, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: x, line: line}
	for {
		t := p.peek()
		op := ""
		switch {
		case t.kind == tokOp && (t.s == "==" || t.s == "!=" || t.s == "<" || t.s == "<=" || t.s == ">" || t.s == ">="):
			op = t.s
			p.next()
		case t.kind == tokName && t.s == "in":
			op = "in"
			p.next()
		case t.kind == tokName && t.s == "not" && p.ti+1 < len(p.toks) && p.toks[p.ti+1].kind == tokName && p.toks[p.ti+1].s == "in":
			op = "notin"
			p.ti += 2
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops, c.rest = append(c.ops, op), append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return x, nil
	}
	return c, nil
}

func (p *parser) parseMath1() (expr, error) {
	return p.leftAssoc(p.parseConcat, func() bool { return p.isOp("+") || p.isOp("-") })
}

func (p *parser) parseConcat() (expr, error) {
	return p.leftAssoc(p.parseMath2, func() bool { return p.isOp("~") })
}

func (p *parser) parseMath2() (expr, error) {
	return p.leftAssoc(p.parsePow, func() bool { return p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") })
}

func (p *parser) parsePow() (expr, error) {
	return p.leftAssoc(func() (expr, error) { return p.parseUnary(true) }, func() bool { return p.isOp("**") })
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var x expr
	var err error
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		inner, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		x = &unaryExpr{op: t.s, x: inner, line: t.line}
	} else if x, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokName:
		switch t.s {
		case "true", "True":
			return &constExpr{v: true}, nil
		case "false", "False":
			return &constExpr{v: false}, nil
		case "none", "None":
			return &constExpr{v: nil}, nil
		}
		return &nameExpr{name: t.s, line: t.line}, nil
	case tokString:
		s := t.s
		for p.peek().kind == tokString { // adjacent literals join, as in Python
			s += p.next().s
		}
		return &constExpr{v: s}, nil
	case tokInt:
		return &constExpr{v: t.i}, nil
	case tokFloat:
		return &constExpr{v: t.f}, nil
	case tokOp:
		switch t.s {
		case "(":
			return p.parseTuple(true)
		case "[":
			l := &listExpr{}
			err := p.items("]", func() error {
				x, err := p.parseExpr()
				l.items = append(l.items, x)
				return err
			})
			return l, err
		case "{":
			d := &dictExpr{}
			err := p.items("}", func() error {
				k, err := p.parseExpr()
				if err != nil {
					return err
				}
				if err := p.expectOp(":"); err != nil {
					return err
				}
				v, err := p.parseExpr()
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
				return err
			})
			return d, err
		}
	}
	return nil, p.unexpected(t)
}

// items parses comma-separated items up to the closing operator close (a
// trailing comma allowed), calling item for each: list and dict literals.
func (p *parser) items(close string, item func() error) error {
	for n := 0; !p.skipOp(close); n++ {
		if n > 0 {
			if err := p.expectOp(","); err != nil {
				return err
			}
			if p.skipOp(close) {
				break
			}
		}
		if err := item(); err != nil {
			return err
		}
	}
	return nil
}

// parseTuple parses an expression, or a tuple of them when commas follow.
// Inside parentheses (explicit) "()" is the empty tuple and the closing
// parenthesis is consumed.
func (p *parser) parseTuple(explicit bool) (expr, error) {
	return p.parseTupleWith(explicit, p.parseExpr)
}

// parseTupleNoCond is parseTuple for a for loop's iterable, where "if"
// starts the loop's filter rather than a conditional expression.
func (p *parser) parseTupleNoCond() (expr, error) {
	return p.parseTupleWith(false, p.parseOr)
}

func (p *parser) parseTupleWith(explicit bool, item func() (expr, error)) (expr, error) {
	var items []expr
	isTuple := false
	for {
		if explicit && p.skipOp(")") {
			break
		}
		if len(items) > 0 {
			if !p.isOp(",") {
				if explicit {
					if err := p.expectOp(")"); err != nil {
						return nil, err
					}
				}
				break
			}
			p.next()
			isTuple = true
			if explicit && p.skipOp(")") {
				break
			}
			if !explicit && (p.atEnd() || p.isOp(")") || p.isName("if")) {
				break
			}
		}
		x, err := item()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	if !isTuple {
		if len(items) == 1 {
			return items[0], nil
		}
		if !explicit {
			return nil, syntaxErr(p.line(), "Expected an expression, got '%s'", describe(p.peek()))
		}
	}
	return &listExpr{items: items, tuple: true}, nil
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		t := p.peek()
		if t.kind != tokOp {
			return x, nil
		}
		switch t.s {
		case ".":
			p.next()
			a := p.next()
			switch a.kind {
			case tokName:
				x = &attrExpr{x: x, name: a.s, line: a.line}
			case tokInt:
				x = &itemExpr{x: x, key: &constExpr{v: a.i}, line: a.line}
			default:
				return nil, syntaxErr(a.line, "expected name or number")
			}
		case "[":
			p.next()
			s, err := p.parseSubscript(x, t.line)
			if err != nil {
				return nil, err
			}
			x = s
		case "(":
			p.next()
			args, err := p.parseCallArgs()
			if err != nil {
				return nil, err
			}
			x = &callExpr{fn: x, args: args, line: t.line}
		default:
			return x, nil
		}
	}
}

// parseSubscript parses what follows "[": an index, a slice, or several
// comma-separated subscripts (a tuple key).
func (p *parser) parseSubscript(x expr, line int) (expr, error) {
	var subs []expr
	for !p.skipOp("]") {
		if len(subs) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		s, err := p.parseSubscribed(x, line)
		if err != nil {
			return nil, err
		}
		subs = append(subs, s)
	}
	switch len(subs) {
	case 0:
		return nil, syntaxErr(line, "expected subscript expression")
	case 1:
		if s, ok := subs[0].(*sliceExpr); ok {
			return s, nil
		}
		return &itemExpr{x: x, key: subs[0], line: line}, nil
	}
	for _, s := range subs {
		if _, ok := s.(*sliceExpr); ok {
			return nil, syntaxErr(line, "slices inside a tuple subscript are not supported")
		}
	}
	return &itemExpr{x: x, key: &listExpr{items: subs, tuple: true}, line: line}, nil
}

// parseSubscribed parses one subscript: an expression or a slice
// start:stop:step with any part left out.
func (p *parser) parseSubscribed(x expr, line int) (expr, error) {
	endOfPart := func() bool { return p.isOp("]") || p.isOp(",") }
	s := &sliceExpr{x: x, line: line}
	if !p.skipOp(":") {
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if !p.skipOp(":") {
			return v, nil
		}
		s.start = v
	}
	if !p.isOp(":") && !endOfPart() {
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		s.stop = v
	}
	if p.skipOp(":") && !endOfPart() {
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		s.step = v
	}
	return s, nil
}

// parseCallArgs parses arguments after "(" up to and including ")".
func (p *parser) parseCallArgs() (callArgs, error) {
	var a callArgs
	first := true
	for !p.skipOp(")") {
		if !first {
			if err := p.expectOp(","); err != nil {
				return a, err
			}
			if p.skipOp(")") {
				break
			}
		}
		first = false
		switch {
		case p.isOp("**"):
			p.next()
			x, err := p.parseExpr()
			if err != nil {
				return a, err
			}
			a.dstar = x
		case p.isOp("*"):
			p.next()
			x, err := p.parseExpr()
			if err != nil {
				return a, err
			}
			a.star = x
		case p.peek().kind == tokName && p.ti+1 < len(p.toks) && p.toks[p.ti+1].kind == tokOp && p.toks[p.ti+1].s == "=":
			name := p.next().s
			p.next()
			x, err := p.parseExpr()
			if err != nil {
				return a, err
			}
			a.kwNames, a.kwVals = append(a.kwNames, name), append(a.kwVals, x)
		default:
			if len(a.kwNames) > 0 || a.star != nil || a.dstar != nil {
				return a, syntaxErr(p.line(), "positional argument follows keyword argument")
			}
			x, err := p.parseExpr()
			if err != nil {
				return a, err
			}
			a.pos = append(a.pos, x)
		}
	}
	return a, nil
}

func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			f, err := p.parseFilter(x)
			if err != nil {
				return nil, err
			}
			x = f
		case p.isName("is"):
			p.next()
			t, err := p.parseTest(x)
			if err != nil {
				return nil, err
			}
			x = t
		case p.isOp("("):
			t := p.next()
			args, err := p.parseCallArgs()
			if err != nil {
				return nil, err
			}
			x = &callExpr{fn: x, args: args, line: t.line}
		default:
			return x, nil
		}
	}
}

func (p *parser) parseFilter(x expr) (*filterExpr, error) {
	t := p.next()
	if t.kind != tokName {
		return nil, syntaxErr(t.line, "expected a filter name")
	}
	name := t.s
	for p.isOp(".") && p.ti+1 < len(p.toks) && p.toks[p.ti+1].kind == tokName {
		p.next()
		name += "." + p.next().s
	}
	if _, ok := filters[name]; !ok {
		return nil, &Error{Kind: "TemplateAssertionError", Msg: fmt.Sprintf("No filter named '%s'.", name), Line: t.line}
	}
	f := &filterExpr{x: x, name: name, line: t.line}
	if p.skipOp("(") {
		args, err := p.parseCallArgs()
		if err != nil {
			return nil, err
		}
		f.args = args
	}
	return f, nil
}

func (p *parser) parseTest(x expr) (expr, error) {
	negate := p.skipName("not")
	t := p.next()
	if t.kind != tokName {
		return nil, syntaxErr(t.line, "expected a test name")
	}
	name := t.s
	switch name { // tests named like keywords lex as names or constants
	case "True", "False", "None":
		name = map[string]string{"True": "true", "False": "false", "None": "none"}[name]
	}
	if _, ok := tests[name]; !ok {
		return nil, &Error{Kind: "TemplateAssertionError", Msg: fmt.Sprintf("No test named '%s'.", name), Line: t.line}
	}
	te := &testExpr{x: x, name: name, negate: negate, line: t.line}
	n := p.peek()
	switch {
	case n.kind == tokOp && n.s == "(":
		p.next()
		args, err := p.parseCallArgs()
		if err != nil {
			return nil, err
		}
		te.args = args
	case (n.kind == tokName && n.s != "else" && n.s != "or" && n.s != "and" && n.s != "is") ||
		n.kind == tokString || n.kind == tokInt || n.kind == tokFloat ||
		n.kind == tokOp && (n.s == "[" || n.s == "{"):
		// One argument without parentheses: "x is divisibleby 3".
		arg, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if arg, err = p.parsePostfix(arg); err != nil {
			return nil, err
		}
		te.args.pos = []expr{arg}
	case n.kind == tokName && n.s == "is":
		return nil, syntaxErr(n.line, "You cannot chain multiple tests with is")
	}
	return te, nil
}

// Token helpers.

func (p *parser) peek() token { return p.toks[p.ti] }

func (p *parser) next() token {
	t := p.toks[p.ti]
	if t.kind != tokEnd {
		p.ti++
	}
	return t
}

func (p *parser) atEnd() bool { return p.peek().kind == tokEnd }

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tokOp && t.s == s
}

func (p *parser) isName(s string) bool {
	t := p.peek()
	return t.kind == tokName && t.s == s
}

func (p *parser) skipOp(s string) bool {
	if p.isOp(s) {
		p.ti++
		return true
	}
	return false
}

func (p *parser) skipName(s string) bool {
	if p.isName(s) {
		p.ti++
		return true
	}
	return false
}

func (p *parser) expectOp(s string) error {
	if !p.skipOp(s) {
		return syntaxErr(p.line(), "expected '%s', got '%s'", s, describe(p.peek()))
	}
	return nil
}

func (p *parser) expectName() (string, error) {
	t := p.peek()
	if t.kind != tokName {
		return "", syntaxErr(t.line, "expected a name, got '%s'", describe(t))
	}
	p.ti++
	return t.s, nil
}

func (p *parser) expectEnd() error {
	if !p.atEnd() {
		return p.unexpected(p.peek())
	}
	return nil
}

func (p *parser) unexpected(t token) error {
	if t.kind == tokEnd {
		return syntaxErr(t.line, "unexpected end of tag")
	}
	return syntaxErr(t.line, "unexpected '%s'", describe(t))
}

func describe(t token) string {
	switch t.kind {
	case tokEnd:
		return "end of tag"
	case tokInt:
		return fmt.Sprint(t.i)
	case tokFloat:
		return floatRepr(t.f)
	case tokString:
		return pyRepr(t.s)
	}
	return t.s
}

// usesName reports whether any expression in body reads the variable name
// (a macro that reads varargs or kwargs accepts extra arguments).
func usesName(body []node, name string) bool {
	found := false
	var walkX func(x expr)
	walkArgs := func(a callArgs) {
		for _, x := range a.pos {
			walkX(x)
		}
		for _, x := range a.kwVals {
			walkX(x)
		}
		walkX(a.star)
		walkX(a.dstar)
	}
	walkX = func(x expr) {
		switch x := x.(type) {
		case *nameExpr:
			found = found || x.name == name
		case *listExpr:
			for _, y := range x.items {
				walkX(y)
			}
		case *dictExpr:
			for i := range x.keys {
				walkX(x.keys[i])
				walkX(x.vals[i])
			}
		case *attrExpr:
			walkX(x.x)
		case *itemExpr:
			walkX(x.x)
			walkX(x.key)
		case *sliceExpr:
			walkX(x.x)
			walkX(x.start)
			walkX(x.stop)
			walkX(x.step)
		case *callExpr:
			walkX(x.fn)
			walkArgs(x.args)
		case *filterExpr:
			walkX(x.x)
			walkArgs(x.args)
		case *testExpr:
			walkX(x.x)
			walkArgs(x.args)
		case *binExpr:
			walkX(x.l)
			walkX(x.r)
		case *unaryExpr:
			walkX(x.x)
		case *compareExpr:
			walkX(x.first)
			for _, y := range x.rest {
				walkX(y)
			}
		case *condExpr:
			walkX(x.cond)
			walkX(x.then)
			walkX(x.orelse)
		}
	}
	var walk func(nodes []node)
	walk = func(nodes []node) {
		for _, n := range nodes {
			switch n := n.(type) {
			case *outputNode:
				walkX(n.x)
			case *ifNode:
				for i := range n.conds {
					walkX(n.conds[i])
					walk(n.bodies[i])
				}
				walk(n.orelse)
			case *forNode:
				walkX(n.iter)
				walkX(n.cond)
				walk(n.body)
				walk(n.orelse)
			case *setNode:
				walkX(n.x)
			case *setBlockNode:
				walk(n.body)
			case *filterBlockNode:
				walk(n.body)
			case *withNode:
				for _, v := range n.vals {
					walkX(v)
				}
				walk(n.body)
			case *scopeNode:
				walk(n.body)
			}
		}
	}
	walk(body)
	return found
}
