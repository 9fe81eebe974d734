package keyindex

import "errors"

var (
	// ErrClosed is returned by every operation on a closed Index.
	ErrClosed = errors.New("keyindex: closed")

	// ErrInvalidPos is returned by Put for a negative commitlog position.
	ErrInvalidPos = errors.New("keyindex: invalid position")
)
