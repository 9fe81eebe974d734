package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
)

// Admin manages topics and inspects groups and messages, as mqadmin does.
// Create it with NewAdmin and Close it when done; it needs no Start.
// Methods are safe for concurrent use.
type Admin struct {
	cfg  *config
	core *core

	mu     sync.Mutex
	closed bool // guarded by mu
}

// NewAdmin returns an admin client. WithNameServers is required.
func NewAdmin(opts ...Option) (*Admin, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Admin{cfg: cfg, core: newCore(cfg)}, nil
}

// Close closes the admin's connections. Idempotent.
func (a *Admin) Close() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.core.stop()
	return nil
}

func (a *Admin) check() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	return nil
}

// BrokerAddrs is a broker name's addresses by broker id (0 = master).
type BrokerAddrs struct {
	Cluster    string
	BrokerName string
	Addrs      map[int64]string
	// GrpcAddrs are the RocketMQ 5 gRPC endpoints by broker id, of the
	// brokers that serve one (Sluice brokers started with --grpc-listen).
	GrpcAddrs map[int64]string
}

// QueueData is a topic's queues on one broker.
type QueueData struct {
	BrokerName  string
	ReadQueues  int
	WriteQueues int
	Perm        int // 2 write, 4 read
}

// TopicRoute is where a topic's queues are.
type TopicRoute struct {
	Topic   string
	Brokers []BrokerAddrs
	Queues  []QueueData
}

// ClusterInfo lists the brokers the name server knows, by name and by
// cluster.
type ClusterInfo struct {
	Brokers  map[string]BrokerAddrs // by broker name
	Clusters map[string][]string    // cluster → broker names
}

