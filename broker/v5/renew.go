package v5

import (
	"context"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// Renewer is what auto_renew (a PushConsumer's receive) needs of a
// Popper.
type Renewer interface {
	// Extend makes a handle's message invisible for d from now and keeps
	// the handle valid (the client acks the handle it was given).
	Extend(group, topic, handle string, d time.Duration) *v2.Status
	// PopNow is the clock invisible times are measured on.
	PopNow() time.Time
}

// DeadLetterer serves ForwardMessageToDeadLetterQueue.
type DeadLetterer interface {
	// DeadLetter stores a handle's message in the group's dead-letter
	// topic and acks it.
	DeadLetter(ctx context.Context, group, topic, handle string) *v2.Status
}

// Bounds of auto_renew and attempt ids.
const (
	// autoRenewInvisible is what an auto_renew receive pops with when it
	// names no invisible time (the SDKs send none; RocketMQ's proxy: 60 s).
	autoRenewInvisible = 60 * time.Second
	renewTick          = time.Second
	// clientLiveness: a client whose heartbeats (or settings) stopped
	// this long ago no longer holds its messages (the SDKs beat every 10 s).
	clientLiveness = 30 * time.Second
	// releaseAfter is the invisible time left to the messages of a client
	// that went away: an ack already on its way still lands.
	releaseAfter = time.Second
	maxRenewals  = 1 << 20
	// attemptWindow is how long a receive's answer is kept for a retry
	// with the same attempt id.
	attemptWindow = time.Minute
	maxAttemptIDs = 1 << 16
	// maxAttemptBytes bounds the bodies kept for attempt ids: a PushConsumer
	// names one on every receive, so without it the answers of a minute of
	// traffic would stay in memory (a retry of an answer that went early
	// gets a new batch: at least once).
	maxAttemptBytes = 64 << 20
)

// renewal is one message an auto_renew receive delivered.
type renewal struct {
	client, group, topic, handle string
	inv                          time.Duration
	due                          time.Time // POP clock: renew from then on
	until                        time.Time // POP clock: not renewed past it (maxInvisible after the receive)
}

// attemptKey names a receive for its retries.
type attemptKey struct{ client, group, topic, id string }

// attemptSlot is one answer kept, in the order kept: a slot whose key was
// kept again since is stale (its answer is no longer the key's).
type attemptSlot struct {
	k attemptKey
	a *attemptResult
}

// attemptResult is a receive's answer, kept for its retries.
type attemptResult struct {
	at     time.Time // server clock
	popped time.Time // POP clock
	inv    time.Duration
	renew  bool
	msgs   []*v2.Message
	size   int // the bodies' bytes
}

// renewals holds the auto-renewed deliveries and the answers kept for
// attempt ids. Its lock is a leaf: the backend is called without it.
type renewals struct {
	mu       sync.Mutex
	m        map[string]*renewal // by group + "\x00" + handle; guarded by mu
	attempts map[attemptKey]*attemptResult
	// attemptOrder is attempts' answers in the order they came (a key
	// kept again has a new slot at the end). Guarded by mu.
	attemptOrder []attemptSlot
	attemptBytes int    // the kept answers' sizes; guarded by mu
	renewed      uint64 // renewals made; guarded by mu
	// releasing counts deliveries taken out of m to be released whose
	// release (an Extend to releaseAfter) is not applied yet: Renewals
	// counts them as held until it is. Guarded by mu.
	// NB: a CI run's test saw 0 held, moved its clock on, and found the
	// message still invisible: the release came after, from the new time.
	releasing int
	running   bool // the renewal loop was started; guarded by mu
	stopped   bool // Close: no loop starts; guarded by mu
	wg        sync.WaitGroup
}

func renewalKey(group, handle string) string { return group + "\x00" + handle }

// add starts renewing msgs' handles for client.
func (r *renewals) add(client, group, topic string, msgs []*v2.Message, inv time.Duration, popped time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*renewal{}
	}
	for _, m := range msgs {
		h := m.GetSystemProperties().GetReceiptHandle()
		if len(r.m) >= maxRenewals {
			return // NB: not renewed: delivered again after its invisible time
		}
		r.m[renewalKey(group, h)] = &renewal{client: client, group: group, topic: topic, handle: h, inv: inv,
			due: popped.Add(inv * 2 / 3), until: popped.Add(maxInvisible)}
	}
}

// forget stops renewing a handle (acked, changed, dead-lettered) and
// reports whether it was renewed.
func (r *renewals) forget(group, handle string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := renewalKey(group, handle)
	_, ok := r.m[k]
	delete(r.m, k)
	return ok
}

// holds reports whether a handle is renewed.
func (r *renewals) holds(group, handle string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[renewalKey(group, handle)]
	return ok
}

// takeClient removes and returns client's renewals.
func (r *renewals) takeClient(client string) []*renewal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*renewal
	for k, e := range r.m {
		if e.client == client {
			out = append(out, e)
			delete(r.m, k)
		}
	}
	r.releasing += len(out)
	return out
}

// released records that n deliveries taken to be released (takeClient,
// drop) have their release applied.
func (r *renewals) released(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releasing -= n
}

