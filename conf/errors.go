package conf

import "errors"

var (
	// ErrInvalid is matched by every FieldError returned by Validate.
	ErrInvalid = errors.New("conf: invalid value")
	// ErrUnknownKey means a config file holds a key no field has.
	ErrUnknownKey = errors.New("conf: unknown key")
	// ErrBadEnv means a SLUICE_ environment variable does not parse as its
	// key's type.
	ErrBadEnv = errors.New("conf: invalid environment variable")
)

// FieldError is one failed check of Validate. Its text names the key path,
// the value and the bound, e.g. "conf: store.segment_size = 1000: must be
// >= 65536".
type FieldError struct {
	Key     string // config key path, e.g. "store.segment_size"
	Value   string // the offending value as written in a config file
	Problem string // the violated bound
}

func (e *FieldError) Error() string {
	return "conf: " + e.Key + " = " + e.Value + ": " + e.Problem
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }
