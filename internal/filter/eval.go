package filter

import (
	"bytes"
	"math"
	"strconv"
)

type kind uint8

const (
	kNull kind = iota
	kBool
	kLong
	kDouble
	kString
)

// value is one evaluated operand. s aliases a constant or a property value.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s []byte
}

// Lookup returns the value of a message property, and whether the message
// has it. The value is only read during the Match call.
type Lookup func(name string) (value []byte, ok bool)

// cachedNames is how many properties Match remembers per message; an
// expression reading more looks the others up at each use.
const cachedNames = 16

type evalCtx struct {
	e      *Expr
	lookup Lookup
	seen   [cachedNames]uint8 // 0 not looked up, 1 missing, 2 present
	vals   [cachedNames][]byte
}

func (c *evalCtx) prop(i int) value {
	if i >= cachedNames {
		v, ok := c.lookup(c.e.names[i])
		if !ok {
			return value{}
		}
		return value{k: kString, s: v}
	}
	if c.seen[i] == 0 {
		v, ok := c.lookup(c.e.names[i])
		c.seen[i], c.vals[i] = 1, v
		if ok {
			c.seen[i] = 2
		}
	}
	if c.seen[i] == 1 {
		return value{}
	}
	return value{k: kString, s: c.vals[i]}
}

// Match reports whether a message whose properties lookup returns matches:
// whether the expression evaluates to TRUE (not FALSE, NULL or an error).
func (e *Expr) Match(lookup Lookup) bool {
	c := evalCtx{e: e, lookup: lookup}
	v, ok := c.eval(e.root)
	return ok && v.k == kBool && v.b
}

// MatchProperties is Match over a stored message's properties string
// (name\x01value pairs, each ended or joined by \x02: RocketMQ's encoding),
// read in one pass that finds every property the expression uses (the
// first pair of a name counts, as message.PropertyValue reads it).
func (e *Expr) MatchProperties(props []byte) bool {
	c := evalCtx{e: e}
	n := min(len(e.names), cachedNames)
	for i := range n {
		c.seen[i] = 1 // missing unless found below
	}
	for q, left := props, n; len(q) > 0 && left > 0; {
		var name, val []byte
		name, val, q = nextPair(q)
		if name == nil {
			continue
		}
		for i := range n {
			if c.seen[i] == 1 && string(name) == e.names[i] {
				c.seen[i], c.vals[i] = 2, val
				left--
				break
			}
		}
	}
	if len(e.names) > cachedNames {
		c.lookup = func(name string) ([]byte, bool) { return lookupProperty(props, name) }
	}
	v, ok := c.eval(e.root)
	return ok && v.k == kBool && v.b
}

// lookupProperty finds name in a properties string (see MatchProperties).
func lookupProperty(props []byte, name string) ([]byte, bool) {
	for q := props; len(q) > 0; {
		var n, v []byte
		if n, v, q = nextPair(q); n != nil && string(n) == name {
			return v, true
		}
	}
	return nil, false
}

// nextPair splits the first name\x01value pair off a properties string
// and returns the rest; name is nil for a pair without a name.
func nextPair(q []byte) (name, value, rest []byte) {
	pair := q
	if i := bytes.IndexByte(q, 2); i >= 0 {
		pair, rest = q[:i], q[i+1:]
	}
	if k := bytes.IndexByte(pair, 1); k > 0 {
		return pair[:k], pair[k+1:], rest
	}
	return nil, nil, rest
}

var (
	vTrue  = value{k: kBool, b: true}
	vFalse = value{k: kBool}
)

func boolValue(b bool) value {
	if b {
		return vTrue
	}
	return vFalse
}

// eval returns n's value; ok is false for an evaluation error (a value
// that cannot be converted), which fails the whole expression.
func (c *evalCtx) eval(n *node) (v value, ok bool) {
	switch n.kind {
	case nConst:
		return n.val, true
	case nProp:
		return c.prop(n.prop), true
	case nNeg:
		v, ok := c.eval(n.l)
		switch {
		case !ok:
			return v, false
		case v.k == kLong:
			return value{k: kLong, i: -v.i}, true
		case v.k == kDouble:
			return value{k: kDouble, f: -v.f}, true
		}
		return value{}, true // RocketMQ: negating a string is NULL
	case nCast:
		if c.eval1(n.l).k == kNull {
			return value{}, true
		}
		return vFalse, true // a property is a string, never a boolean
	case nNot:
		v, ok := c.eval(n.l)
		if !ok || v.k == kNull {
			return v, ok
		}
		return boolValue(!v.b), true
	case nAnd, nOr:
		// SQL's three-valued logic, left to right: OR stops at TRUE,
		// AND at FALSE.
		stop := n.kind == nOr
		l, ok := c.eval(n.l)
		if !ok || l.k == kBool && l.b == stop {
			return l, ok
		}
		r, ok := c.eval(n.r)
		if !ok || r.k == kBool && r.b == stop {
			return r, ok
		}
		if l.k == kNull || r.k == kNull {
			return value{}, true
		}
		return boolValue(!stop), true
	case nIsNull:
		v, ok := c.eval(n.l)
		return boolValue((v.k == kNull) != n.not), ok
	case nIn:
		v := c.eval1(n.l)
		if v.k == kNull {
			return value{}, true
		}
		found := false
		for _, s := range n.list {
			if bytes.Equal(v.s, s) {
				found = true
				break
			}
		}
		return boolValue(found != n.not), true
	case nStr:
		v := c.eval1(n.l)
		if v.k == kNull {
			return value{}, true
		}
		var m bool
		switch n.op {
		case tContains:
			m = bytes.Contains(v.s, n.r.val.s)
		case tStartsWith:
			m = bytes.HasPrefix(v.s, n.r.val.s)
		default:
			m = bytes.HasSuffix(v.s, n.r.val.s)
		}
		return boolValue(m != n.not), true
	case nCmp:
		l, ok := c.eval(n.l)
		if !ok {
			return l, false
		}
		r, ok := c.eval(n.r)
		if !ok || l.k == kNull || r.k == kNull {
			return value{}, ok
		}
		return cmp(n.op, l, r)
	}
	panic("filter: unknown node kind") // the parser makes only the kinds above
}

