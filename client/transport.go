package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// codecMode is what the client knows about a server's header codecs.
type codecMode uint8

const (
	codecUnknown codecMode = iota // nothing answered yet: try msgpack, fall back once
	codecMsgpack                  // answered a msgpack request
	codecJSON                     // rejected msgpack, answered JSON
)

// transport sends requests in Sluice's msgpack header codec and falls back
// to JSON, per address, for servers that reject it (Apache RocketMQ closes
// the connection on an unknown serialize type). It owns a remoting client
// per codec, because a remoting.Client stamps its own serialize type on
// every request, and a second msgpack one, lane 1 (see request.lane).
type transport struct {
	mp, js    *remoting.Client
	mp1       *remoting.Client // lane 1, msgpack only
	forceJSON bool

	mu    sync.Mutex
	modes map[string]codecMode // guarded by mu: by address
}

// request is one request before it is encoded. Body is sent as is (message
// records); otherwise obj, when set, is encoded in the call's codec family.
type request struct {
	code int16
	ext  map[string]string
	hdr  protocol.ExtWriter // instead of ext: written without a map
	body []byte
	obj  any
	// timeout, if set, bounds the call besides ctx, without a timer per
	// call (remoting.Deadline), from at (from now when zero: a
	// sender that read the clock passes its reading).
	timeout time.Duration
	at      time.Time
	// longPoll marks a call the broker may hold (a suspended pull):
	// remoting.LongPoll.
	longPoll bool
	// lane picks one of two connections to a Sluice broker (msgpack); a
	// JSON server gets one connection. Async message sends use their queue
	// id's parity, so a queue's messages share a connection and keep their
	// order, while a producer's async sends to a broker go over two
	// connections: one connection's round trips bound them (measured on
	// 1 KiB async sends, 7 alternated rounds: median 95.5k msgs/s on one
	// connection, 109.5k on two, at the same CPU).
	lane int
}

// deadline is when r's timeout ends.
func (r *request) deadline() time.Time {
	if r.at.IsZero() {
		return time.Now().Add(r.timeout)
	}
	return r.at.Add(r.timeout)
}

func newTransport(cfg *config, onRequest remoting.Handler) *transport {
	opts := remoting.DefaultClientOptions()
	opts.Logger = cfg.logger.With(slog.String("component", "client"))
	opts.OnRequest = onRequest
	cfg.secure(&opts)
	t := &transport{forceJSON: cfg.forceJSON, modes: make(map[string]codecMode)}
	t.mp = remoting.NewClient(opts)
	t.mp1 = remoting.NewClient(opts)
	opts.SerializeType = remoting.SerializeJSON
	t.js = remoting.NewClient(opts)
	return t
}

func (t *transport) close() {
	_ = t.mp.Close()
	_ = t.mp1.Close()
	_ = t.js.Close()
}

// client returns the remoting client of codec st and lane.
func (t *transport) client(st remoting.SerializeType, lane int) *remoting.Client {
	switch {
	case st == remoting.SerializeJSON:
		return t.js
	case lane == 1:
		return t.mp1
	}
	return t.mp
}

