package acl

import (
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// guardLogEvery is how often one key and reason is logged.
const guardLogEvery = time.Minute

// maxGuardKeys bounds the (key, reason) pairs counted and rate-limited
// apart; a key that is not an account is counted as "" (a peer inventing
// keys cannot grow the tables).
const maxGuardKeys = 4096

// Guard checks requests against a Watcher's current rules, counts the
// refusals by key and reason, and logs each key and reason at most once
// a minute (with the count of the refusals it did not log).
type Guard struct {
	rules func() *Rules
	log   *slog.Logger
	now   func() time.Time

	mu    sync.Mutex
	stats map[RefusalKey]*refusalCount // guarded by mu
}

// RefusalKey is the label pair of a refusal count.
type RefusalKey struct {
	Key    string // the account's access key; "" for none or an unknown one
	Reason string
}

type refusalCount struct {
	total      uint64
	lastLog    time.Time
	suppressed uint64 // refusals since lastLog not logged
}

// NewGuard returns a Guard over rules (Watcher.Rules).
func NewGuard(rules func() *Rules, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.Default()
	}
	return &Guard{rules: rules, log: log, now: time.Now, stats: make(map[RefusalKey]*refusalCount)}
}

// Check decides req with the current rules and records a refusal.
func (g *Guard) Check(req Request) *Refusal {
	rules := g.rules()
	ref := rules.Check(req)
	if ref == nil {
		return nil
	}
	k := RefusalKey{Reason: ref.Reason}
	if rules.accounts[ref.Key] != nil {
		k.Key = ref.Key
	}
	now := g.now()
	g.mu.Lock()
	c := g.stats[k]
	if c == nil && len(g.stats) >= maxGuardKeys {
		k.Key = ""
		c = g.stats[k]
	}
	if c == nil {
		c = &refusalCount{}
		g.stats[k] = c
	}
	c.total++
	logIt := c.lastLog.IsZero() || now.Sub(c.lastLog) >= guardLogEvery
	var held uint64
	if logIt {
		held, c.suppressed, c.lastLog = c.suppressed, 0, now
	} else {
		c.suppressed++
	}
	g.mu.Unlock()
	if logIt {
		g.log.Warn("acl: request refused", "remote", req.Remote, "code", req.Code,
			"request", protocol.CodeName(req.Code), "reason", ref.Reason, "remark", ref.Remark,
			"refused_unlogged_before", held, "next_within", guardLogEvery)
	}
	return ref
}

// Refusals returns the refusal counts by key and reason.
func (g *Guard) Refusals() map[RefusalKey]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[RefusalKey]uint64, len(g.stats))
	for k, c := range g.stats {
		out[k] = c.total
	}
	return out
}

// MaxBodyValues bounds the values (array elements, map entries) of a body
// the guard decodes: a heartbeat's, for the groups and topics it needs.
// The guard runs on the connection's reader, before the handler, so an
// unbounded decode there undid the handler's bound (a signed 1 MiB
// heartbeat of empty entries took 320 MiB). The broker's handlers decode
// with this same bound: a body refused here needs nothing here, and only
// because the handler refuses it too.
const MaxBodyValues = 1 << 16

// Authorize is the remoting server hook (ServerOptions.Authorize): it
// checks every request before it is dispatched and answers a refusal
// NO_PERMISSION (16) with the refusal's remark.
func (g *Guard) Authorize(c *remoting.Conn, req *remoting.Command) (code int16, remark string, ok bool) {
	st := req.SerializeType
	ref := g.Check(Request{
		Code:       req.Code,
		Remote:     c.RemoteAddrPort().Addr(),
		Ext:        req.ExtMap(),
		Body:       req.Body,
		DecodeBody: func(v any) error { return remoting.DecodeBodyMax(st, req.Body, v, MaxBodyValues) },
	})
	if ref == nil {
		return 0, "", true
	}
	return protocol.NoPermission, ref.Remark, false
}