// eval1 evaluates a property node (which cannot fail).
func (c *evalCtx) eval1(n *node) value { return c.prop(n.prop) }

// cmp applies a comparison operator to two non-NULL values.
func cmp(op tokKind, l, r value) (value, bool) {
	if op == tEq || op == tNe {
		eq := false
		if l.k == kString && r.k == kString {
			eq = bytes.Equal(l.s, r.s)
		} else {
			c, ok := compare(l, r)
			if !ok {
				return value{}, false
			}
			eq = c == 0
		}
		return boolValue(eq == (op == tEq)), true
	}
	if l.k == kString && r.k == kString {
		// Two properties: RocketMQ compares them as doubles.
		var ok bool
		if l, ok = toDouble(l); !ok {
			return value{}, false
		}
		if r, ok = toDouble(r); !ok {
			return value{}, false
		}
	}
	c, ok := compare(l, r)
	if !ok {
		return value{}, false
	}
	switch op {
	case tLt:
		return boolValue(c < 0), true
	case tLe:
		return boolValue(c <= 0), true
	case tGt:
		return boolValue(c > 0), true
	}
	return boolValue(c >= 0), true
}

// compare orders two non-NULL values as RocketMQ's ComparisonExpression
// does with string conversion: a string is converted to the other side's
// type; a long meets a double as a double. ok is false when a string does
// not convert. Values of types that do not convert into each other
// (booleans and numbers) compare as unequal (-1).
func compare(l, r value) (int, bool) {
	var ok bool
	switch {
	case l.k == r.k:
	case l.k == kString:
		if l, ok = convert(l, r.k); !ok {
			return 0, false
		}
	case r.k == kString:
		if r, ok = convert(r, l.k); !ok {
			return 0, false
		}
	case l.k == kLong && r.k == kDouble:
		l = value{k: kDouble, f: float64(l.i)}
	case l.k == kDouble && r.k == kLong:
		r = value{k: kDouble, f: float64(r.i)}
	default:
		return -1, true
	}
	switch l.k {
	case kBool:
		switch {
		case l.b == r.b:
			return 0, true
		case r.b:
			return -1, true
		}
		return 1, true
	case kLong:
		switch {
		case l.i < r.i:
			return -1, true
		case l.i > r.i:
			return 1, true
		}
		return 0, true
	case kDouble:
		return compareDouble(l.f, r.f), true
	}
	return bytes.Compare(l.s, r.s), true
}

// compareDouble is Java's Double.compare: NaN equals itself and is above
// everything, -0 is below 0.
func compareDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	sa, sb := math.Signbit(a), math.Signbit(b)
	switch {
	case sa == sb:
		return 0
	case sa:
		return -1
	}
	return 1
}

// convert converts a string to kind k.
func convert(v value, k kind) (value, bool) {
	switch k {
	case kLong:
		i, ok := parseLong(v.s)
		return value{k: kLong, i: i}, ok
	case kDouble:
		return toDouble(v)
	case kBool:
		return boolValue(len(v.s) == 4 && bytes.EqualFold(v.s, []byte("true"))), true
	}
	return v, true
}

// parseLong is Java's Long.valueOf: an optional sign, then decimal digits,
// within the int64 range.
func parseLong(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg, b = b[0] == '-', b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// toDouble converts a string as Java's Double.valueOf does for decimal
// text: surrounding blanks trimmed, an optional f, F, d or D suffix,
// NaN and [+-]Infinity; no hexadecimal.
func toDouble(v value) (value, bool) {
	b := bytes.TrimFunc(v.s, func(r rune) bool { return r <= ' ' })
	if n := len(b); n > 1 && bytes.IndexByte([]byte("fFdD"), b[n-1]) >= 0 {
		b = b[:n-1]
	}
	body := b
	if len(body) > 0 && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	switch {
	case string(body) == "NaN":
		return value{k: kDouble, f: math.NaN()}, true
	case string(body) == "Infinity":
		return value{k: kDouble, f: math.Inf(1 - 2*boolInt(b[0] == '-'))}, true
	case len(body) == 0:
		return value{}, false
	}
	for _, c := range body {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return value{}, false
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !isRange(err) {
		return value{}, false
	}
	return value{k: kDouble, f: f}, true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
