package filter

import (
	"errors"
	"strings"
	"testing"
)

// TestCompile_Limits: an expression is refused with a *SyntaxError past
// MaxLen bytes, MaxNesting nested parentheses, NOT or signs, or MaxHeight
// levels of tree, and accepted up to each limit (and then evaluates as
// usual). A heartbeat of a million parentheses overflowed the parser's
// stack: a fatal error, which no recover catches.
func TestCompile_Limits(t *testing.T) {
	nest := func(open, expr, close string, n int) string {
		return strings.Repeat(open, n) + expr + strings.Repeat(close, n)
	}
	chain := func(n int) string { // n terms, n+1 levels
		terms := make([]string, n)
		for i := range terms {
			terms[i] = "a = 3"
		}
		return strings.Join(terms, " OR ")
	}
	refused := []struct {
		name, expr, msg string
	}{
		{"length", "a = '" + strings.Repeat("x", MaxLen) + "'", "bytes, at most"},
		{"parentheses", nest("(", "a = 3", ")", MaxNesting+1), "nest more than"},
		{"a million parentheses", nest("(", "a = 3", ")", 1_000_000), "bytes, at most"},
		{"NOT", nest("NOT ", "(a = 3)", "", MaxNesting), "nest more than"},
		{"signs", "a > " + strings.Repeat("- ", MaxNesting+1) + "1", "nest more than"},
		{"chain", chain(MaxHeight), "levels deep"},
		{"equality chain", strings.Repeat("a = ", MaxHeight) + "3", "levels deep"},
	}
	for _, tt := range refused {
		_, err := Compile(tt.expr)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("%s: Compile = %v, want a *SyntaxError with %q", tt.name, err, tt.msg)
		}
	}
	abc := props(map[string]string{"a": "3"})
	for name, expr := range map[string]string{
		"parentheses": nest("(", "a = 3", ")", MaxNesting-1), // NB: the NOT of the next one is a level too
		"NOT":         nest("NOT ", "(a <> 3)", "", MaxNesting-1),
		"chain":       chain(MaxHeight - 1),
	} {
		e, err := Compile(expr)
		if err != nil {
			t.Errorf("%s: Compile: %v", name, err)
			continue
		}
		if want := !strings.HasPrefix(expr, "NOT") || (MaxNesting-1)%2 == 1; e.Match(abc) != want {
			t.Errorf("%s: Match = %v, want %v", name, !want, want)
		}
	}
}
