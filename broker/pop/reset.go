package pop

// Reset moves group's topic queue to offset (an admin's resetOffset,
// backward or forward): the next new offset is offset, and every offset
// in flight or waiting (FIFO) is forgotten, so their handles are no
// longer current (an ack, change or renewal of one answers
// ErrInvalidHandle: INVALID_RECEIPT_HANDLE) and no late ack commits the
// old position over the reset. Backward, the messages from offset on are
// delivered again as new ones (attempt 1, as RocketMQ's broker pops them
// again from the queue's offset, their reconsume times never counted);
// forward, the offsets skipped are never delivered. (RocketMQ 5 applies a
// reset at the queue's next pop, clearing its FIFO block and the offsets
// it keeps in memory, but its checkpoints of messages in flight still
// revive them through the retry topic: a forward reset there may deliver
// a skipped message once more. Here it does not.) A group that never
// popped the queue has nothing to reset: its pops start at the committed
// offset, which the caller sets. It reports whether there was any state.
// A negative offset is taken as 0.
//
// The caller commits the group's offset before the reset: the first
// unordered pop after it starts at offset whatever start it names (read
// before the commit, or committed over it by a pop or ack under way),
// and commits the reset position again. An orderly pop still takes the
// greater of the two: a receive or ack of a FIFO group under way while
// the admin resets may undo a backward reset (reset again).
func (t *Table) Reset(group, topic string, queue int32, offset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[key{group, topic, queue}]
	if q == nil {
		return false
	}
	q.resetTo(offset)
	t.changed()
	t.emit(&Record{Op: OpReset, Group: group, Topic: topic, Queue: queue, Offset: q.next})
	return true
}

// resetTo is Reset's change of q. REQUIRES: t.mu held.
func (q *queueState) resetTo(offset int64) {
	q.next = max(offset, 0)
	q.inflight = map[int64]*entry{}
	q.busy, q.waiting, q.nWaiting = nil, nil, 0
	q.reset = true
}
