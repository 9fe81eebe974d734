package remoting

import (
	"bytes"
	"context"
	"sync"
)

// ResponseRecorder is a ResponseWriter for handler tests: it keeps the
// response instead of sending it.
type ResponseRecorder struct {
	mu   sync.Mutex
	resp *Command
	done chan struct{}
}

// NewResponseRecorder returns an empty recorder.
func NewResponseRecorder() *ResponseRecorder {
	return &ResponseRecorder{done: make(chan struct{})}
}

// Write records resp (first call only, as the real writer) with a copy of
// its body: the caller may reuse the body once Write returns.
func (r *ResponseRecorder) Write(resp *Command) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resp != nil {
		return ErrAlreadyReplied
	}
	c := *resp
	resp = &c
	resp.Header = *withExtMap(&resp.Header) // NB: as a decoded answer has it
	resp.Body = bytes.Clone(resp.Body)
	resp.Flag |= FlagResponse
	r.resp = resp
	close(r.done)
	return nil
}

// Conn returns nil.
// WriteSoon is Write.
func (r *ResponseRecorder) WriteSoon(resp *Command) error { return r.Write(resp) }

func (r *ResponseRecorder) Conn() *Conn { return nil }

// Response returns the recorded response, or nil.
func (r *ResponseRecorder) Response() *Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resp
}

// Wait returns the response once written, or ctx's error.
func (r *ResponseRecorder) Wait(ctx context.Context) (*Command, error) {
	select {
	case <-r.done:
		return r.Response(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
