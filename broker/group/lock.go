package group

import "time"

// LockMaxLive is how long a queue lock lasts without a refresh (RocketMQ:
// 60 s).
const LockMaxLive = 60 * time.Second

// Queue names one message queue of a broker.
type Queue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

type lockKey struct {
	group string
	queue Queue
}

type lockHolder struct {
	clientID string
	until    time.Time
}

// Lock tries to lock each queue for clientID in group and returns the queues
// the client now holds (newly locked or refreshed). A queue held by another
// client is refused until that lock goes LockMaxLive without a refresh.
func (r *Registry) Lock(group, clientID string, queues []Queue, now time.Time) []Queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	var held []Queue
	for _, q := range queues {
		k := lockKey{group, q}
		h, ok := r.locks[k]
		if ok && h.clientID != clientID && now.Before(h.until) {
			continue
		}
		r.locks[k] = lockHolder{clientID: clientID, until: now.Add(LockMaxLive)}
		held = append(held, q)
	}
	return held
}

// Unlock releases the queues clientID holds in group.
func (r *Registry) Unlock(group, clientID string, queues []Queue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range queues {
		k := lockKey{group, q}
		if h, ok := r.locks[k]; ok && h.clientID == clientID {
			delete(r.locks, k)
		}
	}
}

// ExpireLocks forgets the locks that went LockMaxLive without a refresh
// before now: a lock is taken for any queue a client names, and a
// client that dies keeps its locks, so the table would only grow.
func (r *Registry) ExpireLocks(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.locks {
		if !now.Before(h.until) {
			delete(r.locks, k)
		}
	}
}

// LockHolder returns the client holding a queue's lock, if it is live.
func (r *Registry) LockHolder(group string, q Queue, now time.Time) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.locks[lockKey{group, q}]
	if !ok || !now.Before(h.until) {
		return "", false
	}
	return h.clientID, true
}
