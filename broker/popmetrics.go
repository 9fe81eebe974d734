package broker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// popCounts counts POP (v5) consumption per group, topic and queue since
// the broker started: the Prometheus series (summed per group) and mqadmin
// popStatus read them.
type popCounts struct {
	mu sync.Mutex
	m  map[popCountKey]*popCount // guarded by mu; at most maxPopCountKeys
}

type popCountKey struct {
	group, topic string
	queue        int32
}

// popCount: receives are messages delivered, redeliveries those with
// attempt > 1, acks and nacks (ChangeInvisibleDuration) those answered
// OK, invalid the acks, nacks and renewals refused for their handle
// (expired, replaced, acked already; one that does not decode or names
// another topic counts against queue -1), dlq the messages sent to the
// group's dead-letter topic. acks include the one a client's dead-letter call
// (ForwardMessageToDeadLetterQueue) makes.
type popCount struct {
	receives, redeliveries, acks, nacks, invalid, dlq atomic.Int64
}

// maxPopCountKeys bounds the group, topic and queue triples counted (and
// so the series' cardinality, with the groups and topics the broker
// keeps): past it a new triple is not counted.
const maxPopCountKeys = 1 << 14

// get returns the counts of group's topic queue, nil past maxPopCountKeys.
func (p *popCounts) get(group, topic string, queue int32) *popCount {
	k := popCountKey{group, topic, queue}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.m[k]; c != nil {
		return c
	}
	if len(p.m) >= maxPopCountKeys {
		return nil
	}
	if p.m == nil {
		p.m = map[popCountKey]*popCount{}
	}
	c := &popCount{}
	p.m[k] = c
	return c
}

// add adds n to the counter f picks of group's topic queue.
func (p *popCounts) add(group, topic string, queue int32, f func(*popCount) *atomic.Int64, n int64) {
	if c := p.get(group, topic, queue); c != nil && n != 0 {
		f(c).Add(n)
	}
}

func cReceives(c *popCount) *atomic.Int64     { return &c.receives }
func cRedeliveries(c *popCount) *atomic.Int64 { return &c.redeliveries }
func cAcks(c *popCount) *atomic.Int64         { return &c.acks }
func cNacks(c *popCount) *atomic.Int64        { return &c.nacks }
func cInvalid(c *popCount) *atomic.Int64      { return &c.invalid }
func cDLQ(c *popCount) *atomic.Int64          { return &c.dlq }

// deleteGroup forgets group's counts (the group was deleted): its series
// go with it.
func (p *popCounts) deleteGroup(group string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.m {
		if k.group == group {
			delete(p.m, k)
		}
	}
}

// snapshot returns a copy of the counts.
func (p *popCounts) snapshot() map[popCountKey][6]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[popCountKey][6]int64, len(p.m))
	for k, c := range p.m {
		out[k] = [6]int64{c.receives.Load(), c.redeliveries.Load(), c.acks.Load(), c.nacks.Load(), c.invalid.Load(), c.dlq.Load()}
	}
	return out
}

var (
	popCounterDescs = [6]*prometheus.Desc{
		prometheus.NewDesc("sluice_pop_receives_total", "Messages delivered to POP (v5) consumers, by group.", []string{"group"}, nil),
		prometheus.NewDesc("sluice_pop_redeliveries_total", "POP deliveries with attempt > 1 (not acked in time, or nacked), by group.", []string{"group"}, nil),
		prometheus.NewDesc("sluice_pop_acks_total", "POP acks answered OK, by group.", []string{"group"}, nil),
		prometheus.NewDesc("sluice_pop_nacks_total", "POP ChangeInvisibleDuration calls answered OK, by group.", []string{"group"}, nil),
		prometheus.NewDesc("sluice_pop_invalid_handles_total", "POP acks, nacks and renewals refused for their receipt handle (expired, replaced, acked already, malformed), by group.", []string{"group"}, nil),
		prometheus.NewDesc("sluice_pop_dlq_total", "POP messages sent to the group's dead-letter topic, by group.", []string{"group"}, nil),
	}
	descPopInflight = prometheus.NewDesc("sluice_pop_inflight_messages", "POP messages delivered and not acked, by group.", []string{"group"}, nil)
	descPopWaiting  = prometheus.NewDesc("sluice_pop_waiting_messages", "POP FIFO messages held back behind their message group's message in flight, by group.", []string{"group"}, nil)
)