func (t *transport) mode(addr string) codecMode {
	if t.forceJSON {
		return codecJSON
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.modes[addr]
}

func (t *transport) setMode(addr string, m codecMode) {
	t.mu.Lock()
	t.modes[addr] = m
	t.mu.Unlock()
}

func (t *transport) command(st remoting.SerializeType, r request) (*remoting.Command, error) {
	body := r.body
	if body == nil && r.obj != nil {
		b, err := remoting.EncodeBody(st, r.obj)
		if err != nil {
			return nil, fmt.Errorf("client: encode %s body: %w", protocol.CodeName(r.code), err)
		}
		body = b
	}
	cmd := remoting.NewRequest(r.code, r.ext, body)
	if r.ext == nil {
		cmd.ExtWriter = r.hdr
	}
	return cmd, nil
}

func (t *transport) once(ctx context.Context, addr string, st remoting.SerializeType, r request) (*remoting.Command, error) {
	cmd, err := t.command(st, r)
	if err != nil {
		return nil, err
	}
	c := t.client(st, r.lane)
	var opts [2]remoting.CallOption // NB: an array: no allocation for the options
	n := 0
	if r.timeout > 0 {
		opts[n], n = remoting.Deadline(r.deadline()), n+1
	}
	if r.longPoll {
		opts[n], n = remoting.LongPoll(), n+1
	}
	resp, err := c.Invoke(ctx, addr, cmd, opts[:n]...)
	if err != nil {
		return nil, wrapTransport(addr, r.code, err)
	}
	return resp, nil
}

// rejectsMsgpack reports whether an outcome may mean the server does not
// speak msgpack headers: it dropped the connection after the request, or
// answered that it does not support the request or its version.
func rejectsMsgpack(resp *remoting.Command, err error) bool {
	if err != nil {
		return errors.Is(err, remoting.ErrConnClosed) || errors.Is(err, remoting.ErrBadHeader) ||
			errors.Is(err, remoting.ErrUnknownSerializeType)
	}
	return resp.Code == protocol.RequestCodeNotSupported || resp.Code == protocol.VersionNotSupported
}

// invoke sends r to addr and waits for the response. It returns the
// response whatever its code; errors are transport failures (wrapping
// remoting's sentinels, or ErrClosed after close).
func (t *transport) invoke(ctx context.Context, addr string, r request) (*remoting.Command, error) {
	mode := t.mode(addr)
	if mode == codecJSON {
		return t.once(ctx, addr, remoting.SerializeJSON, r)
	}
	resp, err := t.once(ctx, addr, remoting.SerializeMsgpack, r)
	if mode == codecMsgpack {
		return resp, err
	}
	if !rejectsMsgpack(resp, err) {
		if err == nil {
			t.setMode(addr, codecMsgpack)
		}
		return resp, err
	}
	// NB: retried once in JSON. A server that answered anything in
	// msgpack speaks it; only a JSON success proves it wants JSON.
	jresp, jerr := t.once(ctx, addr, remoting.SerializeJSON, r)
	switch {
	case jerr == nil && !rejectsMsgpack(jresp, nil):
		t.setMode(addr, codecJSON)
		return jresp, nil
	case err == nil:
		t.setMode(addr, codecMsgpack)
		return resp, nil
	}
	return resp, err
}

// call is invoke plus the response code check: codes other than ok become
// a *BrokerError. With no ok codes given, only SUCCESS is ok.
func (t *transport) call(ctx context.Context, addr string, r request, ok ...int16) (*remoting.Command, error) {
	resp, err := t.invoke(ctx, addr, r)
	if err != nil {
		return nil, err
	}
	return resp, checkCode(addr, r.code, resp, ok)
}

// checkCode returns a *BrokerError unless resp's code is SUCCESS or one of ok.
func checkCode(addr string, code int16, resp *remoting.Command, ok []int16) error {
	if resp.Code == protocol.Success || slices.Contains(ok, resp.Code) {
		return nil
	}
	return newBrokerError(addr, code, resp.Code, resp.Remark)
}

// settle turns the raw outcome of a call to addr with code into call's,
// with ok as the accepted codes: an error wrapped, or a *BrokerError for
// an answer with another code.
func settle(addr string, code int16, ok []int16, resp *remoting.Command, err error) error {
	if err != nil {
		return wrapTransport(addr, code, err)
	}
	return checkCode(addr, code, resp, ok)
}

// tryInline sends r to addr and has cb called with the raw outcome (which
// cb passes through settle) on the goroutine that completes the call: cb
// must not block. It returns false, having sent nothing, unless addr's
// codec is known and a connection to it is open. NB: cb goes to the
// connection as it is: a closure wrapping it here was an allocation per
// send.
func (t *transport) tryInline(ctx context.Context, addr string, r request, cb func(*remoting.Command, error)) bool {
	var st remoting.SerializeType
	switch t.mode(addr) {
	case codecMsgpack:
		st = remoting.SerializeMsgpack
	case codecJSON:
		st = remoting.SerializeJSON
	default:
		return false
	}
	c := t.client(st, r.lane)
	cmd, err := t.command(st, r)
	if err != nil {
		return false
	}
	if _, err := c.Invoke(ctx, addr, cmd, remoting.Deadline(r.deadline()), remoting.Inline(cb), remoting.NoDial()); err == nil {
		return true
	}
	if c != t.mp1 {
		return false
	}
	// NB: the sender dials a lane's connection itself, the first time: had
	// its send gone to a worker instead, the queue's next send could
	// overtake it.
	if _, err := c.Conn(ctx, addr); err != nil {
		return false
	}
	_, err = c.Invoke(ctx, addr, cmd, remoting.Deadline(r.deadline()), remoting.Inline(cb), remoting.NoDial())
	return err == nil
}

// oneway sends r to addr without waiting for a reply.
func (t *transport) oneway(ctx context.Context, addr string, r request) error {
	st := remoting.SerializeMsgpack
	if t.mode(addr) == codecJSON {
		st = remoting.SerializeJSON
	}
	cmd, err := t.command(st, r)
	if err != nil {
		return err
	}
	if _, err := t.client(st, r.lane).Invoke(ctx, addr, cmd, remoting.Oneway()); err != nil {
		return wrapTransport(addr, r.code, err)
	}
	return nil
}

// decode reads a response body in the response's codec into v.
func decode(resp *remoting.Command, v any) error {
	if err := remoting.DecodeBody(resp.SerializeType, resp.Body, v); err != nil {
		return fmt.Errorf("client: decode %s response body: %w", protocol.CodeName(resp.Code), err)
	}
	return nil
}

// wrapTransport names the request and address of a transport failure, and
// makes a closed remoting client read as ErrClosed.
func wrapTransport(addr string, code int16, err error) error {
	if errors.Is(err, remoting.ErrClosed) {
		return fmt.Errorf("%w: %s to %s: %w", ErrClosed, protocol.CodeName(code), addr, err)
	}
	return fmt.Errorf("client: %s to %s: %w", protocol.CodeName(code), addr, err)
}

// isConnError reports whether err is a transport failure (as opposed to an
// answer from the server, or the client being closed).
func isConnError(err error) bool {
	var be *BrokerError
	return err != nil && !errors.As(err, &be) && !errors.Is(err, ErrClosed) &&
		!errors.Is(err, context.Canceled)
}
