package console

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/client"
)

// sampleLoop samples the cluster every SampleEvery until Close.
func (s *Server) sampleLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.SampleEvery)
	defer t.Stop()
	for {
		s.sample(s.ctx)
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one point of every series: the cluster's and each topic's
// totals, and each group's progress on each topic it consumes. A failed
// request skips what it would have sampled; the series it feeds keep
// their earlier points. Series of topics and groups not seen for three
// samples are dropped.
func (s *Server) sample(ctx context.Context) {
	now := s.now().UnixMilli()
	ci, err := s.admin.ClusterInfo(ctx)
	if err != nil {
		s.setSampleErr(err)
		return
	}
	err = errors.Join(s.sampleBrokers(ctx, ci, now), s.sampleTopics(ctx, ci, now), s.sampleGroups(ctx, ci, now))
	s.hist.forget(now - 3*s.opts.SampleEvery.Milliseconds())
	s.setSampleErr(err)
}

// sampleBrokers adds the masters' summed put and get totals to the
// cluster's series, when every master answered (a missing one would show
// as a fall and a jump of the rates).
func (s *Server) sampleBrokers(ctx context.Context, ci client.ClusterInfo, now int64) error {
	total := Point{T: now, Lag: -1, LagMs: -1}
	for _, addr := range ci.MasterAddrs("") {
		rt, err := s.admin.BrokerRuntimeInfo(ctx, addr)
		if err != nil {
			return err
		}
		total.Produced += atoi(rt["putMessageTotal"])
		total.Consumed += atoi(rt["getMessageTotal"])
	}
	s.hist.add(clusterKey, total)
	return nil
}

// sampleTopics adds each topic's stored and produced totals to its series.
func (s *Server) sampleTopics(ctx context.Context, ci client.ClusterInfo, now int64) error {
	topics, err := s.topicConfigs(ctx, ci)
	for _, t := range topics {
		p := Point{T: now, Lag: -1, LagMs: -1}
		ok := true
		for _, b := range t.brokers {
			qs, qerr := s.admin.TopicStats(ctx, b.addr, b.name, t.Topic)
			if qerr != nil {
				ok = false
				break
			}
			for _, q := range qs {
				p.Produced += q.MaxOffset
				p.Stored += q.MaxOffset - q.MinOffset
			}
		}
		if ok {
			s.hist.add(topicKey(t.Topic), p)
		}
	}
	return err
}

// sampleGroups adds each group's progress to its series, and to the
// series of its flow through each topic it consumes.
func (s *Server) sampleGroups(ctx context.Context, ci client.ClusterInfo, now int64) error {
	groups, err := s.groupNames(ctx, ci)
	for _, g := range groups {
		cp, cerr := s.admin.ConsumeStats(ctx, g, "")
		if cerr != nil {
			continue
		}
		flows := map[string]*flow{}
		all := &flow{Point: Point{T: now, LagMs: -1}}
		for _, q := range cp.Queues {
			f := flows[q.Queue.Topic]
			if f == nil {
				f = &flow{Point: Point{T: now, LagMs: -1}}
				flows[q.Queue.Topic] = f
			}
			f.add(q)
			all.add(q)
		}
		if pop, perr := s.popStatus(ctx, ci, g); perr == nil {
			for _, q := range pop {
				all.InFlight += int64(q.InFlight)
				all.Redeliveries += q.Redeliveries
				all.DLQ += q.DLQ
			}
		} else if p, ok := s.hist.last(groupKey(g)); ok {
			// NB: a broker that did not answer keeps the POP figures where
			// they were, as the other series keep their points
			all.InFlight, all.Redeliveries, all.DLQ = p.InFlight, p.Redeliveries, p.DLQ
		}
		for topic, f := range flows {
			s.hist.add(flowKey(g, topic), f.point())
		}
		s.hist.add(groupKey(g), all.point())
	}
	return err
}

// flow sums a group's progress over queues.
type flow struct {
	Point
	known int // queues whose lag is known
}

func (f *flow) add(q client.QueueProgress) {
	f.Produced += q.BrokerOffset
	if q.Lag >= 0 {
		f.known++
		f.Consumed += q.ConsumerOffset
		f.Lag += q.Lag
	}
	f.LagMs = max(f.LagMs, q.LagTime.Milliseconds())
}

// point is the sum; its lag is unknown (-1) when no queue's is known.
func (f *flow) point() Point {
	p := f.Point
	if f.known == 0 {
		p.Lag = -1
	}
	return p
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

func (s *Server) setSampleErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sampleErr = ""
	if err != nil {
		s.sampleErr = err.Error()
	}
	s.sampledAt = s.now()
}
