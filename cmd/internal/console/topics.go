package console

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/client"
)

// brokerView is one broker member in GET /api/cluster.
type brokerView struct {
	Cluster    string            `json:"cluster"`
	BrokerName string            `json:"brokerName"`
	BrokerID   int64             `json:"brokerId"`
	Role       string            `json:"role"` // MASTER or SLAVE (broker id 0 or not)
	Addr       string            `json:"addr"`
	Runtime    map[string]string `json:"runtime,omitempty"`
	Error      string            `json:"error,omitempty"` // why Runtime is missing
}

// clusterView is GET /api/cluster.
type clusterView struct {
	Brokers   []brokerView `json:"brokers"`
	Rates     []Point      `json:"rates"` // the masters' summed put (produced) and get (consumed) totals
	SampledAt int64        `json:"sampledAt"`
	SampleErr string       `json:"sampleError,omitempty"`
}

func (s *Server) getCluster(r *http.Request) (any, error) {
	ci, err := s.admin.ClusterInfo(r.Context())
	if err != nil {
		return nil, err
	}
	out := clusterView{Brokers: []brokerView{}, Rates: emptyIfNil(s.hist.points(clusterKey))}
	for _, name := range slices.Sorted(maps.Keys(ci.Brokers)) {
		b := ci.Brokers[name]
		for _, id := range slices.Sorted(maps.Keys(b.Addrs)) {
			v := brokerView{Cluster: b.Cluster, BrokerName: name, BrokerID: id, Role: "SLAVE", Addr: b.Addrs[id]}
			if id == 0 {
				v.Role = "MASTER"
			}
			if v.Runtime, err = s.admin.BrokerRuntimeInfo(r.Context(), v.Addr); err != nil {
				v.Error = err.Error()
			}
			out.Brokers = append(out.Brokers, v)
		}
	}
	s.mu.Lock()
	out.SampledAt, out.SampleErr = s.sampledAt.UnixMilli(), s.sampleErr
	s.mu.Unlock()
	return out, nil
}

func emptyIfNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// topicConfig is a topic merged over the masters that hold it.
type topicConfig struct {
	client.TopicConfig
	brokers []brokerRef
}

