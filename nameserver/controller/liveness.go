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

func (l *liveness) record(k memberKey, b beat) {
	l.mu.Lock()
	defer l.mu.Unlock()
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
	if ok && b.gone {
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
