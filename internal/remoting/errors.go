package remoting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Callers test them with errors.Is; returned errors wrap
// them with the address, the request code or the offending value.
var (
	// ErrFrameTooLarge is returned for a frame whose length is above the
	// configured MaxFrameSize, or a header above 16 MiB - 1 bytes (the
	// 24-bit header length). Reading one closes the connection; writing one
	// fails before anything is sent.
	ErrFrameTooLarge = errors.New("remoting: frame too large")

	// ErrBadFrame marks a frame whose length or header length is
	// impossible (length < 4, header past the end of the frame, empty
	// header). Reading one closes the connection.
	ErrBadFrame = errors.New("remoting: malformed frame")

	// ErrUnknownSerializeType marks a frame whose serialize type is not
	// 0 (JSON), 1 (ROCKETMQ) or 2 (msgpack).
	ErrUnknownSerializeType = errors.New("remoting: unknown serialize type")

	// ErrBadHeader marks a header its codec cannot decode (or encode).
	ErrBadHeader = errors.New("remoting: malformed header")

	// ErrShortFrame is returned by DecodeFrame when the buffer holds less
	// than one whole frame.
	ErrShortFrame = errors.New("remoting: incomplete frame")

	// ErrClosed is returned by the methods of a Client or Server that was
	// closed by its owner, and fails the calls that were pending on it.
	ErrClosed = errors.New("remoting: closed")

	// ErrConnClosed fails calls pending on a connection that went away
	// (closed by either side, broken, or closed after a bad frame), and
	// writes to such a connection. The wrapping text says why.
	ErrConnClosed = errors.New("remoting: connection closed")

	// ErrTimeout is returned when the caller's context deadline passes
	// before the response arrives. The error also matches
	// context.DeadlineExceeded. A response arriving later is dropped.
	ErrTimeout = errors.New("remoting: timeout")

	// ErrNotConnected is returned by Client.Invoke with NoDial when no
	// open connection to the address exists.
	ErrNotConnected = errors.New("remoting: not connected")

	// ErrAlreadyReplied is returned by ResponseWriter.Write after the
	// first call.
	ErrAlreadyReplied = errors.New("remoting: request already answered")
)

// CodeRangeError is the error DecodeHeader (and DecodeFrame) returns for
// a JSON header that is otherwise well-formed but whose code does not fit
// in 16 bits: the Java broker reads the code as an int, so a peer may send
// {"code":99999,...}. Every other field of the Header is decoded (Code is
// 0) and the frame stream is intact, so a connection answers such a
// request with REQUEST_CODE_NOT_SUPPORTED, as Java does, and reads on. (The
// ROCKETMQ binary header carries the code in 16 bits and cannot hold one.)
type CodeRangeError struct{ Code int32 }

func (e *CodeRangeError) Error() string {
	return "remoting: request code " + strconv.FormatInt(int64(e.Code), 10) + " does not fit in 16 bits"
}

// asCodeRange returns err's *CodeRangeError, if it wraps one. NB: the
// errors.As target escapes to the heap; declared past the nil check, it
// costs an allocation only when there is an error (it was two per frame
// read, one in readFrame and one in onRequest).
func asCodeRange(err error) *CodeRangeError {
	if err == nil {
		return nil
	}
	var wide *CodeRangeError
	if errors.As(err, &wide) {
		return wide
	}
	return nil
}

// ctxError turns a done context into the error an invoke returns: ErrTimeout
// (also matching context.DeadlineExceeded) for an expired deadline, the
// context's own error otherwise.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}
