package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/protocol"
)

// httpError is a failure with its HTTP status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// statusOf maps err to an HTTP status: the console's own, 404 for names a
// server does not know, 400 for what the client package refused before
// sending, 502 for a server's failure or a transport's.
func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.status
	}
	var be *client.BrokerError
	if errors.As(err, &be) {
		switch int16(be.Code) {
		case protocol.TopicNotExist, protocol.SubscriptionGroupNotExist, protocol.ConsumerNotOnline, protocol.QueryNotFound:
			return http.StatusNotFound
		case protocol.NoPermission:
			return http.StatusForbidden
		}
		return http.StatusBadGateway
	}
	if errors.Is(err, client.ErrInvalidOption) || errors.Is(err, client.ErrInvalidMessage) {
		return http.StatusBadRequest
	}
	if errors.Is(err, client.ErrNoRoute) || errors.Is(err, client.ErrMessageNotFound) {
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

// api turns h into a handler: its value as JSON, or {"error": ...} with
// the status of its error. The time h took goes in Server-Timing.
func (s *Server) api(h func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		v, err := h(r)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Server-Timing", fmt.Sprintf("api;dur=%.1f", float64(time.Since(began).Microseconds())/1000))
		status := http.StatusOK
		if err != nil {
			status = statusOf(err)
			v = map[string]string{"error": err.Error()}
			// NB: Debug only: anyone who reaches the console can cause
			// these, and the asker gets the error in the answer.
			s.opts.Logger.Debug("console: request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		}
		w.WriteHeader(status)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(true)
		_ = enc.Encode(v)
	})
}

// maxBody bounds a request body.
const maxBody = 1 << 20

// bodyFirst reads a request's body (up to maxBody and a byte) before next
// runs, within BodyTimeout: net/http bounds the headers' reading
// (ReadHeaderTimeout) but not the body's, and a server-wide ReadTimeout
// would also cancel a long handler's context. A body over maxBody is left
// to the handler to refuse.
func (s *Server) bodyFirst(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			// NB: the deadline stays, past: before it answers, net/http
			// reads what is left of the body, which would wait for ever.
			w.Header().Set("Connection", "close")
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				refuse(w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v", s.opts.BodyTimeout))
				return
			}
			refuse(w, http.StatusBadRequest, fmt.Sprintf("reading the request body: %v", err))
			return
		}
		if len(b) <= maxBody {
			_ = rc.SetReadDeadline(time.Time{})
		} else {
			w.Header().Set("Connection", "close") // NB: its rest is read within the deadline too
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	})
}

// decodeJSON reads r's body into v. Unknown fields are ignored.
func decodeJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("reading the request body: %v", err)
	}
	if len(b) > maxBody {
		return badRequest("request body over %d bytes", maxBody)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badRequest("request body is not the JSON object expected: %v", err)
	}
	return nil
}

// parseTime reads a time given as RFC 3339 ("2026-12-01T17:00:00Z"), as
// the browser's datetime-local ("2026-12-01T17:00", local time), or as
// unix milliseconds. Empty is the zero time.
func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 {
			return time.Time{}, badRequest("%s %d is negative", name, ms)
		}
		return time.UnixMilli(ms), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badRequest("%s %q is not a time: give RFC 3339 (2026-12-01T17:00:00Z) or unix milliseconds", name, v)
}

// intParam reads an integer query parameter within [lo, hi]; def when
// absent.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s %q is not a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// configView is GET /api/config.
type configView struct {
	ReadOnly      bool     `json:"readOnly"`
	SampleEveryMs int64    `json:"sampleEveryMs"`
	HistoryMs     int64    `json:"historyMs"`
	NameServers   []string `json:"nameServers"`
}

func (s *Server) getConfig(*http.Request) (any, error) {
	return configView{ReadOnly: s.opts.ReadOnly, SampleEveryMs: s.opts.SampleEvery.Milliseconds(),
		HistoryMs: s.opts.History.Milliseconds(), NameServers: s.opts.NameServers}, nil
}