// due returns the renewals due at now; they stay listed (an ack or a
// change meanwhile forgets them).
func (r *renewals) due(now time.Time) []*renewal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*renewal
	for _, e := range r.m {
		if !e.due.After(now) {
			out = append(out, e)
		}
	}
	return out
}

// renewed records e's renewal: next due at due.
func (r *renewals) renewedAt(e *renewal, due time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewed++
	e.due = due
}

// drop forgets e unless a newer delivery took its handle's place, and
// reports whether it did. With release, e is about to be released and
// counts as held until it is (released).
func (r *renewals) drop(e *renewal, release bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := renewalKey(e.group, e.handle)
	if r.m[k] != e {
		return false
	}
	delete(r.m, k)
	if release {
		r.releasing++
	}
	return true
}

// Renewals reports the deliveries auto_renew holds (those being released
// count until their release is applied) and the renewals made so far.
func (s *Server) Renewals() (held int, renewed uint64) {
	s.renew.mu.Lock()
	defer s.renew.mu.Unlock()
	return len(s.renew.m) + s.renew.releasing, s.renew.renewed
}

// startRenewing starts the renewal loop once; it ends at Close.
func (s *Server) startRenewing(rn Renewer) {
	s.renew.mu.Lock()
	defer s.renew.mu.Unlock()
	if s.renew.running || s.renew.stopped {
		return
	}
	s.renew.running = true
	s.renew.wg.Add(1)
	go func() {
		defer s.renew.wg.Done()
		t := time.NewTicker(renewTick)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.renewDue(rn)
			}
		}
	}()
}

// stopRenewing waits for the renewal loop to end (s.quit closed).
func (s *Server) stopRenewing() {
	s.renew.mu.Lock()
	s.renew.stopped = true
	s.renew.mu.Unlock()
	s.renew.wg.Wait()
}

// renewDue extends the invisible time of the renewals due (at 2/3 of
// it) whose client is live; a gone client's are released, a handle no
// longer current (acked, changed, delivered again) is dropped.
func (s *Server) renewDue(rn Renewer) {
	now := rn.PopNow()
	freed := 0
	for _, e := range s.renew.due(now) {
		if !s.clients.live(e.client, s.opts.Now()) || now.After(e.until) {
			if s.renew.drop(e, true) {
				rn.Extend(e.group, e.topic, e.handle, releaseAfter)
				freed++
			}
			continue
		}
		if st := rn.Extend(e.group, e.topic, e.handle, e.inv); st != nil && st.GetCode() != v2.Code_OK {
			s.renew.drop(e, false)
			continue
		}
		s.renew.renewedAt(e, now.Add(e.inv*2/3))
	}
	s.renew.released(freed)
}

// releaseClient stops renewing a client's deliveries (its last Telemetry
// stream ended, or it terminated): they are delivered again soon.
func (s *Server) releaseClient(client string) {
	rn, ok := s.backend.(Renewer)
	if !ok {
		return
	}
	taken := s.renew.takeClient(client)
	for _, e := range taken {
		rn.Extend(e.group, e.topic, e.handle, releaseAfter)
	}
	s.renew.released(len(taken))
}

// replay returns the answer kept for a receive's attempt id, if any.
func (r *renewals) replay(k attemptKey, now time.Time) *attemptResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attempts[k]
	if a == nil || now.Sub(a.at) > attemptWindow {
		return nil
	}
	return a
}

// keep records a receive's answer for its attempt id. Answers expire
// oldest first (they are kept in the order they came); past
// maxAttemptIDs answers or maxAttemptBytes of bodies the oldest goes
// early (a retry of it gets a new batch: at least once).
func (r *renewals) keep(k attemptKey, a *attemptResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.attempts == nil {
		r.attempts = map[attemptKey]*attemptResult{}
	}
	a.size = 0
	for _, m := range a.msgs {
		a.size += len(m.GetBody())
	}
	if o, ok := r.attempts[k]; ok {
		r.attemptBytes -= o.size // NB: its slot in attemptOrder is stale now
	}
	r.attempts[k] = a
	r.attemptBytes += a.size
	r.attemptOrder = append(r.attemptOrder, attemptSlot{k, a})
	for len(r.attemptOrder) > 1 {
		old := r.attemptOrder[0]
		o := r.attempts[old.k]
		if o == old.a {
			full := len(r.attempts) > maxAttemptIDs || r.attemptBytes > maxAttemptBytes
			if !full && a.at.Sub(o.at) <= attemptWindow {
				break // NB: the oldest is current, so are the others
			}
			r.attemptBytes -= o.size
			delete(r.attempts, old.k)
		}
		r.attemptOrder = r.attemptOrder[1:]
	}
}

// streamEnded forgets a Telemetry stream; when it was its client's last,
// the client's auto-renewed deliveries are released.
func (s *Server) streamEnded(ts *telemetryStream) {
	s.clients.closeStream(ts)
	select {
	case <-s.quit:
		// NB: the server is closing, not the client leaving: the messages
		// keep the invisible time they have (the POP state is saved), so
		// the client's acks after a restart still land.
		return
	default:
	}
	if !s.clients.streaming(ts.client) {
		s.releaseClient(ts.client)
	}
}
