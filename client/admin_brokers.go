package client

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// brokerCall sends r to the broker at addr within the call timeout; codes
// other than SUCCESS and ok are a *BrokerError.
func (a *Admin) brokerCall(ctx context.Context, addr string, r request, ok ...int16) (*remoting.Command, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	cctx, cancel := a.core.callCtx(ctx)
	defer cancel()
	return a.core.tr.call(cctx, addr, r, ok...)
}

// brokerDecode is brokerCall plus decoding the SUCCESS body into v.
func (a *Admin) brokerDecode(ctx context.Context, addr string, r request, v any) error {
	resp, err := a.brokerCall(ctx, addr, r)
	if err != nil {
		return err
	}
	return decode(resp, v)
}

// BrokerRuntimeInfo returns the runtime values of the broker at addr
// (GET_BROKER_RUNTIME_INFO): totals, commitlog offsets, disk use and
// watermarks, as mqadmin clusterList and brokerStatus show them.
func (a *Admin) BrokerRuntimeInfo(ctx context.Context, addr string) (map[string]string, error) {
	var kv protocol.KVTable
	if err := a.brokerDecode(ctx, addr, request{code: protocol.GetBrokerRuntimeInfo}, &kv); err != nil {
		return nil, err
	}
	if kv.Table == nil {
		kv.Table = map[string]string{}
	}
	return kv.Table, nil
}

// QueueStat is one queue's bounds on a broker.
type QueueStat struct {
	Queue     MessageQueue
	MinOffset int64
	MaxOffset int64 // next to be written
	// LastUpdate is the store time of the queue's newest message; zero
	// when it holds none.
	LastUpdate time.Time
}

// TopicStats returns the bounds of topic's queues on the broker at addr
// (GET_TOPIC_STATS_INFO), sorted by queue id. brokerName names the queues
// when the broker does not.
func (a *Admin) TopicStats(ctx context.Context, addr, brokerName, topic string) ([]QueueStat, error) {
	var st protocol.TopicStats
	r := request{code: protocol.GetTopicStatsInfo, ext: protocol.Ext(&protocol.TopicRequestHeader{Topic: topic})}
	if err := a.brokerDecode(ctx, addr, r, &st); err != nil {
		return nil, err
	}
	out := make([]QueueStat, 0, len(st.Queues))
	for _, q := range st.Queues {
		s := QueueStat{Queue: fromWire(q.MessageQueue), MinOffset: q.MinOffset, MaxOffset: q.MaxOffset}
		s.Queue.BrokerName = cmp.Or(s.Queue.BrokerName, brokerName)
		s.Queue.Topic = cmp.Or(s.Queue.Topic, topic)
		if q.LastUpdateTimestamp > 0 {
			s.LastUpdate = time.UnixMilli(q.LastUpdateTimestamp)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y QueueStat) int { return compareQueues(x.Queue, y.Queue) })
	return out, nil
}

// TopicConfig is a topic's configuration on one broker.
type TopicConfig struct {
	Topic       string
	ReadQueues  int
	WriteQueues int
	Perm        int
	Order       bool
}

// TopicConfigs returns every topic the broker at addr holds
// (GET_ALL_TOPIC_CONFIG), sorted by name.
func (a *Admin) TopicConfigs(ctx context.Context, addr string) ([]TopicConfig, error) {
	var w protocol.TopicConfigSerializeWrapper
	if err := a.brokerDecode(ctx, addr, request{code: protocol.GetAllTopicConfig}, &w); err != nil {
		return nil, err
	}
	out := make([]TopicConfig, 0, len(w.TopicConfigTable))
	for _, name := range slices.Sorted(maps.Keys(w.TopicConfigTable)) {
		c := w.TopicConfigTable[name]
		out = append(out, TopicConfig{Topic: cmp.Or(c.TopicName, name), ReadQueues: int(c.ReadQueueNums),
			WriteQueues: int(c.WriteQueueNums), Perm: int(c.Perm), Order: c.Order})
	}
	return out, nil
}

// SubscriptionGroups returns the names of the consumer groups the broker at
// addr has a subscription group config for
// (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), sorted.
func (a *Admin) SubscriptionGroups(ctx context.Context, addr string) ([]string, error) {
	var w protocol.SubscriptionGroupWrapper
	if err := a.brokerDecode(ctx, addr, request{code: protocol.GetAllSubscriptionGroupConfig}, &w); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(w.SubscriptionGroupTable)), nil
}

