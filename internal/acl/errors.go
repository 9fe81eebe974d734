package acl

import (
	"errors"
	"fmt"
)

// ErrInvalid marks a rules file that does not compile (a FieldError wraps it).
var ErrInvalid = errors.New("acl: invalid rules")

// FieldError names the field of the rules file a problem is in, as a path
// ("accounts[1].topicPerms[0]") the loader can turn into a line number.
type FieldError struct {
	Path string // where, as YAML keys and indexes
	Line int    // 1-based line in the file, 0 when unknown
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("acl: line %d: %s: %s", e.Line, e.Path, e.Msg)
	}
	return fmt.Sprintf("acl: %s: %s", e.Path, e.Msg)
}

func (e *FieldError) Unwrap() error { return ErrInvalid }
