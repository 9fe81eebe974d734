package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

type nodeKind uint8

const (
	nConst  nodeKind = iota // val
	nProp                   // prop
	nNeg                    // -l
	nNot                    // NOT l
	nCast                   // property l used as a condition
	nAnd                    // l AND r
	nOr                     // l OR r
	nCmp                    // l op r, op one of tEq..tGe
	nIsNull                 // l IS [NOT] NULL
	nIn                     // property l [NOT] IN list
	nStr                    // property l [NOT] op r, op one of tContains..tEndsWith
)

type node struct {
	kind nodeKind
	op   tokKind
	not  bool
	l, r *node
	val  value    // nConst
	prop int      // nProp: index in Expr.names
	list [][]byte // nIn
	tok  token    // where the node starts, for errors
}

// cond reports whether n yields a boolean: a condition.
func (n *node) cond() bool {
	switch n.kind {
	case nConst:
		return n.val.k == kBool
	case nProp, nNeg:
		return false
	}
	return true
}

// Expr is a compiled expression. It is immutable and safe for concurrent
// use.
type Expr struct {
	src   string
	root  *node
	names []string // the properties it reads, each once
}

// String returns the expression as given to Compile.
func (e *Expr) String() string { return e.src }

// Limits of a compiled expression: an expression arrives with a
// consumer's heartbeat or pull, and compiling and evaluating it must not
// let that consumer take the broker's memory or stack (a heartbeat of a
// million parentheses overflowed the parser's stack, which kills the
// process).
const (
	// MaxLen is the longest expression in bytes.
	MaxLen = 256 << 10
	// MaxNesting is how deep parentheses, NOT and signs may nest: the
	// parser recurses for each.
	MaxNesting = 256
	// MaxHeight is how tall the compiled tree may be: evaluation recurses
	// once per level, and a chain of n ANDs or ORs is n levels (a long
	// list of alternatives is one IN).
	MaxHeight = 10_000
)

// Compile parses a SQL92 expression. Its errors are *SyntaxError.
func Compile(src string) (*Expr, error) {
	if len(src) > MaxLen {
		return nil, &SyntaxError{Column: MaxLen + 1, Token: fmt.Sprintf("%q...", src[MaxLen:MaxLen+min(8, len(src)-MaxLen)]),
			Msg: fmt.Sprintf("the expression has %d bytes, at most %d", len(src), MaxLen)}
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, index: map[string]int{}}
	if toks[0].kind == tEOF {
		return nil, p.fail(toks[0], "empty expression")
	}
	n, err := p.or()
	if err == nil && p.peek().kind != tEOF {
		err = p.fail(p.peek(), "unexpected %s after a complete expression", p.peek().describe())
	}
	if err == nil {
		n, err = p.asCond(n)
	}
	if err == nil && tallerThan(n, MaxHeight) {
		err = p.fail(n.tok, "the expression is more than %d levels deep (a chain of n ANDs or ORs is n levels: list alternatives with IN)", MaxHeight)
	}
	if err != nil {
		return nil, err
	}
	return &Expr{src: src, root: n, names: p.names}, nil
}

// tallerThan reports whether the tree under n has more than max levels. It
// walks the tree with a slice, not recursion: the tree may be far taller
// than a stack should grow.
func tallerThan(n *node, max int) bool {
	type level struct {
		n     *node
		depth int
	}
	todo := []level{{n, 1}}
	for len(todo) > 0 {
		l := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if l.depth > max {
			return true
		}
		for _, c := range [2]*node{l.n.l, l.n.r} {
			if c != nil {
				todo = append(todo, level{c, l.depth + 1})
			}
		}
	}
	return false
}