// ConsumerMember is one live client of a consumer group.
type ConsumerMember struct {
	ClientID   string
	ClientAddr string
	Language   string
	Version    int32
	// Subscriptions is topic → expression; ExpressionTypes is topic → TAG
	// or SQL92 (TAG when the broker does not say, as Apache RocketMQ's).
	Subscriptions   map[string]string
	ExpressionTypes map[string]string
}

// GroupConnections is what one broker knows of a consumer group's live
// clients.
type GroupConnections struct {
	ConsumeType      string
	MessageModel     string
	ConsumeFromWhere string
	Members          []ConsumerMember // sorted by client id
}

// ConsumerConnections returns the live clients of group registered with the
// broker at addr (GET_CONSUMER_CONNECTION_LIST). A group with none there is
// a *BrokerError with code CONSUMER_NOT_ONLINE.
func (a *Admin) ConsumerConnections(ctx context.Context, addr, group string) (GroupConnections, error) {
	var cc protocol.ConsumerConnection
	r := request{code: protocol.GetConsumerConnectionList,
		ext: protocol.Ext(&protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: group})}
	if err := a.brokerDecode(ctx, addr, r, &cc); err != nil {
		return GroupConnections{}, err
	}
	out := GroupConnections{ConsumeType: cc.ConsumeType, MessageModel: cc.MessageModel, ConsumeFromWhere: cc.ConsumeFromWhere}
	for _, c := range cc.ConnectionSet {
		m := ConsumerMember{ClientID: c.ClientID, ClientAddr: c.ClientAddr, Language: c.Language, Version: c.Version,
			Subscriptions: maps.Clone(c.Subscriptions), ExpressionTypes: map[string]string{}}
		if m.Subscriptions == nil {
			m.Subscriptions = map[string]string{}
		}
		for t := range m.Subscriptions {
			m.ExpressionTypes[t] = cmp.Or(c.ExpressionTypes[t], "TAG")
		}
		out.Members = append(out.Members, m)
	}
	slices.SortFunc(out.Members, func(x, y ConsumerMember) int { return cmp.Compare(x.ClientID, y.ClientID) })
	return out, nil
}

// PopQueueStatus is one queue of a POP (RocketMQ 5) consumer group on a
// broker, as PopStatus returns it.
type PopQueueStatus struct {
	Queue    MessageQueue
	InFlight int // delivered, not acked
	Waiting  int // FIFO messages held behind their message group's
	// OldestInFlight is the age of the oldest message in flight since it
	// was stored; -1 when none is.
	OldestInFlight time.Duration
	Redeliveries   int64 // deliveries with attempt > 1 since the broker started
	DLQ            int64 // messages sent to %DLQ%group since the broker started
}

// PopStatus returns the POP state of group on the broker at addr, per
// queue (of topic, or of every topic when topic is ""), sorted; none when
// the group has received nothing by POP there. POP_STATUS is a Sluice
// request: another broker answers it with CodeRequestNotSupported.
func (a *Admin) PopStatus(ctx context.Context, addr, brokerName, group, topic string) ([]PopQueueStatus, error) {
	var st protocol.PopStatusBody
	r := request{code: protocol.PopStatus, ext: protocol.Ext(&protocol.PopStatusRequestHeader{ConsumerGroup: group, Topic: topic})}
	if err := a.brokerDecode(ctx, addr, r, &st); err != nil {
		return nil, err
	}
	out := make([]PopQueueStatus, 0, len(st.Queues))
	for _, q := range st.Queues {
		s := PopQueueStatus{Queue: fromWire(q.MessageQueue), InFlight: q.InFlight, Waiting: q.Waiting,
			OldestInFlight: -1, Redeliveries: q.Redeliveries, DLQ: q.DLQ}
		s.Queue.BrokerName = cmp.Or(s.Queue.BrokerName, brokerName)
		if q.OldestInFlightAgeMs >= 0 {
			s.OldestInFlight = time.Duration(q.OldestInFlightAgeMs) * time.Millisecond
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y PopQueueStatus) int { return compareQueues(x.Queue, y.Queue) })
	return out, nil
}
