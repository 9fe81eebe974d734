package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// rebalanceLoop rebalances at start, on the rebalance interval and when a
// broker says the group changed. An orderly consumer that could not lock
// queues allocated to it (their previous owner still holds them, until
// its batch in progress ends) tries again soon, backing off from 100 ms
// to the rebalance interval, rather than leave them unconsumed for a
// whole round.
func (c *PushConsumer) rebalanceLoop() {
	t := time.NewTicker(c.cfg.rebalanceInterval)
	defer t.Stop()
	const firstRetry = 100 * time.Millisecond
	backoff := firstRetry
	for {
		ctx, cancel := untilClosed(c.quit)
		unlocked := c.rebalance(ctx)
		cancel()
		var retry <-chan time.Time
		if unlocked > 0 {
			retry = time.After(backoff)
			backoff = min(2*backoff, c.cfg.rebalanceInterval)
		} else {
			backoff = firstRetry
		}
		select {
		case <-c.quit:
			return
		case <-t.C:
		case <-c.rebalanceCh:
		case <-retry:
		}
	}
}

// rebalance recomputes the queues this client owns for every subscribed
// topic and starts or stops their pull loops. A topic whose route or
// member list cannot be read keeps its queues until the next round. It
// returns how many queues allocated to an orderly consumer could not be
// locked.
func (c *PushConsumer) rebalance(ctx context.Context) (unlocked int) {
	for _, topic := range c.topics() {
		r, err := c.core.routes.get(ctx, topic)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, ErrNoRoute) {
				c.core.log.Warn("client: rebalance: route", "topic", topic, "err", err)
			}
			continue
		}
		mine := r.read
		if c.cfg.model == Clustering {
			cids, err := groupMembers(ctx, c.core, c.group, r)
			if err != nil {
				if ctx.Err() == nil {
					c.core.log.Warn("client: rebalance: group members", "group", c.group, "topic", topic, "err", err)
				}
				continue
			}
			if !slices.Contains(cids, c.core.id) {
				// NB: the broker has not seen our heartbeat (it restarted,
				// or the first one failed). Keep the queues rather than
				// drop them all, and heartbeat now.
				kick(c.core.hbKick)
				continue
			}
			mine = allocate(c.cfg.allocate, c.core.id, r.read, cids)
		}
		unlocked += c.updateQueues(ctx, topic, mine)
	}
	return unlocked
}