func describePop(ch chan<- *prometheus.Desc) {
	for _, d := range popCounterDescs {
		ch <- d
	}
	ch <- descPopInflight
	ch <- descPopWaiting
}

// collectPop exports the POP series, one per group: the groups are those
// the POP table and the counts hold (both bounded), summed over topics
// and queues.
func (b *Broker) collectPop(ch chan<- prometheus.Metric) {
	sums := map[string][6]int64{}
	for k, v := range b.popCounts.snapshot() {
		s := sums[k.group]
		for i := range v {
			s[i] += v[i]
		}
		sums[k.group] = s
	}
	for g, s := range sums {
		for i, d := range popCounterDescs {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(s[i]), g)
		}
	}
	type gauges struct{ inflight, waiting int }
	gs := map[string]gauges{}
	for g := range sums {
		gs[g] = gauges{}
	}
	for _, s := range b.pop.Stats() {
		v := gs[s.Group]
		v.inflight += s.InFlight
		v.waiting += s.Waiting
		gs[s.Group] = v
	}
	for g, v := range gs {
		ch <- prometheus.MustNewConstMetric(descPopInflight, prometheus.GaugeValue, float64(v.inflight), g)
		ch <- prometheus.MustNewConstMetric(descPopWaiting, prometheus.GaugeValue, float64(v.waiting), g)
	}
}

// handlePopStatus serves POP_STATUS (mqadmin popStatus).
func (b *Broker) handlePopStatus(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.PopStatusRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	group, topic := h.ConsumerGroup, h.Topic
	counts := b.popCounts.snapshot()
	now := b.popNow().UnixMilli()
	body := protocol.PopStatusBody{Group: group, Queues: []protocol.PopQueueStatus{}}
	seen := map[popCountKey]bool{}
	for _, s := range b.pop.Stats() {
		if s.Group != group || (topic != "" && s.Topic != topic) {
			continue
		}
		k := popCountKey{s.Group, s.Topic, s.Queue}
		seen[k] = true
		q := protocol.PopQueueStatus{MessageQueue: protocol.MessageQueue{Topic: s.Topic, BrokerName: b.cfg.BrokerName, QueueID: s.Queue},
			InFlight: s.InFlight, Waiting: s.Waiting, OldestInFlightAgeMs: -1, Redeliveries: counts[k][1], DLQ: counts[k][5]}
		if s.Oldest >= 0 {
			if ts, err := b.store.StoreTimeAt(s.Topic, s.Queue, s.Oldest); err == nil {
				q.OldestInFlightAgeMs = max(now-ts, 0)
			}
		}
		body.Queues = append(body.Queues, q)
	}
	for k, v := range counts {
		if seen[k] || k.group != group || (topic != "" && k.topic != topic) || k.queue < 0 {
			continue
		}
		body.Queues = append(body.Queues, protocol.PopQueueStatus{MessageQueue: protocol.MessageQueue{Topic: k.topic, BrokerName: b.cfg.BrokerName, QueueID: k.queue},
			OldestInFlightAgeMs: -1, Redeliveries: v[1], DLQ: v[5]})
	}
	sortPopStatus(body.Queues)
	b.replyBody(w, req, body)
}

func sortPopStatus(qs []protocol.PopQueueStatus) {
	slices.SortFunc(qs, func(a, b protocol.PopQueueStatus) int { return protocol.CompareQueues(a.MessageQueue, b.MessageQueue) })
}
