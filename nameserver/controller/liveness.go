package controller

import (
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/remoting"
)

// memberKey names a broker: its group and controller id.
type memberKey struct {
	name string
	id   int64
}

// beat is the last heartbeat a broker sent this node.
type beat struct {
	at        time.Time
	gone      bool // its connection closed after the beat
	timeout   time.Duration
	epoch     int32
	maxOffset int64
	priority  int32
	lease     time.Duration          // the broker's lease as master (Sluice); 0: none (a Java broker)
	resigned  bool                   // it gave up being master in epoch (Resign): replace it at once
	conn      *remoting.Conn         // where it heartbeats: role changes are pushed there
	st        remoting.SerializeType // the codec it speaks on conn
}

// liveness is this node's view of which brokers are alive. It is local:
// every controller receives every broker's heartbeats, and only the
// leader acts on them.
type liveness struct {
	mu    sync.Mutex
	beats map[memberKey]beat // guarded by mu
}

func newLiveness() *liveness { return &liveness{beats: map[memberKey]beat{}} }

// record keeps b as k's last beat. A broker that resigned stays resigned
// while it heartbeats in the same epoch (its client may send one more
// heartbeat before it closes); a registration (epoch 0) or a heartbeat of
// another epoch is a new life.
func (l *liveness) record(k memberKey, b beat) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.beats[k]; ok && old.resigned && b.epoch == old.epoch && b.epoch != 0 {
		b.resigned = true
	}
	l.beats[k] = b
}

// get returns k's last beat.
func (l *liveness) get(k memberKey) (beat, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.beats[k]
	return b, ok
}

// connClosed marks the brokers that heartbeat over c gone: a broker whose
// connection dropped is dead now, not after the timeout (Java's
// BrokerHousekeepingService). It reports whether any was.
func (l *liveness) connClosed(c *remoting.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	any := false
	for k, b := range l.beats {
		if b.conn == c {
			b.gone, b.conn = true, nil
			l.beats[k] = b
			any = true
		}
	}
	return any
}

// alive reports whether k is alive at now. def is the timeout of brokers
// that did not send theirs; since is when this node started: no broker is
// declared dead for silence that began before the node could hear it.
func (l *liveness) alive(k memberKey, now, since time.Time, def time.Duration) bool {
	b, ok := l.get(k)
	if ok && (b.gone || b.resigned) {
		return false
	}
	timeout := def
	if ok && b.timeout > 0 {
		timeout = b.timeout
	}
	last := since
	if ok && b.at.After(last) {
		last = b.at
	}
	return now.Sub(last) < timeout
}

// leaseHeld reports whether k, if it is master, may still be acknowledging
// sends at now although it is not alive (its connection closed, or it fell
// silent): it did not resign and its lease, plus margin, has not run out
// since the last heartbeat this node heard or since since (when this node
// began to lead: a heartbeat the previous leader answered, renewing the
// lease, may not have reached this node). A broker this node never heard
// holds it for def after since; one that announced no lease (a Java
// broker) holds none.
//
// NB: a lease is stamped by the broker when it sent a heartbeat, before
// any controller received it, and both sides measure it on their monotonic
// clocks: the margin covers the clocks' rates and the broker's last answer
// decided just before its lease ran out.
func (l *liveness) leaseHeld(k memberKey, now, since time.Time, def, margin time.Duration) bool {
	b, ok := l.get(k)
	switch {
	case !ok:
		return now.Sub(since) < def
	case b.resigned || b.lease <= 0:
		return false
	}
	last := since
	if b.at.After(last) {
		last = b.at
	}
	return now.Sub(last) < b.lease+margin
}
