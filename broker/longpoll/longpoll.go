// Package longpoll parks pull requests that found no new message and answers
// them when a message arrives in their queue or their suspend time runs out
// (RocketMQ's PullRequestHoldService).
//
// Park never blocks. Wake-ups run each parked request's Wake function on a
// goroutine of its own (a workpool one), never under the hold's lock and
// never on the dispatcher's goroutine, so a slow connection cannot stall
// arrivals.
package longpoll

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/workpool"
)

// Request is one parked pull.
type Request struct {
	Topic   string
	QueueID int32
	// Offset is the queue offset the pull asked for: any arrival that
	// makes the queue's next offset exceed it wakes the request.
	Offset   int64
	Deadline time.Time
	// Match, if set, tells whether an arrived message (its tags code and
	// properties string) is one the pull wants: arrivals it refuses leave
	// the request parked. nil takes every message. It must not block.
	Match func(tagsCode int64, props []byte) bool
	// Wake answers the pull; expired is true when its time ran out (or the
	// hold closed). It is called exactly once.
	Wake func(expired bool)

	woken atomic.Bool
	index int // in the deadline heap; -1 when not in it
}

type queueKey struct {
	topic string
	id    int32
}

// Hold keeps the parked requests.
type Hold struct {
	mu sync.Mutex
	// guarded by mu:
	parked map[queueKey][]*Request
	byTime deadlines
	closed bool

	count atomic.Int64   // parked requests, for metrics
	wakes sync.WaitGroup // Wake calls running
	kick  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

// New starts a hold and its expiry loop.
func New() *Hold {
	h := &Hold{parked: map[queueKey][]*Request{}, kick: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	go h.expireLoop()
	return h
}

// Park holds r until an arrival in its queue passes r.Offset or its deadline.
// current returns the queue's next offset: Park checks it after parking so
// that an arrival between the caller's read and the park is not lost. If the
// hold is closed, r is woken at once as expired.
func (h *Hold) Park(r *Request, current func() int64) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		// NB: answered here, not on a tracked goroutine: Close may be
		// waiting for its wakes already.
		if r.woken.CompareAndSwap(false, true) {
			r.Wake(true)
		}
		return
	}
	k := queueKey{r.Topic, r.QueueID}
	h.parked[k] = append(h.parked[k], r)
	heap.Push(&h.byTime, r)
	first := h.byTime[0] == r
	h.mu.Unlock()
	h.count.Add(1)
	if first {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	if current != nil && current() > r.Offset {
		// NB: what arrived is unknown here: wake whatever the filter.
		h.notify(r.Topic, r.QueueID, current(), nil)
	}
}

// Notify wakes the requests of a queue whose offset is below next, the
// queue's new next offset, and whose Match takes the message that arrived
// (tagsCode and props, which Notify does not retain). It does not block.
func (h *Hold) Notify(topic string, queueID int32, next int64, tagsCode int64, props []byte) {
	h.notify(topic, queueID, next, func(r *Request) bool { return r.Match == nil || r.Match(tagsCode, props) })
}

// notify wakes the requests of a queue whose offset is below next and that
// match accepts (nil: all of them).
func (h *Hold) notify(topic string, queueID int32, next int64, match func(*Request) bool) {
	k := queueKey{topic, queueID}
	h.mu.Lock()
	list := h.parked[k]
	if len(list) == 0 {
		h.mu.Unlock()
		return
	}
	var woken []*Request
	kept := list[:0]
	for _, r := range list {
		if r.Offset < next && (match == nil || match(r)) {
			woken = append(woken, r)
			if r.index >= 0 {
				heap.Remove(&h.byTime, r.index)
			}
		} else {
			kept = append(kept, r)
		}
	}
	clear(list[len(kept):])
	if len(kept) == 0 {
		delete(h.parked, k)
	} else {
		h.parked[k] = kept
	}
	h.wakes.Add(len(woken)) // NB: under mu, so before any Close's Wait
	h.mu.Unlock()
	for _, r := range woken {
		h.wake(r, false)
	}
}

// wake runs r.Wake once, on a goroutine of its own. REQUIRES: the caller
// added 1 to h.wakes for it while holding mu (so that Close, which waits
// for the wakes, never races an Add).
func (h *Hold) wake(r *Request, expired bool) {
	if !r.woken.CompareAndSwap(false, true) {
		h.wakes.Done()
		return
	}
	h.count.Add(-1)
	workpool.Go(func() {
		defer h.wakes.Done()
		r.Wake(expired)
	})
}

// Parked returns how many requests are parked.
func (h *Hold) Parked() int64 { return max(h.count.Load(), 0) }

// expireLoop wakes requests whose deadline passed, sleeping until the
// earliest deadline.
func (h *Hold) expireLoop() {
	defer close(h.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		h.mu.Lock()
		var expired []*Request
		for len(h.byTime) > 0 && !h.byTime[0].Deadline.After(now) {
			r := heap.Pop(&h.byTime).(*Request)
			h.removeLocked(r)
			expired = append(expired, r)
		}
		wait := time.Hour
		if len(h.byTime) > 0 {
			wait = h.byTime[0].Deadline.Sub(now)
		}
		h.wakes.Add(len(expired))
		h.mu.Unlock()
		for _, r := range expired {
			h.wake(r, true)
		}
		timer.Reset(wait)
		select {
		case <-h.quit:
			return
		case <-h.kick:
		case <-timer.C:
		}
	}
}

// removeLocked drops r from its queue's list. REQUIRES: mu held.
func (h *Hold) removeLocked(r *Request) {
	k := queueKey{r.Topic, r.QueueID}
	list := h.parked[k]
	for i, x := range list {
		if x == r {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.parked, k)
	} else {
		h.parked[k] = list
	}
}

// Close stops the expiry loop, wakes every parked request as expired and
// waits until their Wake calls returned, so each pull has its answer before
// the connections close. Later Parks are woken at once.
func (h *Hold) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	var all []*Request
	for _, list := range h.parked {
		all = append(all, list...)
	}
	h.parked = map[queueKey][]*Request{}
	h.byTime = nil
	h.wakes.Add(len(all))
	h.mu.Unlock()
	close(h.quit)
	<-h.done
	for _, r := range all {
		h.wake(r, true)
	}
	h.wakes.Wait()
}

// deadlines is a min-heap of requests by deadline.
type deadlines []*Request

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].Deadline.Before(d[j].Deadline) }
func (d deadlines) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].index, d[j].index = i, j
}
func (d *deadlines) Push(x any) {
	r := x.(*Request)
	r.index = len(*d)
	*d = append(*d, r)
}
func (d *deadlines) Pop() any {
	old := *d
	r := old[len(old)-1]
	old[len(old)-1] = nil
	r.index = -1
	*d = old[:len(old)-1]
	return r
}