type parser struct {
	toks    []token
	i       int
	names   []string
	index   map[string]int
	nesting int // parentheses, NOT and signs open (see MaxNesting)
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekAt(k int) token { return p.toks[min(p.i+k, len(p.toks)-1)] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) expect(k tokKind, what string) (token, error) {
	if t := p.peek(); t.kind != k {
		return t, p.fail(t, "expected %s, found %s", what, t.describe())
	}
	return p.next(), nil
}

func (p *parser) fail(t token, format string, args ...any) error {
	return &SyntaxError{Column: t.pos + 1, Token: t.describe(), Msg: fmt.Sprintf(format, args...)}
}

// asCond returns n as a condition: a property becomes RocketMQ's boolean
// cast; anything else that yields no boolean is refused.
func (p *parser) asCond(n *node) (*node, error) {
	switch {
	case n.cond():
		return n, nil
	case n.kind == nProp:
		return &node{kind: nCast, l: n, tok: n.tok}, nil
	}
	return nil, p.fail(n.tok, "a value where a condition is expected")
}

func (p *parser) logic(kind nodeKind, op tokKind, sub func() (*node, error)) (*node, error) {
	l, err := sub()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == op {
		p.next()
		r, err := sub()
		if err != nil {
			return nil, err
		}
		if l, err = p.asCond(l); err != nil {
			return nil, err
		}
		if r, err = p.asCond(r); err != nil {
			return nil, err
		}
		l = &node{kind: kind, l: l, r: r, tok: l.tok}
	}
	return l, nil
}

func (p *parser) or() (*node, error)  { return p.logic(nOr, tOr, p.and) }
func (p *parser) and() (*node, error) { return p.logic(nAnd, tAnd, p.equality) }

func (p *parser) equality() (*node, error) {
	l, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for {
		switch t := p.peek(); t.kind {
		case tEq, tNe:
			p.next()
			r, err := p.comparison()
			if err != nil {
				return nil, err
			}
			if l.kind == nConst && r.kind == nConst && (l.val.k == kBool) != (r.val.k == kBool) {
				return nil, p.fail(t, "a boolean constant compared with a value that is not one")
			}
			l = &node{kind: nCmp, op: t.kind, l: l, r: r, tok: l.tok}
		case tIs:
			p.next()
			not := p.peek().kind == tNot
			if not {
				p.next()
			}
			if _, err := p.expect(tNull, "NULL after IS"); err != nil {
				return nil, err
			}
			l = &node{kind: nIsNull, not: not, l: l, tok: l.tok}
		default:
			return l, nil
		}
	}
}

// ordered checks an operand of >, >=, <, <= or BETWEEN: a number or a
// property, never a string or boolean constant or a condition.
func (p *parser) ordered(n *node) error {
	if n.kind == nConst && (n.val.k == kLong || n.val.k == kDouble) || n.kind == nProp || n.kind == nNeg {
		return nil
	}
	return p.fail(n.tok, "only numbers can be compared with >, >=, <, <= or BETWEEN")
}

func (p *parser) comparison() (*node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		not := t.kind == tNot
		if not {
			switch p.peekAt(1).kind {
			case tBetween, tIn, tContains, tStartsWith, tEndsWith:
				p.next()
				t = p.peek()
			default:
				return l, nil
			}
		}
		switch t.kind {
		case tGt, tGe, tLt, tLe:
			p.next()
			r, err := p.unary()
			if err != nil {
				return nil, err
			}
			if err := p.ordered(l); err != nil {
				return nil, err
			}
			if err := p.ordered(r); err != nil {
				return nil, err
			}
			l = &node{kind: nCmp, op: t.kind, l: l, r: r, tok: l.tok}
		case tBetween:
			if l, err = p.between(l, not); err != nil {
				return nil, err
			}
		case tIn:
			if l, err = p.in(l, not); err != nil {
				return nil, err
			}
		case tContains, tStartsWith, tEndsWith:
			p.next()
			if l.kind != nProp {
				return nil, p.fail(l.tok, "%s needs a property on its left", strings.ToUpper(t.text))
			}
			s, err := p.expect(tString, "a string literal after "+strings.ToUpper(t.text))
			if err != nil {
				return nil, err
			}
			r := &node{kind: nConst, val: value{k: kString, s: []byte(s.str)}, tok: s}
			l = &node{kind: nStr, op: t.kind, not: not, l: l, r: r, tok: l.tok}
		default:
			return l, nil
		}
	}
}

func (p *parser) between(v *node, not bool) (*node, error) {
	p.next()
	lo, err := p.unary()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(tAnd, "AND between the bounds of BETWEEN"); err != nil {
		return nil, err
	}
	hi, err := p.unary()
	if err != nil {
		return nil, err
	}
	for _, n := range []*node{v, lo, hi} {
		if err := p.ordered(n); err != nil {
			return nil, err
		}
	}
	if lo.kind == nConst && hi.kind == nConst {
		if c, _ := compare(hi.val, lo.val); c < 0 {
			return nil, p.fail(hi.tok, "BETWEEN's upper bound %s is below its lower bound %s", hi.tok.text, lo.tok.text)
		}
	}
	if not {
		return &node{kind: nOr, tok: v.tok,
			l: &node{kind: nCmp, op: tLt, l: v, r: lo, tok: v.tok},
			r: &node{kind: nCmp, op: tGt, l: v, r: hi, tok: v.tok}}, nil
	}
	return &node{kind: nAnd, tok: v.tok,
		l: &node{kind: nCmp, op: tGe, l: v, r: lo, tok: v.tok},
		r: &node{kind: nCmp, op: tLe, l: v, r: hi, tok: v.tok}}, nil
}

