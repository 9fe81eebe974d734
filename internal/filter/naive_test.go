package filter

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A second evaluator, written for clarity rather than speed, over the same
// trees: values are nil (NULL), bool, int64, float64 or string, properties
// come from a map and are looked up at every use, conversions use
// strconv and a regular expression. The differential test and the fuzz
// target check Match against it.

var errEval = errors.New("evaluation error")

var javaDouble = regexp.MustCompile(`^[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)$`)

func naiveDouble(s string) (float64, error) {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	if len(s) > 1 && strings.ContainsAny(s[len(s)-1:], "fFdD") {
		s = s[:len(s)-1]
	}
	if !javaDouble.MatchString(s) {
		return 0, errEval
	}
	switch strings.TrimLeft(s, "+-") {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		if s[0] == '-' {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRange(err) {
		return 0, errEval
	}
	return f, nil
}

func naiveConvert(s string, to any) (any, error) {
	switch to.(type) {
	case int64:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, errEval
		}
		return i, nil
	case float64:
		return naiveDouble(s)
	case bool:
		return strings.EqualFold(s, "true"), nil
	}
	return s, nil
}

// naiveCompare returns -1, 0 or 1, or an error.
func naiveCompare(l, r any) (int, error) {
	var err error
	if ls, ok := l.(string); ok {
		if _, rs := r.(string); !rs {
			if l, err = naiveConvert(ls, r); err != nil {
				return 0, err
			}
		}
	} else if rs, ok := r.(string); ok {
		if r, err = naiveConvert(rs, l); err != nil {
			return 0, err
		}
	}
	if li, ok := l.(int64); ok {
		if _, ok := r.(float64); ok {
			l = float64(li)
		}
	}
	if ri, ok := r.(int64); ok {
		if _, ok := l.(float64); ok {
			r = float64(ri)
		}
	}
	switch lv := l.(type) {
	case int64:
		if rv, ok := r.(int64); ok {
			return cmpOrdered(lv, rv), nil
		}
	case float64:
		if rv, ok := r.(float64); ok {
			// Java's Double.compare orders by bits after NaN and -0.
			switch {
			case math.IsNaN(lv) || math.IsNaN(rv):
				return cmpOrdered(b2i(math.IsNaN(lv)), b2i(math.IsNaN(rv))), nil
			case lv == rv:
				return cmpOrdered(b2i(!math.Signbit(lv)), b2i(!math.Signbit(rv))), nil
			}
			return cmpOrdered(lv, rv), nil
		}
	case bool:
		if rv, ok := r.(bool); ok {
			return cmpOrdered(b2i(lv), b2i(rv)), nil
		}
	case string:
		if rv, ok := r.(string); ok {
			return strings.Compare(lv, rv), nil
		}
	}
	return -1, nil
}

func cmpOrdered[T int | int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func naive(e *Expr, n *node, m map[string]string) (any, error) {
	sub := func(x *node) (any, error) { return naive(e, x, m) }
	switch n.kind {
	case nConst:
		switch n.val.k {
		case kBool:
			return n.val.b, nil
		case kLong:
			return n.val.i, nil
		case kDouble:
			return n.val.f, nil
		case kString:
			return string(n.val.s), nil
		}
		return nil, nil
	case nProp:
		if v, ok := m[e.names[n.prop]]; ok {
			return v, nil
		}
		return nil, nil
	case nNeg:
		v, err := sub(n.l)
		switch v := v.(type) {
		case int64:
			return -v, err
		case float64:
			return -v, err
		}
		return nil, err
	case nCast:
		v, _ := sub(n.l)
		if v == nil {
			return nil, nil
		}
		return false, nil
	case nNot:
		v, err := sub(n.l)
		if b, ok := v.(bool); ok {
			return !b, err
		}
		return nil, err
	case nAnd, nOr:
		l, err := sub(n.l)
		if err != nil {
			return nil, err
		}
		isOr := n.kind == nOr
		if l == isOr {
			return isOr, nil
		}
		r, err := sub(n.r)
		if err != nil {
			return nil, err
		}
		if r == isOr {
			return isOr, nil
		}
		if l == nil || r == nil {
			return nil, nil
		}
		return !isOr, nil
	case nIsNull:
		v, err := sub(n.l)
		return (v == nil) != n.not, err
	case nIn:
		v, _ := sub(n.l)
		if v == nil {
			return nil, nil
		}
		in := false
		for _, s := range n.list {
			in = in || string(s) == v
		}
		return in != n.not, nil
	case nStr:
		v, _ := sub(n.l)
		if v == nil {
			return nil, nil
		}
		s, arg := v.(string), string(n.r.val.s)
		f := map[tokKind]func(string, string) bool{tContains: strings.Contains, tStartsWith: strings.HasPrefix, tEndsWith: strings.HasSuffix}[n.op]
		return f(s, arg) != n.not, nil
	case nCmp:
		l, err := sub(n.l)
		if err != nil {
			return nil, err
		}
		r, err := sub(n.r)
		if err != nil || l == nil || r == nil {
			return nil, err
		}
		ls, lok := l.(string)
		rs, rok := r.(string)
		if lok && rok {
			if n.op == tEq || n.op == tNe {
				return (ls == rs) == (n.op == tEq), nil
			}
			lf, err1 := naiveDouble(ls)
			rf, err2 := naiveDouble(rs)
			if err1 != nil || err2 != nil {
				return nil, errEval
			}
			l, r = lf, rf
		}
		c, err := naiveCompare(l, r)
		if err != nil {
			return nil, err
		}
		return map[tokKind]bool{tEq: c == 0, tNe: c != 0, tLt: c < 0, tLe: c <= 0, tGt: c > 0, tGe: c >= 0}[n.op], nil
	}
	panic(fmt.Sprintf("naive: node kind %d", n.kind))
}

func naiveMatch(e *Expr, m map[string]string) bool {
	v, err := naive(e, e.root, m)
	return err == nil && v == true
}

// print writes the tree back as an expression, fully parenthesized, for
// the parser round trip (BETWEEN comes back as its two comparisons).
func print(e *Expr, n *node, b *bytes.Buffer) {
	sub := func(x *node) { print(e, x, b) }
	switch n.kind {
	case nConst:
		switch n.val.k {
		case kBool:
			b.WriteString(strings.ToUpper(strconv.FormatBool(n.val.b)))
		case kLong:
			fmt.Fprintf(b, "(%d)", n.val.i)
		case kDouble:
			s := strconv.FormatFloat(n.val.f, 'g', -1, 64)
			switch {
			case math.IsInf(n.val.f, 1):
				s = "1e999"
			case math.IsInf(n.val.f, -1):
				s = "-1e999"
			case !strings.ContainsAny(s, ".e"):
				s += ".0"
			}
			fmt.Fprintf(b, "(%s)", s)
		case kString:
			b.WriteString("'" + strings.ReplaceAll(string(n.val.s), "'", "''") + "'")
		}
	case nProp:
		b.WriteString(e.names[n.prop])
	case nNeg:
		b.WriteString("(-")
		sub(n.l)
		b.WriteString(")")
	case nCast:
		sub(n.l)
	case nNot:
		b.WriteString("(NOT ")
		sub(n.l)
		b.WriteString(")")
	case nAnd, nOr:
		b.WriteString("(")
		sub(n.l)
		b.WriteString(map[nodeKind]string{nAnd: " AND ", nOr: " OR "}[n.kind])
		sub(n.r)
		b.WriteString(")")
	case nIsNull:
		b.WriteString("(")
		sub(n.l)
		b.WriteString(map[bool]string{false: " IS NULL)", true: " IS NOT NULL)"}[n.not])
	case nIn, nStr:
		b.WriteString("(")
		sub(n.l)
		if n.not {
			b.WriteString(" NOT")
		}
		if n.kind == nStr {
			b.WriteString(map[tokKind]string{tContains: " CONTAINS ", tStartsWith: " STARTSWITH ", tEndsWith: " ENDSWITH "}[n.op])
			sub(n.r)
		} else {
			b.WriteString(" IN (")
			for i, s := range n.list {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("'" + strings.ReplaceAll(string(s), "'", "''") + "'")
			}
			b.WriteString(")")
		}
		b.WriteString(")")
	case nCmp:
		b.WriteString("(")
		sub(n.l)
		b.WriteString(map[tokKind]string{tEq: " = ", tNe: " <> ", tLt: " < ", tLe: " <= ", tGt: " > ", tGe: " >= "}[n.op])
		sub(n.r)
		b.WriteString(")")
	}
}

func printed(e *Expr) string {
	var b bytes.Buffer
	print(e, e.root, &b)
	return b.String()
}

var (
	genNames  = []string{"a", "b", "c", "TAGS"}
	genConsts = []string{"0", "1", "-1", "3L", "2.5", "-0.0", "1e3", "'x'", "'1'", "'abc'", "''", "TRUE", "FALSE", "9223372036854775807", "-9223372036854775808"}
	genValues = []string{"0", "1", "-1", "2.5", "x", "abc", "1", "true", "TRUE", " 3", "NaN", "-Infinity", "+2", "1e3", "", "-0", "0.0", "3d", "9223372036854775807", "99999999999999999999"}
)

// genExpr writes a random expression, mostly well formed.
func genExpr(r *rand.Rand, depth int) string {
	operand := func() string {
		switch r.IntN(4) {
		case 0:
			return genConsts[r.IntN(len(genConsts))]
		case 1:
			return "-" + genNames[r.IntN(len(genNames))]
		}
		return genNames[r.IntN(len(genNames))]
	}
	str := func() string { return genConsts[7+r.IntN(4)] }
	name := genNames[r.IntN(len(genNames))]
	if depth <= 0 || r.IntN(3) == 0 {
		switch r.IntN(9) {
		case 0:
			return operand() + []string{" = ", " <> ", " > ", " >= ", " < ", " <= "}[r.IntN(6)] + operand()
		case 1:
			return name + []string{" BETWEEN ", " NOT BETWEEN "}[r.IntN(2)] + operand() + " AND " + operand()
		case 2:
			return name + []string{" IN (", " NOT IN ("}[r.IntN(2)] + str() + ", " + str() + ")"
		case 3:
			return name + []string{" IS NULL", " IS NOT NULL"}[r.IntN(2)]
		case 4:
			return name + []string{" CONTAINS ", " NOT STARTSWITH ", " ENDSWITH "}[r.IntN(3)] + str()
		case 5:
			return []string{"TRUE", "FALSE", name}[r.IntN(3)]
		}
		return name + " = " + operand()
	}
	switch r.IntN(4) {
	case 0:
		return "NOT (" + genExpr(r, depth-1) + ")"
	case 1:
		return "(" + genExpr(r, depth-1) + ") = " + []string{"TRUE", "FALSE"}[r.IntN(2)]
	}
	return "(" + genExpr(r, depth-1) + []string{" AND ", " OR "}[r.IntN(2)] + genExpr(r, depth-1) + ")"
}

func genProps(r *rand.Rand) map[string]string {
	m := map[string]string{}
	for _, n := range genNames {
		if r.IntN(4) > 0 {
			m[n] = genValues[r.IntN(len(genValues))]
		}
	}
	return m
}

// checkAgainstNaive compares Match with the naive evaluator on msgs and
// checks the parser round trip.
func checkAgainstNaive(t *testing.T, e *Expr, msgs []map[string]string) {
	t.Helper()
	for _, m := range msgs {
		want := naiveMatch(e, m)
		if got := e.Match(props(m)); got != want {
			t.Fatalf("%q over %q: Match %v, naive %v", e.String(), m, got, want)
		}
		if got := e.MatchProperties(encodeProps(m)); got != want {
			t.Fatalf("%q over %q: MatchProperties %v, naive %v", e.String(), m, got, want)
		}
	}
	p := printed(e)
	e2, err := Compile(p)
	if err != nil {
		t.Fatalf("%q printed as %q: %v", e.String(), p, err)
	}
	if p2 := printed(e2); p2 != p {
		t.Fatalf("%q printed as %q, then as %q", e.String(), p, p2)
	}
}

// TestMatch_Differential evaluates random expressions over random
// messages with Match and the naive evaluator.
func TestMatch_Differential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	exprs, compiled, matched := 20000, 0, 0
	if testing.Short() {
		exprs = 2000
	}
	for range exprs {
		src := genExpr(r, 4)
		e, err := Compile(src)
		if err != nil {
			continue
		}
		compiled++
		msgs := make([]map[string]string, 8)
		for i := range msgs {
			msgs[i] = genProps(r)
			if e.Match(props(msgs[i])) {
				matched++
			}
		}
		checkAgainstNaive(t, e, msgs)
	}
	// NB: the generator must exercise both outcomes and mostly compile,
	// or the comparison proves little.
	if compiled < exprs/2 || matched < compiled/10 || matched > compiled*8*9/10 {
		t.Fatalf("generator too narrow: %d of %d compiled, %d of %d evaluations matched", compiled, exprs, matched, compiled*8)
	}
	t.Logf("%d of %d compiled; %d of %d evaluations matched", compiled, exprs, matched, compiled*8)
}

// FuzzCompile checks that Compile never panics, and that what it accepts
// evaluates as the naive evaluator does and survives a print round trip.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{"a between 0 and 3", "TAGS is not null and TAGS in ('TagA', 'TagB')",
		"a = 'it''s' OR NOT (b > -9223372036854775808)", "a > 1e3 AND c CONTAINS 'x'", "(a", "'", "1.2.3", "a NOT IN ('x')"} {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(3, 4))
	msgs := make([]map[string]string, 16)
	for i := range msgs {
		msgs[i] = genProps(r)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Column < 1 || se.Column > len(src)+1 {
				t.Fatalf("Compile(%q) = %v: not a SyntaxError with a column in the source", src, err)
			}
			return
		}
		checkAgainstNaive(t, e, msgs)
	})
}

// encodeProps writes m as a stored properties string, in a random order of
// pairs, with a decoy pair of another name first.
func encodeProps(m map[string]string) []byte {
	b := []byte("zz_decoy\x01x\x02")
	for k, v := range m {
		b = append(b, k...)
		b = append(b, 1)
		b = append(b, v...)
		b = append(b, 2)
	}
	return b
}