// MasterAddrs returns the master addresses of cluster's brokers, or of
// every broker when cluster is empty, sorted.
func (c ClusterInfo) MasterAddrs(cluster string) []string {
	var out []string
	for name, b := range c.Brokers {
		if cluster != "" && !slices.Contains(c.Clusters[cluster], name) {
			continue
		}
		if a, ok := b.Addrs[0]; ok {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

func brokerAddrs(b protocol.BrokerData) BrokerAddrs {
	return BrokerAddrs{Cluster: b.Cluster, BrokerName: b.BrokerName, Addrs: b.BrokerAddrs, GrpcAddrs: b.GrpcAddrs}
}

// TopicRoute asks the name servers for topic's route. An unknown topic
// gives an error matching ErrNoRoute and ErrTopicNotExist.
func (a *Admin) TopicRoute(ctx context.Context, topic string) (TopicRoute, error) {
	if err := a.check(); err != nil {
		return TopicRoute{}, err
	}
	d, err := a.core.routes.fetchWith(ctx, topic, true)
	if err != nil {
		return TopicRoute{}, err
	}
	r := TopicRoute{Topic: topic}
	for _, b := range d.BrokerDatas {
		r.Brokers = append(r.Brokers, brokerAddrs(b))
	}
	for _, q := range d.QueueDatas {
		r.Queues = append(r.Queues, QueueData{BrokerName: q.BrokerName, ReadQueues: int(q.ReadQueueNums),
			WriteQueues: int(q.WriteQueueNums), Perm: int(q.Perm)})
	}
	return r, nil
}

// ClusterInfo returns the brokers and clusters the name server knows.
func (a *Admin) ClusterInfo(ctx context.Context) (ClusterInfo, error) {
	if err := a.check(); err != nil {
		return ClusterInfo{}, err
	}
	var d protocol.ClusterInfo
	if err := a.nsDecode(ctx, request{code: protocol.GetBrokerClusterInfo}, &d); err != nil {
		return ClusterInfo{}, err
	}
	ci := ClusterInfo{Brokers: make(map[string]BrokerAddrs, len(d.BrokerAddrTable)), Clusters: d.ClusterAddrTable}
	for name, b := range d.BrokerAddrTable {
		ci.Brokers[name] = brokerAddrs(b)
	}
	return ci, nil
}

// TopicList returns every topic the name server knows, sorted.
func (a *Admin) TopicList(ctx context.Context) ([]string, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var d protocol.TopicList
	if err := a.nsDecode(ctx, request{code: protocol.GetAllTopicListFromNameServer}, &d); err != nil {
		return nil, err
	}
	slices.Sort(d.TopicList)
	return d.TopicList, nil
}

// nsDecode asks the name servers in turn and decodes the first SUCCESS body
// into v.
func (a *Admin) nsDecode(ctx context.Context, r request, v any) error {
	var errs []error
	for _, ns := range a.cfg.nameServers {
		cctx, cancel := a.core.callCtx(ctx)
		resp, err := a.core.tr.call(cctx, ns, r)
		cancel()
		if err == nil {
			return decode(resp, v)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TopicSpec describes a topic to create.
type TopicSpec struct {
	Topic       string
	ReadQueues  int  // default 8
	WriteQueues int  // default 8
	Perm        int  // default 6 (read and write)
	Order       bool // mark the topic as ordered
	// Attributes are RocketMQ 5 attribute changes ("+message.type=FIFO",
	// "-message.type"; comma-separated); "" keeps the topic's.
	Attributes string
	// BrokerAddr creates the topic on that broker only. Otherwise it is
	// created on every master of Cluster, or of every cluster when Cluster
	// is empty.
	BrokerAddr string
	Cluster    string
}

// CreateTopic creates or updates a topic on one broker or on the masters of
// a cluster. Each broker registers the topic with the name servers at once;
// the route may still take a moment to show every broker.
func (a *Admin) CreateTopic(ctx context.Context, s TopicSpec) error {
	if err := a.check(); err != nil {
		return err
	}
	if err := checkTopic(s.Topic); err != nil {
		return err
	}
	h := protocol.CreateTopicRequestHeader{Topic: s.Topic, DefaultTopic: a.cfg.createTopicKey,
		ReadQueueNums: int32(cmp0(s.ReadQueues, 8)), WriteQueueNums: int32(cmp0(s.WriteQueues, 8)),
		Perm: int32(cmp0(s.Perm, protocol.PermRead|protocol.PermWrite)), TopicFilterType: "SINGLE_TAG", Order: s.Order,
		Attributes: s.Attributes}
	addrs, err := a.targets(ctx, s.BrokerAddr, s.Cluster)
	if err != nil {
		return err
	}
	var errs []error
	for _, addr := range addrs {
		cctx, cancel := a.core.callCtx(ctx)
		_, err := a.core.tr.call(cctx, addr, request{code: protocol.UpdateAndCreateTopic, ext: protocol.Ext(&h)})
		cancel()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func cmp0(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// targets returns addr, or the masters of cluster (all when empty).
func (a *Admin) targets(ctx context.Context, addr, cluster string) ([]string, error) {
	if addr != "" {
		return []string{addr}, nil
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	addrs := ci.MasterAddrs(cluster)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: no master broker in cluster %q", ErrNoRoute, cluster)
	}
	return addrs, nil
}

// DeleteTopic deletes topic from the masters of cluster (every cluster when
// empty), then from every name server (spec §3.11). When a master refuses
// (a system topic) or cannot be asked, the name servers are left alone, as
// Java's mqadmin does: the topic still lives there, and its route with it.
func (a *Admin) DeleteTopic(ctx context.Context, topic, cluster string) error {
	if err := a.check(); err != nil {
		return err
	}
	addrs, err := a.targets(ctx, "", cluster)
	if err != nil {
		return err
	}
	var errs []error
	for _, addr := range addrs {
		cctx, cancel := a.core.callCtx(ctx)
		_, err := a.core.tr.call(cctx, addr, request{code: protocol.DeleteTopicInBroker,
			ext: protocol.Ext(&protocol.DeleteTopicRequestHeader{Topic: topic})})
		cancel()
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, ns := range a.cfg.nameServers {
		cctx, cancel := a.core.callCtx(ctx)
		_, err := a.core.tr.call(cctx, ns, request{code: protocol.DeleteTopicInNamesrv,
			ext: protocol.Ext(&protocol.DeleteTopicFromNamesrvRequestHeader{Topic: topic, ClusterName: cluster})})
		cancel()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// QueryByID returns the message with an offset message id (the broker's id,
// SendResult.OffsetMsgID or Message.OffsetMsgID), read from the broker that
// stored it.
func (a *Admin) QueryByID(ctx context.Context, offsetMsgID string) (*Message, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	host, off, err := message.ParseOffsetMsgID(offsetMsgID)
	if err != nil {
		return nil, err
	}
	cctx, cancel := a.core.callCtx(ctx)
	defer cancel()
	resp, err := a.core.tr.call(cctx, host.String(), request{code: protocol.ViewMessageByID,
		ext: protocol.Ext(&protocol.ViewMessageByIDRequestHeader{Offset: off})})
	if err != nil {
		return nil, err
	}
	msgs, err := decodeRecords(resp.Body, "", a.cfg.maxBodySize)
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("client: VIEW_MESSAGE_BY_ID from %s returned %d messages", host, len(msgs))
	}
	return msgs[0], nil
}

// QueryByKey returns up to maxNum messages of topic stored between begin
// and end (zero times mean unbounded) whose KEYS hold key, or whose id
// (UNIQ_KEY) is key, from every broker of the topic.
func (a *Admin) QueryByKey(ctx context.Context, topic, key string, maxNum int, begin, end time.Time) ([]*Message, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	r, err := a.core.routes.refresh(ctx, topic)
	if err != nil {
		return nil, err
	}
	h := protocol.QueryMessageRequestHeader{Topic: topic, Key: key, MaxNum: int32(cmp0(maxNum, 32))}
	if !begin.IsZero() {
		h.BeginTimestamp = begin.UnixMilli()
	}
	if !end.IsZero() {
		h.EndTimestamp = end.UnixMilli()
	}
	var out []*Message
	for _, name := range sortedKeys(r.addrs) {
		cctx, cancel := a.core.callCtx(ctx)
		resp, err := a.core.tr.call(cctx, r.addrs[name], request{code: protocol.QueryMessage, ext: protocol.Ext(&h)},
			protocol.QueryNotFound)
		cancel()
		if err != nil {
			return out, err
		}
		if resp.Code == protocol.QueryNotFound {
			continue
		}
		msgs, err := decodeRecords(resp.Body, name, a.cfg.maxBodySize)
		if err != nil {
			return out, err
		}
		out = append(out, msgs...)
	}
	if len(out) > int(h.MaxNum) {
		out = out[:h.MaxNum]
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