// topicConfigs returns every topic of every master, sorted by name.
func (s *Server) topicConfigs(ctx context.Context, ci client.ClusterInfo) ([]topicConfig, error) {
	byName := map[string]*topicConfig{}
	var errs []error
	for _, b := range masters(ci) {
		cfgs, err := s.admin.TopicConfigs(ctx, b.addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range cfgs {
			t := byName[c.Topic]
			if t == nil {
				t = &topicConfig{TopicConfig: c}
				byName[c.Topic] = t
			}
			t.brokers = append(t.brokers, b)
		}
	}
	out := make([]topicConfig, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out, errors.Join(errs...)
}

// topicRow is one topic in GET /api/topics.
type topicRow struct {
	Topic       string   `json:"topic"`
	ReadQueues  int      `json:"readQueues"`
	WriteQueues int      `json:"writeQueues"`
	Perm        int      `json:"perm"`
	Order       bool     `json:"order"`
	Brokers     []string `json:"brokers"`
	System      bool     `json:"system"` // a broker's own, retry or dead-letter topic
	// From the sampler's last point; -1 before the first.
	Stored      int64   `json:"stored"`
	ProduceRate float64 `json:"produceRate"`
}

// systemTopic reports whether topic is one a broker keeps for itself
// (besides those named after a cluster or broker).
func systemTopic(topic string) bool {
	for _, p := range []string{"%RETRY%", "%DLQ%", "RMQ_SYS_", "SCHEDULE_TOPIC", "TBW102", "rmq_sys_"} {
		if strings.HasPrefix(topic, p) {
			return true
		}
	}
	return topic == "OFFSET_MOVED_EVENT" || topic == "SELF_TEST_TOPIC" || strings.HasPrefix(topic, "TRANS_CHECK_MAX") ||
		strings.HasSuffix(topic, "_REPLY_TOPIC")
}

// fromMasters asks the nameservers for the cluster, then list for what its
// masters hold. Masters that failed are an error only when no other
// answered: the pages show what the others hold.
func fromMasters[T any](ctx context.Context, s *Server, list func(context.Context, client.ClusterInfo) ([]T, error)) (
	client.ClusterInfo, []T, error) {
	ci, err := s.admin.ClusterInfo(ctx)
	if err != nil {
		return ci, nil, err
	}
	items, err := list(ctx, ci)
	if len(items) == 0 && err != nil {
		return ci, nil, err
	}
	return ci, items, nil
}

func (s *Server) getTopics(r *http.Request) (any, error) {
	ci, cfgs, err := fromMasters(r.Context(), s, s.topicConfigs)
	if err != nil {
		return nil, err
	}
	out := make([]topicRow, 0, len(cfgs))
	for _, c := range cfgs {
		row := topicRow{Topic: c.Topic, ReadQueues: c.ReadQueues, WriteQueues: c.WriteQueues, Perm: c.Perm, Order: c.Order,
			System: systemTopic(c.Topic) || ci.Clusters[c.Topic] != nil || ci.Brokers[c.Topic].BrokerName != "", Stored: -1}
		for _, b := range c.brokers {
			row.Brokers = append(row.Brokers, b.name)
		}
		if p, ok := s.hist.last(topicKey(c.Topic)); ok {
			row.Stored, row.ProduceRate = p.Stored, p.ProduceRate
		}
		out = append(out, row)
	}
	return out, nil
}

// queueRow is one queue in GET /api/topics/{topic}.
type queueRow struct {
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	MinOffset  int64  `json:"minOffset"`
	MaxOffset  int64  `json:"maxOffset"`
	LastUpdate int64  `json:"lastUpdate"` // unix ms; 0 when the queue holds nothing
}

// routeBroker is a broker of a topic's route.
type routeBroker struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	Addrs       map[int64]string `json:"addrs"`
	ReadQueues  int              `json:"readQueues"`
	WriteQueues int              `json:"writeQueues"`
	Perm        int              `json:"perm"`
}

// topicView is GET /api/topics/{topic}.
type topicView struct {
	Topic   string        `json:"topic"`
	Route   []routeBroker `json:"route"`
	Queues  []queueRow    `json:"queues"`
	History []Point       `json:"history"`
}

func (s *Server) getTopic(r *http.Request) (any, error) {
	topic := r.PathValue("topic")
	rt, err := s.admin.TopicRoute(r.Context(), topic)
	if err != nil {
		return nil, err
	}
	out := topicView{Topic: topic, Route: []routeBroker{}, Queues: []queueRow{}, History: emptyIfNil(s.hist.points(topicKey(topic)))}
	for _, b := range rt.Brokers {
		rb := routeBroker{Cluster: b.Cluster, BrokerName: b.BrokerName, Addrs: b.Addrs}
		for _, q := range rt.Queues {
			if q.BrokerName == b.BrokerName {
				rb.ReadQueues, rb.WriteQueues, rb.Perm = q.ReadQueues, q.WriteQueues, q.Perm
			}
		}
		out.Route = append(out.Route, rb)
		addr, ok := b.Addrs[0]
		if !ok {
			continue
		}
		qs, err := s.admin.TopicStats(r.Context(), addr, b.BrokerName, topic)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			row := queueRow{BrokerName: q.Queue.BrokerName, QueueID: q.Queue.QueueID, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset}
			if !q.LastUpdate.IsZero() {
				row.LastUpdate = q.LastUpdate.UnixMilli()
			}
			out.Queues = append(out.Queues, row)
		}
	}
	slices.SortFunc(out.Route, func(x, y routeBroker) int { return strings.Compare(x.BrokerName, y.BrokerName) })
	return out, nil
}

// topicForm is the body of POST /api/topics (create or update).
type topicForm struct {
	Topic       string `json:"topic"`
	ReadQueues  int    `json:"readQueues"`
	WriteQueues int    `json:"writeQueues"`
	Perm        int    `json:"perm"`
	Order       bool   `json:"order"`
	Cluster     string `json:"cluster"`
	BrokerAddr  string `json:"brokerAddr"`
}

// check validates f as mqadmin updateTopic does its flags.
func (f topicForm) check() error {
	switch {
	case f.Topic == "":
		return badRequest("topic is required")
	case f.ReadQueues < 0 || f.ReadQueues > 1024 || f.WriteQueues < 0 || f.WriteQueues > 1024:
		return badRequest("read and write queues must be from 1 to 1024 (0 for the default, 8)")
	case f.Perm != 0 && f.Perm != 2 && f.Perm != 4 && f.Perm != 6:
		return badRequest("perm %d is not 2 (write), 4 (read) or 6 (read and write)", f.Perm)
	}
	return nil
}

func (s *Server) postTopic(r *http.Request) (any, error) {
	var f topicForm
	if err := decodeJSON(r, &f); err != nil {
		return nil, err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	spec := client.TopicSpec{Topic: f.Topic, ReadQueues: f.ReadQueues, WriteQueues: f.WriteQueues, Perm: f.Perm, Order: f.Order,
		Cluster: f.Cluster, BrokerAddr: f.BrokerAddr}
	if err := s.admin.CreateTopic(r.Context(), spec); err != nil {
		return nil, err
	}
	return map[string]any{"topic": f.Topic, "created": true}, nil
}

func (s *Server) deleteTopic(r *http.Request) (any, error) {
	topic := r.PathValue("topic")
	if err := s.admin.DeleteTopic(r.Context(), topic, r.URL.Query().Get("cluster")); err != nil {
		return nil, err
	}
	return map[string]any{"topic": topic, "deleted": true}, nil
}

// msOrZero is t in unix milliseconds, 0 for the zero time.
func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
