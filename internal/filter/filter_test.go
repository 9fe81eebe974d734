package filter

import (
	"errors"
	"strings"
	"testing"
)

// props returns a Lookup over a map.
func props(m map[string]string) Lookup {
	return func(name string) ([]byte, bool) {
		v, ok := m[name]
		return []byte(v), ok
	}
}

// TestMatch runs RocketMQ's documented examples (the SQL92 filter guide
// and its ExpressionTest) and the rules of the package doc.
func TestMatch(t *testing.T) {
	abc := map[string]string{"a": "3", "b": "abc", "c": "2.5", "TAGS": "TagA", "flag": "TRUE", "neg": "-7", "big": "9223372036854775807"}
	tests := []struct {
		expr string
		msg  map[string]string
		want bool
	}{
		// The guide's example: a BETWEEN 0 AND 3 over a = 0..9.
		{"a between 0 and 3", map[string]string{"a": "0"}, true},
		{"a between 0 and 3", map[string]string{"a": "3"}, true},
		{"a between 0 and 3", map[string]string{"a": "4"}, false},
		{"a BETWEEN 0 AND 3", map[string]string{}, false},
		{"TAGS is not null and TAGS in ('TagA', 'TagB')", abc, true},
		{"TAGS is not null and TAGS in ('TagC', 'TagB')", abc, false},
		{"(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)", abc, true},
		// Numeric comparison: the property converts to the constant's type.
		{"a > 2", abc, true},
		{"a >= 3", abc, true},
		{"a < 3", abc, false},
		{"a <= 3L", abc, true},
		{"a = 3", abc, true},
		{"a = 3.0", abc, true}, // as a double
		{"a <> 4", abc, true},
		{"c > 2", abc, false}, // "2.5" is not a long: an evaluation error
		{"c > 2.0", abc, true},
		{"c = 2.5", abc, true},
		{"neg < -5", abc, true},
		{"neg = -7", abc, true},
		{"big = 9223372036854775807", abc, true},
		{"a > -9223372036854775808", abc, true},
		{"a > 1e0", abc, true},
		{"a < .5e1", abc, true},
		// Strings: = and <> only, '' escapes a quote.
		{"b = 'abc'", abc, true},
		{"b <> 'abc'", abc, false},
		{"b = 'ABC'", abc, false},
		{"q = 'it''s'", map[string]string{"q": "it's"}, true},
		{"q = ''", map[string]string{"q": ""}, true},
		{"b IN ('x', 'abc')", abc, true},
		{"b NOT IN ('x', 'abc')", abc, false},
		{"b not in ('x')", abc, true},
		{"b = 3", abc, false}, // cannot convert: no match
		// NULL: a missing property.
		{"x IS NULL", abc, true},
		{"x IS NOT NULL", abc, false},
		{"a IS NULL", abc, false},
		{"x = 'abc'", abc, false},
		{"x <> 'abc'", abc, false},
		{"NOT (x = 'abc')", abc, false},
		{"x > 1", abc, false},
		{"NOT (x > 1)", abc, false},
		{"x IN ('a')", abc, false},
		{"x NOT IN ('a')", abc, false},
		{"x BETWEEN 1 AND 2", abc, false},
		{"x NOT BETWEEN 1 AND 2", abc, false},
		// Three-valued logic.
		{"x = 'a' OR a = 3", abc, true},
		{"x = 'a' AND a = 4", abc, false},
		{"NOT (x = 'a' AND a = 4)", abc, true}, // NULL AND FALSE is FALSE
		{"NOT (x = 'a' OR a = 4)", abc, false}, // NULL OR FALSE is NULL
		{"x = 'a' OR x IS NULL", abc, true},
		// An evaluation error fails the whole expression, unless the left
		// side decided first.
		{"b > 1 OR a = 3", abc, false},
		{"a = 3 OR b > 1", abc, true},
		{"a = 4 AND b > 1", abc, false},
		// NOT BETWEEN, booleans, unary signs.
		{"a NOT BETWEEN 4 AND 5", abc, true},
		{"a NOT BETWEEN 1 AND 5", abc, false},
		{"flag = TRUE", abc, true},
		{"flag = FALSE", abc, false},
		{"TRUE", abc, true},
		{"FALSE OR TRUE", abc, true},
		{"NOT FALSE", abc, true},
		{"a = +3", abc, true},
		{"-a < 0", abc, false}, // negating a string property is NULL
		{"a", abc, false},      // a property as a condition is FALSE
		{"NOT a", abc, true},
		{"NOT x", abc, false},
		{"(a > 1) = TRUE", abc, true},
		{"1 = 1.0", nil, true},
		{"'x' = 'x'", nil, true},
		// Keywords ignore case; property names do not.
		{"A = 3", abc, false},
		{"a Is Not Null AnD b iN ('abc')", abc, true},
		// Two properties: strings for =, numbers for the others.
		{"a = c", abc, false},
		{"c > a", abc, false},
		{"a > c", abc, true},
		// RocketMQ 5's string functions.
		{"b CONTAINS 'bc'", abc, true},
		{"b NOT CONTAINS 'bc'", abc, false},
		{"b STARTSWITH 'ab'", abc, true},
		{"b ENDSWITH 'ab'", abc, false},
		{"x CONTAINS 'a'", abc, false},
		// Double conversion as Java's Double.valueOf.
		{"d > 1.0", map[string]string{"d": " 2.5 "}, true},
		{"d > 1.0", map[string]string{"d": "2.5f"}, true},
		{"d > 1.0", map[string]string{"d": "NaN"}, true},
		{"d < 1.0", map[string]string{"d": "-Infinity"}, true},
		{"d > 1.0", map[string]string{"d": "0x1p4"}, false},
		{"d > 1.0", map[string]string{"d": "inf"}, false},
		{"d > 1", map[string]string{"d": "+4"}, true},
		{"d > 1", map[string]string{"d": " 4"}, false}, // Long.valueOf does not trim
		{"d > 1", map[string]string{"d": "9223372036854775808"}, false},
		{"d < 1", map[string]string{"d": "-9223372036854775808"}, true},
	}
	for _, tt := range tests {
		e, err := Compile(tt.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		if got := e.Match(props(tt.msg)); got != tt.want {
			t.Errorf("%q over %v = %v, want %v", tt.expr, tt.msg, got, tt.want)
		}
	}
}

// TestCompile_Errors checks that bad expressions are refused with the
// column and token that failed.
func TestCompile_Errors(t *testing.T) {
	tests := []struct {
		expr   string
		column int
		token  string
		msg    string
	}{
		{"", 1, "end of expression", "empty"},
		{"   ", 4, "end of expression", "empty"},
		{"a >", 4, "end of expression", "expected a value"},
		{"a > 'x'", 5, `"'x'"`, "only numbers"},
		{"a >= TRUE", 6, `"TRUE"`, "only numbers"},
		{"a BETWEEN 'a' AND 'b'", 11, `"'a'"`, "only numbers"},
		{"a BETWEEN 3 AND 1", 17, `"1"`, "below its lower bound"},
		{"a BETWEEN 1 OR 3", 13, `"OR"`, "expected AND"},
		{"a = NULL", 5, `"NULL"`, "IS NULL"},
		{"a IN (1, 2)", 7, `"1"`, "string literal"},
		{"a IN ()", 7, `")"`, "string literal"},
		{"a IN ('x' 'y')", 11, `"'y'"`, ", or )"},
		{"'x' IN ('x')", 1, `"'x'"`, "property"},
		{"a = 'abc", 5, "'abc", "unterminated"},
		{"a = 1 AND", 10, "end of expression", "expected a value"},
		{"(a = 1", 7, "end of expression", "expected )"},
		{"a = 1)", 6, `")"`, "after a complete expression"},
		{"a = 1 b = 2", 7, `"b"`, "after a complete expression"},
		{"a == 1", 4, `"="`, "expected a value"},
		{"a != 1", 3, `"!"`, "unexpected character"},
		{"a = 1x", 5, `"1x"`, "malformed number"},
		{"a = 1.2.3", 5, `"1.2.3"`, "malformed number"},
		{"a = 1e", 5, `"1e"`, "exponent"},
		{"a = 9223372036854775808", 5, `"9223372036854775808"`, "64-bit"},
		{"a = 1 AND 5", 11, `"5"`, "condition"},
		{"'abc'", 1, `"'abc'"`, "condition"},
		{"NOT a = 'x'", 1, `"NOT"`, "write NOT (a ="},
		{"NOT 5", 5, `"5"`, "condition"},
		{"-'x' > 1", 2, `"'x'"`, "negated"},
		{"TRUE = 1", 6, `"="`, "boolean constant"},
		{"a IS 5", 6, `"5"`, "NULL after IS"},
		{"a CONTAINS b", 12, `"b"`, "string literal"},
		{"5 CONTAINS 'b'", 1, `"5"`, "property"},
		{"a > (b = 1)", 6, `"b"`, "only numbers"},
		{"a = 1 é", 7, `"\xc3"`, "unexpected character"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.expr)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
			t.Errorf("Compile(%q) = %v, want a *SyntaxError", tt.expr, err)
			continue
		}
		if se.Column != tt.column || se.Token != tt.token || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("Compile(%q) = column %d, token %s, %q; want column %d, token %s, message with %q",
				tt.expr, se.Column, se.Token, se.Msg, tt.column, tt.token, tt.msg)
		}
	}
}

func TestExpr_String(t *testing.T) {
	e, err := Compile("a > 1")
	if err != nil || e.String() != "a > 1" {
		t.Fatalf("Compile = %v, %v", e, err)
	}
}

// TestMatch_ManyProperties covers expressions reading more properties
// than Match caches.
func TestMatch_ManyProperties(t *testing.T) {
	var b strings.Builder
	m := map[string]string{}
	for i := range cachedNames + 4 {
		if i > 0 {
			b.WriteString(" AND ")
		}
		name := "p" + string(rune('a'+i))
		b.WriteString(name + " = 'v' AND " + name + " IS NOT NULL")
		m[name] = "v"
	}
	e, err := Compile(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if !e.Match(props(m)) {
		t.Fatal("no match with every property set")
	}
	delete(m, "pt")
	if e.Match(props(m)) {
		t.Fatal("match with the last property missing")
	}
}
