package remoting

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// Reasons a server closes or refuses a connection because of what its peer
// did (the label values of ServerStats.BadFrames and of the log lines).
const (
	ReasonTooLarge      = "too_large"              // ErrFrameTooLarge
	ReasonMalformed     = "malformed"              // ErrBadFrame
	ReasonSerializeType = "unknown_serialize_type" // ErrUnknownSerializeType
	ReasonBadHeader     = "bad_header"             // ErrBadHeader
	ReasonFrameTimeout  = "frame_timeout"          // a started frame not completed within FrameTimeout
	ReasonTooManyConns  = "too_many_connections"   // over MaxConnsPerAddr
	ReasonIdle          = "idle"                   // no frame for IdleTimeout
	ReasonInputBacklog  = "input_backlog"          // more unread input than MaxInputBacklog
	ReasonBusy          = "busy"                   // a request over MaxInflight (answered SYSTEM_BUSY)
	ReasonOrderedBusy   = "ordered_busy"           // an ordered request over its connection's queue
)

// BadFrameReasons lists the reasons ServerStats.BadFrames counts, in a
// fixed order.
var BadFrameReasons = [...]string{ReasonTooLarge, ReasonMalformed, ReasonSerializeType, ReasonBadHeader}

// Peer log limits: one line per remote IP and reason per peerLogEvery; at
// most peerLogKeys (IP, reason) pairs are tracked, later IPs share one
// entry per reason (logged with remote "other addresses").
const (
	peerLogEvery = time.Minute
	peerLogKeys  = 4096
)

// peerLog rate-limits the log lines a peer can trigger (bad frames, frame
// timeouts, refused and idle connections, SYSTEM_BUSY answers): the first event of a remote IP
// and reason is logged, later ones within peerLogEvery are counted, and the
// count is logged when the window ends (flush, from the server's
// housekeeping loop). 14,000 garbage connections from one address log two
// lines a minute, not 14,000.
type peerLog struct {
	log   *slog.Logger
	every time.Duration

	mu   sync.Mutex
	keys map[peerKey]*peerWindow // guarded by mu
}

type peerKey struct {
	ip     netip.Addr // the zero Addr: the shared entry of untracked IPs
	reason string
}

type peerWindow struct {
	start      time.Time
	suppressed int
}

func newPeerLog(log *slog.Logger, every time.Duration) *peerLog {
	return &peerLog{log: log, every: every, keys: make(map[peerKey]*peerWindow)}
}

// event logs msg with attrs at level if its remote IP and reason had no
// line within the window, and counts it otherwise.
func (p *peerLog) event(now time.Time, level slog.Level, ip netip.Addr, reason, msg string, attrs ...any) {
	k := peerKey{ip, reason}
	p.mu.Lock()
	w := p.keys[k]
	if w == nil && len(p.keys) >= peerLogKeys {
		k.ip = netip.Addr{}
		w = p.keys[k]
	}
	if w != nil {
		w.suppressed++
		p.mu.Unlock()
		return
	}
	p.keys[k] = &peerWindow{start: now}
	p.mu.Unlock()
	attrs = append(attrs, "reason", reason, "next_within", p.every)
	p.log.Log(context.Background(), level, msg, attrs...)
}

// flush ends the windows older than the limit: each that held back lines
// logs their count in one WARN line.
func (p *peerLog) flush(now time.Time) {
	type held struct {
		k peerKey
		n int
	}
	var out []held
	p.mu.Lock()
	for k, w := range p.keys {
		if now.Sub(w.start) < p.every {
			continue
		}
		if w.suppressed > 0 {
			out = append(out, held{k, w.suppressed})
		}
		delete(p.keys, k)
	}
	p.mu.Unlock()
	for _, h := range out {
		remote := "other addresses"
		if h.k.ip.IsValid() {
			remote = h.k.ip.String()
		}
		p.log.Warn("remoting: more connections closed or refused for the same reason (not logged one by one)",
			"remote", remote, "reason", h.k.reason, "count", h.n, "within", p.every)
	}
}