// groupMembers asks the brokers of a route, in turn, for group's members
// (GET_CONSUMER_LIST_BY_GROUP), sorted: each broker's master, or its slave
// while it has none (consumers heartbeat to both).
func groupMembers(ctx context.Context, c *core, group string, r *topicRoute) ([]string, error) {
	var errs []error
	for _, name := range sortedKeys(r.all) {
		addr := r.all[name][0] // NB: ids sorted: the master's first, if listed
		cctx, cancel := c.callCtx(ctx)
		resp, err := c.tr.call(cctx, addr, request{code: protocol.GetConsumerListByGroup,
			ext: protocol.Ext(&protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: group})})
		cancel()
		var list protocol.ConsumerList
		if err == nil {
			err = decode(resp, &list)
		}
		if err == nil {
			slices.Sort(list.ConsumerIDList)
			return list.ConsumerIDList, nil
		}
		c.connFailed(addr, err)
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// updateQueues makes the queues owned for topic exactly mine: dropped
// queues commit their offset (and are unlocked, orderly), new ones start
// pulling (orderly: only once locked on their broker). It returns how
// many new queues could not be locked.
func (c *PushConsumer) updateQueues(ctx context.Context, topic string, mine []MessageQueue) int {
	c.mu.Lock()
	if c.state != stateStarted {
		c.mu.Unlock()
		return 0
	}
	var gone []*processQueue
	for mq, pq := range c.queues {
		if mq.Topic == topic && !slices.Contains(mine, mq) {
			gone = append(gone, pq)
			delete(c.queues, mq)
			pq.drop()
		}
	}
	var added []MessageQueue
	for _, mq := range mine {
		if c.queues[mq] == nil {
			added = append(added, mq)
		}
	}
	c.mu.Unlock()

	if len(gone) > 0 {
		c.release(ctx, gone)
	}
	if len(added) == 0 {
		return 0
	}
	orderlyLocks := c.cfg.orderly && c.cfg.model == Clustering
	unlocked := 0
	if orderlyLocks {
		locked := c.lock(ctx, added)
		unlocked = len(added) - len(locked)
		c.lockMisses.Add(int64(unlocked))
		added = locked
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateStarted {
		return 0
	}
	for _, mq := range added {
		pq := newProcessQueue(mq)
		if orderlyLocks {
			pq.setLocked(true)
		}
		c.queues[mq] = pq
		c.wg.Add(1)
		pq.loops.Add(1)
		go func() {
			defer c.wg.Done()
			defer pq.loops.Done()
			c.pullLoop(pq)
		}()
		if c.cfg.orderly {
			c.wg.Add(1)
			pq.loops.Add(1)
			go func() {
				defer c.wg.Done()
				defer pq.loops.Done()
				c.orderlyLoop(pq)
			}()
		}
	}
	if len(added) > 0 || unlocked > 0 {
		c.core.log.Debug("client: rebalance", "group", c.group, "topic", topic, "added", len(added), "not_locked", unlocked)
	}
	return unlocked
}

// release commits the offsets of dropped queues and, for orderly
// consumers, unlocks them once their current batch is done.
func (c *PushConsumer) release(ctx context.Context, gone []*processQueue) {
	orderlyLocks := c.cfg.orderly && c.cfg.model == Clustering
	if orderlyLocks {
		for _, pq := range gone {
			pq.consumeMu.Lock() // NB: waits for the batch in progress
			pq.consumeMu.Unlock()
		}
	}
	if err := c.persist(ctx, gone, false); err != nil && ctx.Err() == nil {
		c.core.log.Warn("client: commit offsets of dropped queues", "group", c.group, "err", err)
	}
	if orderlyLocks {
		c.unlock(ctx, gone)
	}
}

// byBroker groups queues by broker name.
func byBroker(mqs []MessageQueue) map[string][]MessageQueue {
	out := make(map[string][]MessageQueue)
	for _, q := range mqs {
		out[q.BrokerName] = append(out[q.BrokerName], q)
	}
	return out
}

// lock locks mqs on their brokers (LOCK_BATCH_MQ) and returns those locked.
func (c *PushConsumer) lock(ctx context.Context, mqs []MessageQueue) []MessageQueue {
	var out []MessageQueue
	for broker, qs := range byBroker(mqs) {
		got, err := c.lockOn(ctx, broker, qs)
		if err != nil {
			if ctx.Err() == nil {
				c.core.log.Warn("client: lock queues", "group", c.group, "broker", broker, "err", err)
			}
			continue
		}
		out = append(out, got...)
	}
	return out
}

func (c *PushConsumer) lockOn(ctx context.Context, broker string, qs []MessageQueue) ([]MessageQueue, error) {
	addr, ok := c.core.routes.brokerAddr(broker)
	if !ok {
		return nil, fmt.Errorf("%w: no address for broker %s", ErrNoRoute, broker)
	}
	body := protocol.LockBatchRequest{ConsumerGroup: c.group, ClientID: c.core.id}
	for _, q := range qs {
		body.MQSet = append(body.MQSet, q.wire())
	}
	cctx, cancel := c.core.callCtx(ctx)
	defer cancel()
	resp, err := c.core.tr.call(cctx, addr, request{code: protocol.LockBatchMQ, obj: body})
	if err != nil {
		c.core.connFailed(addr, err)
		return nil, err
	}
	var lr protocol.LockBatchResponse
	if err := decode(resp, &lr); err != nil {
		return nil, err
	}
	out := make([]MessageQueue, 0, len(lr.LockOKMQSet))
	for _, q := range lr.LockOKMQSet {
		out = append(out, fromWire(q))
	}
	return out, nil
}

// unlock releases the broker locks of pqs (UNLOCK_BATCH_MQ).
func (c *PushConsumer) unlock(ctx context.Context, pqs []*processQueue) {
	mqs := make([]MessageQueue, len(pqs))
	for i, pq := range pqs {
		mqs[i] = pq.mq
		pq.setLocked(false)
	}
	for broker, qs := range byBroker(mqs) {
		addr, ok := c.core.routes.brokerAddr(broker)
		if !ok {
			continue
		}
		body := protocol.LockBatchRequest{ConsumerGroup: c.group, ClientID: c.core.id}
		for _, q := range qs {
			body.MQSet = append(body.MQSet, q.wire())
		}
		cctx, cancel := c.core.callCtx(ctx)
		_, err := c.core.tr.call(cctx, addr, request{code: protocol.UnlockBatchMQ, obj: body})
		cancel()
		if err != nil && ctx.Err() == nil {
			c.core.log.Warn("client: unlock queues", "group", c.group, "broker", broker, "err", err)
		}
	}
}

// lockLoop renews the locks of the queues an orderly consumer owns.
func (c *PushConsumer) lockLoop() {
	t := time.NewTicker(c.cfg.lockInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		c.mu.Lock()
		pqs := make(map[MessageQueue]*processQueue, len(c.queues))
		for mq, pq := range c.queues {
			pqs[mq] = pq
		}
		c.mu.Unlock()
		ctx, cancel := untilClosed(c.quit)
		for broker, qs := range byBroker(sortedQueues(pqs)) {
			got, err := c.lockOn(ctx, broker, qs)
			if err != nil {
				continue // NB: the lock stays valid until its expiry
			}
			for _, q := range qs {
				pqs[q].setLocked(slices.Contains(got, q))
			}
		}
		cancel()
	}
}

func sortedQueues(m map[MessageQueue]*processQueue) []MessageQueue {
	out := make([]MessageQueue, 0, len(m))
	for q := range m {
		out = append(out, q)
	}
	slices.SortFunc(out, compareQueues)
	return out
}
