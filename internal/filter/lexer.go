package filter

import (
	"fmt"
	"strings"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tInt
	tFloat
	tLParen
	tRParen
	tComma
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	tPlus
	tMinus
	// keywords
	tAnd
	tOr
	tNot
	tBetween
	tIn
	tIs
	tNull
	tTrue
	tFalse
	tContains
	tStartsWith
	tEndsWith
)

var keywords = map[string]tokKind{
	"AND": tAnd, "OR": tOr, "NOT": tNot, "BETWEEN": tBetween, "IN": tIn, "IS": tIs,
	"NULL": tNull, "TRUE": tTrue, "FALSE": tFalse,
	"CONTAINS": tContains, "STARTSWITH": tStartsWith, "ENDSWITH": tEndsWith,
}

type token struct {
	kind tokKind
	pos  int    // byte offset in the source
	text string // as written
	str  string // a string literal's value, quotes undone
}

// describe names a token for an error message.
func (t token) describe() string {
	if t.kind == tEOF {
		return "end of expression"
	}
	return fmt.Sprintf("%q", t.text)
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits src into tokens, ending with tEOF.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; ; {
		for i < len(src) && strings.IndexByte(" \t\r\n\f", src[i]) >= 0 {
			i++
		}
		if i == len(src) {
			return append(toks, token{kind: tEOF, pos: i}), nil
		}
		start, c := i, src[i]
		var k tokKind
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			k = tIdent
			if kw, ok := keywords[strings.ToUpper(src[start:i])]; ok {
				k = kw
			}
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			var err error
			if k, i, err = lexNumber(src, i); err != nil {
				return nil, err
			}
		case c == '\'':
			var b strings.Builder
			for i++; ; i++ {
				if i == len(src) {
					return nil, &SyntaxError{Column: start + 1, Token: src[start:], Msg: "unterminated string literal"}
				}
				if src[i] == '\'' {
					if i+1 < len(src) && src[i+1] == '\'' {
						b.WriteByte('\'')
						i++
						continue
					}
					i++
					break
				}
				b.WriteByte(src[i])
			}
			toks = append(toks, token{kind: tString, pos: start, text: src[start:i], str: b.String()})
			continue
		default:
			i++
			switch c {
			case '(':
				k = tLParen
			case ')':
				k = tRParen
			case ',':
				k = tComma
			case '=':
				k = tEq
			case '+':
				k = tPlus
			case '-':
				k = tMinus
			case '<', '>':
				k = tLt
				if c == '>' {
					k = tGt
				}
				if i < len(src) && src[i] == '=' {
					k, i = k+1, i+1 // tLe, tGe
				} else if c == '<' && i < len(src) && src[i] == '>' {
					k, i = tNe, i+1
				}
			default:
				return nil, &SyntaxError{Column: start + 1, Token: fmt.Sprintf("%q", src[start:i]), Msg: "unexpected character"}
			}
		}
		toks = append(toks, token{kind: k, pos: start, text: src[start:i]})
	}
}

// lexNumber scans an integer (digits, optional L) or a decimal (digits with
// a fraction and/or an exponent) starting at i.
func lexNumber(src string, i int) (tokKind, int, error) {
	start := i
	digits := func() int {
		n := 0
		for i < len(src) && isDigit(src[i]) {
			i, n = i+1, n+1
		}
		return n
	}
	digits()
	k := tInt
	if i < len(src) && src[i] == '.' {
		i++
		digits()
		k = tFloat
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, 0, &SyntaxError{Column: start + 1, Token: fmt.Sprintf("%q", src[start:i]), Msg: "exponent without digits"}
		}
		k = tFloat
	}
	if k == tInt && i < len(src) && (src[i] == 'L' || src[i] == 'l') {
		i++
	}
	if i < len(src) && (isIdentPart(src[i]) || src[i] == '.') {
		for i < len(src) && (isIdentPart(src[i]) || src[i] == '.') {
			i++
		}
		return 0, 0, &SyntaxError{Column: start + 1, Token: fmt.Sprintf("%q", src[start:i]), Msg: "malformed number"}
	}
	return k, i, nil
}
