package nameserver

import "errors"

// Errors of the Server lifecycle. Request failures are not Go errors: they
// are answered with RocketMQ response codes and a remark (see doc.go).
var (
	// ErrStarted is returned by Start on a server already started.
	ErrStarted = errors.New("nameserver: already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("nameserver: closed")
)