func (p *parser) in(v *node, not bool) (*node, error) {
	p.next()
	if v.kind != nProp {
		return nil, p.fail(v.tok, "IN needs a property on its left")
	}
	if _, err := p.expect(tLParen, "( after IN"); err != nil {
		return nil, err
	}
	n := &node{kind: nIn, not: not, l: v, tok: v.tok}
	for {
		s, err := p.expect(tString, "a string literal in the IN list")
		if err != nil {
			return nil, err
		}
		n.list = append(n.list, []byte(s.str))
		if p.peek().kind != tComma {
			break
		}
		p.next()
	}
	if _, err := p.expect(tRParen, ", or ) in the IN list"); err != nil {
		return nil, err
	}
	return n, nil
}

// comparisonOps are the tokens that would make "NOT a <op> ..." compare
// the result of NOT a.
func comparisonOp(k tokKind) bool {
	switch k {
	case tEq, tNe, tLt, tLe, tGt, tGe, tIs, tBetween, tIn, tContains, tStartsWith, tEndsWith:
		return true
	}
	return false
}

func (p *parser) unary() (*node, error) {
	t := p.peek()
	switch t.kind {
	case tPlus, tMinus, tNot, tLParen:
		if p.nesting++; p.nesting > MaxNesting {
			return nil, p.fail(t, "parentheses, NOT and signs nest more than %d deep", MaxNesting)
		}
		defer func() { p.nesting-- }()
	}
	switch t.kind {
	case tPlus:
		p.next()
		return p.unary()
	case tMinus:
		p.next()
		if n := p.peek(); n.kind == tInt && strings.TrimRight(n.text, "lL") == "9223372036854775808" {
			p.next()
			return &node{kind: nConst, val: value{k: kLong, i: math.MinInt64}, tok: t}, nil
		}
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		switch {
		case n.kind == nConst && n.val.k == kLong:
			return &node{kind: nConst, val: value{k: kLong, i: -n.val.i}, tok: t}, nil
		case n.kind == nConst && n.val.k == kDouble:
			return &node{kind: nConst, val: value{k: kDouble, f: -n.val.f}, tok: t}, nil
		case n.kind == nProp || n.kind == nNeg:
			return &node{kind: nNeg, l: n, tok: t}, nil
		}
		return nil, p.fail(n.tok, "only numbers can be negated")
	case tNot:
		p.next()
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		if n.kind == nProp && comparisonOp(p.peek().kind) {
			return nil, p.fail(t, "NOT applies to %s alone here; write NOT (%s %s ...)", n.tok.text, n.tok.text, p.peek().text)
		}
		if n, err = p.asCond(n); err != nil {
			return nil, err
		}
		return &node{kind: nNot, l: n, tok: t}, nil
	}
	return p.primary()
}

func (p *parser) primary() (*node, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return &node{kind: nConst, val: value{k: kString, s: []byte(t.str)}, tok: t}, nil
	case tInt:
		i, err := strconv.ParseInt(strings.TrimRight(t.text, "lL"), 10, 64)
		if err != nil {
			return nil, p.fail(t, "integer out of the 64-bit range")
		}
		return &node{kind: nConst, val: value{k: kLong, i: i}, tok: t}, nil
	case tFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil && !isRange(err) {
			return nil, p.fail(t, "malformed decimal")
		}
		return &node{kind: nConst, val: value{k: kDouble, f: f}, tok: t}, nil
	case tTrue, tFalse:
		return &node{kind: nConst, val: value{k: kBool, b: t.kind == tTrue}, tok: t}, nil
	case tIdent:
		idx, ok := p.index[t.text]
		if !ok {
			idx = len(p.names)
			p.index[t.text] = idx
			p.names = append(p.names, t.text)
		}
		return &node{kind: nProp, prop: idx, tok: t}, nil
	case tLParen:
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tRParen, ")"); err != nil {
			return nil, err
		}
		return n, nil
	case tNull:
		return nil, p.fail(t, "NULL can only be tested with IS NULL or IS NOT NULL")
	}
	return nil, p.fail(t, "expected a value, a property or (, found %s", t.describe())
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
