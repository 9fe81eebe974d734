package pop

import "sort"

// QueueStats is what Stats reports of one group's topic queue.
type QueueStats struct {
	Group, Topic string
	Queue        int32
	// InFlight: offsets delivered and not acked, their invisible time
	// over or not (one over is delivered again by the next receive).
	InFlight int
	// Waiting: FIFO offsets held back behind their message group's offset
	// in flight, and offsets released to be delivered (not delivered yet).
	Waiting int
	// Oldest is the lowest offset in flight (-1 when none): the broker
	// gives its age from the message's store time.
	Oldest int64
}

// Stats reports every group's queues the table holds, sorted by group,
// topic and queue. It only reads.
func (t *Table) Stats() []QueueStats {
	t.mu.Lock()
	out := make([]QueueStats, 0, len(t.queues))
	for k, q := range t.queues {
		s := QueueStats{Group: k.group, Topic: k.topic, Queue: k.queue, Waiting: q.nWaiting, Oldest: -1}
		for off, e := range q.inflight {
			if e.attempt == 0 {
				s.Waiting++ // NB: released, not delivered yet
				continue
			}
			s.InFlight++
			if s.Oldest < 0 || off < s.Oldest {
				s.Oldest = off
			}
		}
		out = append(out, s)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Queue < b.Queue
	})
	return out
}
