package filter

import (
	"errors"
	"fmt"
)

// ErrSyntax marks every error Compile returns.
var ErrSyntax = errors.New("filter: invalid SQL92 expression")

// SyntaxError says where an expression is wrong: Column is the 1-based
// byte column of the token that failed (len+1 at the end of the
// expression), Token its text.
type SyntaxError struct {
	Column int
	Token  string
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: column %d, at %s: %s", e.Column, e.Token, e.Msg)
}

// Unwrap makes errors.Is(err, ErrSyntax) hold.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }
