package pop

// Reset moves group's topic queue to offset (an admin's resetOffset,
// backward or forward): the next new offset is offset, and every offset
// in flight or waiting (FIFO) is forgotten, so their handles are no
// longer current (an ack, change or renewal of one answers
// ErrInvalidHandle: INVALID_RECEIPT_HANDLE) and no late ack commits the
// old position over the reset. Backward, the messages from offset on are
// delivered again as new ones (attempt 1, as RocketMQ's broker pops them
// again from the queue's offset, their reconsume times never counted);
// forward, the offsets skipped are never delivered. A group that never
// popped the queue has nothing to reset: its pops start at the committed
// offset, which the caller sets. It reports whether there was any state.
// A negative offset is taken as 0.
func (t *Table) Reset(group, topic string, queue int32, offset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[key{group, topic, queue}]
	if q == nil {
		return false
	}
	q.next = max(offset, 0)
	q.inflight = map[int64]*entry{}
	q.busy, q.waiting, q.nWaiting = nil, nil, 0
	t.changed()
	return true
}
