package console

import (
	"context"
	"strconv"

	"github.com/sluicemq/sluice/client"
	"time"
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
// their earlier points.
func (s *Server) sample(ctx context.Context) {
	now := s.now().UnixMilli()
	ci, err := s.admin.ClusterInfo(ctx)
	if err != nil {
		s.setSampleErr(err)
		return
	}
	total := Point{T: now, Lag: -1, LagMs: -1}
	var errs []string
	for _, addr := range ci.MasterAddrs("") {
		rt, err := s.admin.BrokerRuntimeInfo(ctx, addr)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		total.Produced += atoi(rt["putMessageTotal"])
		total.Consumed += atoi(rt["getMessageTotal"])
	}
	s.hist.add(clusterKey, total)

	topics, err := s.topicConfigs(ctx, ci)
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, t := range topics {
		p := Point{T: now, Lag: -1, LagMs: -1}
		ok := false
		for _, b := range t.brokers {
			qs, err := s.admin.TopicStats(ctx, b.addr, b.name, t.Topic)
			if err != nil {
				continue
			}
			ok = true
			for _, q := range qs {
				p.Produced += q.MaxOffset
				p.Stored += q.MaxOffset - q.MinOffset
			}
		}
		if ok {
			s.hist.add(topicKey(t.Topic), p)
		}
	}

	groups, err := s.groupNames(ctx, ci)
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, g := range groups {
		cp, err := s.admin.ConsumeStats(ctx, g, "")
		if err != nil {
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
		for topic, f := range flows {
			s.hist.add(flowKey(g, topic), f.point())
		}
		s.hist.add(groupKey(g), all.point())
	}
	// Series of topics and groups gone for three samples are dropped.
	s.hist.forget(now - 3*s.opts.SampleEvery.Milliseconds())
	if len(errs) > 0 {
		s.setSampleErr(errorString(errs[0]))
	} else {
		s.setSampleErr(nil)
	}
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

type errorString string

func (e errorString) Error() string { return string(e) }

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
