package client

import (
	"context"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/workpool"
)

// tryAsyncFirst makes the first attempt of an async send without a
// goroutine of its own: the request goes out on the open connection to the
// queue's broker and its answer is handled on the connection's reader; the
// callback runs on the producer's completion goroutine. Any failure goes on
// as Send does (same retry budget) on a worker. It returns false, having
// sent nothing, when the route is not cached or the connection not open:
// the caller then sends from a worker.
func (p *Producer) tryAsyncFirst(ctx context.Context, o *outgoing, done func(SendResult, error)) bool {
	q, r, ok := p.pickCached(o)
	if !ok {
		return false
	}
	addr := r.addrs[q.BrokerName]
	if addr == "" {
		return false
	}
	// NB: the send state is made only if the attempt fails: an answered
	// send needs no more than its deadline.
	// NB: one clock reading for the deadline, the born timestamp, the
	// call's timeout and the latency: each costs ~60 ns on this VM.
	start := time.Now()
	deadline := p.sendDeadline(ctx, start)
	req := p.sendRequest(q, o, start, min(p.cfg.sendTimeout, deadline.Sub(start)))
	o.hold()
	defer o.drop() // NB: the write has returned
	code := req.code
	return p.core.tr.tryInline(ctx, addr, req, func(resp *remoting.Command, err error) {
		if err = settle(addr, code, sendOKCodes, resp, err); err == nil {
			var res SendResult
			if res, err = sendResult(resp, q, o); err == nil {
				p.faults.record(q.BrokerName, time.Since(start), false)
				p.completions.add(done, res, nil)
				return
			}
		}
		p.workers.run(func() {
			st := &sendState{deadline: deadline, backoff: p.cfg.busyBackoff}
			if final := p.afterFailure(ctx, st, o, q, addr, start, err); final != nil {
				done(SendResult{}, final)
				return
			}
			done(p.sendFrom(ctx, o, false, st))
		})
	})
}

// pickCached picks the queue of o's first attempt when the route of its
// topic is known without asking a name server.
func (p *Producer) pickCached(o *outgoing) (MessageQueue, *topicRoute, bool) {
	r := p.core.routes.cached(o.topic)
	if r == nil || len(r.write) == 0 {
		if r = p.derivedRoute(o.topic); r == nil {
			return MessageQueue{}, nil, false
		}
	}
	q, err := p.pick(o, r, "")
	return q, r, err == nil
}

// sendOKCodes are the send answers that count as sent.
var sendOKCodes = []int16{protocol.FlushDiskTimeout, protocol.FlushSlaveTimeout, protocol.SlaveNotAvailable}

// completions runs callbacks in order on one goroutine, started when there
// is work and ending when there is none: answers that arrive together cost
// one goroutine wake-up, not one each.
type completions struct {
	mu      sync.Mutex
	queue   []completion // guarded by mu
	spare   []completion // guarded by mu: the runner's emptied batch, kept for the next queue
	running bool         // guarded by mu
}

// completion is a callback and its outcome (no closure per answer).
type completion struct {
	done func(SendResult, error)
	res  SendResult
	err  error
}

func (c *completions) add(done func(SendResult, error), res SendResult, err error) {
	c.mu.Lock()
	if c.queue == nil {
		c.queue, c.spare = c.spare, nil // NB: reuse; growing a new one each time was 280 B a send
	}
	c.queue = append(c.queue, completion{done: done, res: res, err: err})
	if c.running {
		c.mu.Unlock()
		return
	}
	c.running = true
	c.mu.Unlock()
	workpool.Go(c.run)
}

func (c *completions) run() {
	var batch []completion
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			if cap(batch) <= 4096 {
				c.spare = batch[:0]
			}
			c.mu.Unlock()
			return
		}
		batch, c.queue = c.queue, batch[:0]
		c.mu.Unlock()
		for i := range batch {
			batch[i].done(batch[i].res, batch[i].err)
			batch[i] = completion{}
		}
	}
}
