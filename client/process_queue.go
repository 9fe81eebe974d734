package client

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// processQueue is a push consumer's state for one assigned queue: the
// in-flight window of pulled messages not yet acknowledged, the next pull
// offset, and for orderly consumers the broker lock.
//
// The window is what bounds both memory (flow control) and duplicates: the
// offset a consumer commits is the lowest unacknowledged offset in it (or
// the next pull offset when it is empty), so after a crash or a rebalance
// at most the window is delivered again.
type processQueue struct {
	mq MessageQueue
	// NB: a lifetime context: it cancels the queue's long poll and
	// send-backs at once when the queue is dropped or the consumer closes.
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{}  // orderly: kicked when messages arrive
	space  chan struct{}  // kicked when messages are acknowledged (flow control)
	loops  sync.WaitGroup // the queue's pull (and orderly consume) loop

	// offset is the offset to commit: the lowest unacknowledged offset,
	// or the next pull offset when nothing is in flight. -1 until the
	// start offset is known.
	offset    atomic.Int64
	persisted atomic.Int64 // last offset committed to the store; -1 none

	// flowPaused counts the times the pull loop waited for the window to
	// drop below the pull thresholds.
	flowPaused atomic.Int64

	// Orderly consumers, clustering: the broker lock.
	locked   atomic.Bool
	lockedAt atomic.Int64 // unix ns of the last successful lock
	// Unix ms of the last pull answered and of the last batch handled
	// (GET_CONSUMER_RUNNING_INFO).
	lastPull, lastConsume atomic.Int64
	// consumeMu is held while an orderly batch of this queue is handled,
	// so a dropped queue is unlocked only after its batch finished.
	consumeMu sync.Mutex

	mu      sync.Mutex
	entries []pqEntry     // guarded by mu: ascending offsets; done entries trimmed from the front
	live    int           // guarded by mu: entries not done
	bytes   int64         // guarded by mu: body bytes of live entries
	next    int64         // guarded by mu: next offset to pull
	retries map[int64]int // guarded by mu: orderly local redelivery counts by offset
}

type pqEntry struct {
	off  int64
	msg  *Message
	done bool
}

func newProcessQueue(mq MessageQueue) *processQueue {
	ctx, cancel := context.WithCancel(context.Background())
	pq := &processQueue{mq: mq, ctx: ctx, cancel: cancel, ready: make(chan struct{}, 1), space: make(chan struct{}, 1),
		retries: make(map[int64]int)}
	pq.offset.Store(-1)
	pq.persisted.Store(-1)
	return pq
}

func (pq *processQueue) dropped() bool { return pq.ctx.Err() != nil }

func (pq *processQueue) drop() { pq.cancel() }

// start sets the first pull offset.
func (pq *processQueue) start(off int64) {
	pq.mu.Lock()
	pq.next = off
	pq.mu.Unlock()
	pq.offset.Store(off)
}

// nextOffset returns the next offset to pull.
func (pq *processQueue) nextOffset() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.next
}

// setNext moves the next pull offset (no message, filtered messages, or an
// offset the broker corrected) and recomputes the commit offset.
func (pq *processQueue) setNext(off int64) {
	pq.mu.Lock()
	pq.next = off
	pq.updateLocked()
	pq.mu.Unlock()
}

// add puts pulled messages in the window and moves the next pull offset.
func (pq *processQueue) add(msgs []*Message, next int64) {
	pq.mu.Lock()
	for _, m := range msgs {
		if n := len(pq.entries); n > 0 && pq.entries[n-1].off >= m.QueueOffset {
			continue // NB: never twice, and offsets stay ascending
		}
		pq.entries = append(pq.entries, pqEntry{off: m.QueueOffset, msg: m})
		pq.live++
		pq.bytes += int64(len(m.Body))
	}
	pq.next = next
	pq.updateLocked()
	pq.mu.Unlock()
	if len(msgs) > 0 {
		kick(pq.ready)
	}
}

// ack removes handled messages from the window, wakes a pull loop waiting
// for room, and returns the new commit offset.
func (pq *processQueue) ack(msgs []*Message) int64 {
	defer kick(pq.space)
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		i := sort.Search(len(pq.entries), func(i int) bool { return pq.entries[i].off >= m.QueueOffset })
		if i < len(pq.entries) && pq.entries[i].off == m.QueueOffset && !pq.entries[i].done {
			pq.entries[i].done = true
			pq.entries[i].msg = nil
			pq.live--
			pq.bytes -= int64(len(m.Body))
			delete(pq.retries, m.QueueOffset)
		}
	}
	k := 0
	for k < len(pq.entries) && pq.entries[k].done {
		k++
	}
	if k > 0 {
		pq.entries = append(pq.entries[:0], pq.entries[k:]...)
	}
	pq.updateLocked()
	return pq.offset.Load()
}

// REQUIRES: mu held.
func (pq *processQueue) updateLocked() {
	if len(pq.entries) > 0 {
		pq.offset.Store(pq.entries[0].off)
		return
	}
	pq.offset.Store(pq.next)
}

// overLimit reports whether the window holds count messages or bytes or
// more (flow control).
func (pq *processQueue) overLimit(count int, bytes int64) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.live >= count || pq.bytes >= bytes
}

// inFlight returns the number of live messages in the window.
func (pq *processQueue) inFlight() int {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.live
}

// peek returns up to n of the oldest unacknowledged messages (orderly),
// with ReconsumeTimes set to their local redelivery count.
func (pq *processQueue) peek(n int) []*Message {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	var out []*Message
	for _, e := range pq.entries {
		if len(out) == n {
			break
		}
		if !e.done {
			if r := pq.retries[e.off]; r > 0 {
				e.msg.ReconsumeTimes = r
			}
			out = append(out, e.msg)
		}
	}
	return out
}

// failed counts a failed orderly delivery of msgs and returns their new
// counts.
func (pq *processQueue) failed(msgs []*Message) []int {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	out := make([]int, len(msgs))
	for i, m := range msgs {
		if pq.retries[m.QueueOffset] < m.ReconsumeTimes {
			pq.retries[m.QueueOffset] = m.ReconsumeTimes
		}
		pq.retries[m.QueueOffset]++
		out[i] = pq.retries[m.QueueOffset]
	}
	return out
}

// info describes the queue for GET_CONSUMER_RUNNING_INFO.
func (pq *processQueue) info() protocol.ProcessQueueInfo {
	pi := protocol.ProcessQueueInfo{CommitOffset: pq.offset.Load(), Locked: pq.locked.Load(), Dropped: pq.dropped(),
		LastPullTimestamp: pq.lastPull.Load(), LastConsumeTimestamp: pq.lastConsume.Load()}
	if at := pq.lockedAt.Load(); at > 0 {
		pi.LastLockTimestamp = at / int64(time.Millisecond)
	}
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pi.CachedMsgCount = pq.live
	pi.CachedMsgSizeInMiB = pq.bytes >> 20
	first := true
	for _, e := range pq.entries {
		if !e.done {
			if first {
				pi.CachedMsgMinOffset, first = e.off, false
			}
			pi.CachedMsgMaxOffset = e.off
		}
	}
	return pi
}

// lockValid reports whether the queue's broker lock is held and fresh.
func (pq *processQueue) lockValid(expiry time.Duration) bool {
	return pq.locked.Load() && time.Since(time.Unix(0, pq.lockedAt.Load())) < expiry
}

func (pq *processQueue) setLocked(ok bool) {
	if ok {
		pq.lockedAt.Store(time.Now().UnixNano())
	}
	pq.locked.Store(ok)
}
