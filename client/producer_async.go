package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
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
	st := p.newSendState(ctx)
	req := p.sendRequest(q, o, p.attemptTimeout(st))
	start := time.Now()
	return p.core.tr.tryInline(ctx, addr, req, sendOKCodes, func(resp *remoting.Command, err error) {
		if err == nil {
			var res SendResult
			if res, err = sendResult(resp, q, o); err == nil {
				p.faults.record(q.BrokerName, time.Since(start), false)
				p.completions.add(func() { done(res, nil) })
				return
			}
		}
		p.workers.run(func() {
			wait, final := p.failed(ctx, st, o, q, addr, start, err)
			if final != nil {
				done(SendResult{}, final)
				return
			}
			if wait > 0 {
				if serr := sleepCtx(ctx, wait); serr != nil {
					done(SendResult{}, fmt.Errorf("%w (gave up: %w)", err, serr))
					return
				}
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

// completions runs functions in order on one goroutine, started when there
// is work and ending when there is none: answers that arrive together cost
// one goroutine wake-up, not one each.
type completions struct {
	mu      sync.Mutex
	queue   []func() // guarded by mu
	running bool     // guarded by mu
}

func (c *completions) add(f func()) {
	c.mu.Lock()
	c.queue = append(c.queue, f)
	if c.running {
		c.mu.Unlock()
		return
	}
	c.running = true
	c.mu.Unlock()
	go c.run()
}

func (c *completions) run() {
	var batch []func()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		batch, c.queue = c.queue, batch[:0]
		c.mu.Unlock()
		for i, f := range batch {
			f()
			batch[i] = nil
		}
	}
}
