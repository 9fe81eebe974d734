package broker

import (
	"context"
	"fmt"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/broker/group"
	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// How a v5 consumer shows in GET_CONSUMER_CONNECTION_LIST, as the Java
// proxy registers it: a SimpleConsumer pulls (CONSUME_ACTIVELY), a
// PushConsumer is pushed to; both consume as a cluster.
const (
	v5MessageModel     = "CLUSTERING"
	v5ConsumeFromWhere = "CONSUME_FROM_LAST_OFFSET"
)

// v5Server is the gRPC service once Start has set it up; nil before, or
// when the broker serves none. NB: started orders the read after Start's
// write of b.v5 (admin and metrics requests are served before that).
func (b *Broker) v5Server() *v5.Server {
	if !b.started.Load() {
		return nil
	}
	return b.v5
}

// v5Consumers adds group's live v5 consumers to cc (the list, and their
// subscriptions to the table) and returns how many there were. The group's
// consume type, model and start are the first v5 client's when no 4.x
// client set them.
func (b *Broker) v5Consumers(cc *protocol.ConsumerConnection, groupName string) int {
	s := b.v5Server()
	if s == nil {
		return 0
	}
	cs := s.ConsumerClients(groupName)
	for _, c := range cs {
		if cc.ConsumeType == "" {
			cc.ConsumeType = "CONSUME_ACTIVELY"
			if c.Type == v2.ClientType_PUSH_CONSUMER {
				cc.ConsumeType = "CONSUME_PASSIVELY"
			}
			cc.MessageModel, cc.ConsumeFromWhere = v5MessageModel, v5ConsumeFromWhere
		}
		subs, types := map[string]string{}, map[string]string{}
		for _, sub := range c.Subs {
			subs[sub.Topic], types[sub.Topic] = sub.Expression, sub.Type
			if _, ok := cc.SubscriptionTable[sub.Topic]; !ok {
				sd := protocol.SubscriptionData{Topic: sub.Topic, SubString: sub.Expression, ExpressionType: sub.Type}
				if p, err := group.Parse(sub.Topic, sub.Type, sub.Expression); err == nil && sub.Type == group.TypeTag {
					sd.TagsSet = p.Tags
				}
				cc.SubscriptionTable[sub.Topic] = sd
			}
		}
		cc.ConnectionSet = append(cc.ConnectionSet, protocol.Connection{ClientID: c.ID, ClientAddr: c.Addr,
			Language: c.Language, Version: c.Version, Subscriptions: subs, ExpressionTypes: types})
	}
	return len(cs)
}

// handleProducerConnections serves GET_PRODUCER_CONNECTION_LIST (204): the
// producer group's live clients, 4.x (registered by their heartbeats) and
// v5 (listed under each topic they publish, as the Java proxy registers
// them). A group with none is SYSTEM_ERROR, as Java answers.
func (b *Broker) handleProducerConnections(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetProducerConnectionListRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	pc := protocol.ProducerConnection{ConnectionSet: []protocol.Connection{}}
	for _, p := range b.groups.Producers(h.ProducerGroup) {
		c := protocol.Connection{ClientID: p.ClientID, Language: p.Language, Version: p.Version}
		if conn := b.conn(p.ConnID); conn != nil {
			c.ClientAddr = conn.RemoteAddr().String()
		}
		pc.ConnectionSet = append(pc.ConnectionSet, c)
	}
	if s := b.v5Server(); s != nil {
		for _, c := range s.ProducerClients(h.ProducerGroup) {
			pc.ConnectionSet = append(pc.ConnectionSet, protocol.Connection{ClientID: c.ID, ClientAddr: c.Addr,
				Language: c.Language, Version: c.Version})
		}
	}
	if len(pc.ConnectionSet) == 0 {
		reply(w, req, protocol.SystemError, fmt.Sprintf("producer group %s has no live client on broker %s", h.ProducerGroup, b.cfg.BrokerName))
		return
	}
	b.replyBody(w, req, pc)
}

var descClients = prometheus.NewDesc("sluice_clients",
	"Live clients by role (consumer, producer) and protocol (remoting: 4.x clients by their heartbeats; grpc: RocketMQ 5 clients by their settings and heartbeats). A client in several groups counts once.",
	[]string{"role", "protocol"}, nil)

// collectClients exports the client counts.
func (b *Broker) collectClients(ch chan<- prometheus.Metric) {
	gauge := func(v int, role, proto string) {
		ch <- prometheus.MustNewConstMetric(descClients, prometheus.GaugeValue, float64(v), role, proto)
	}
	consumers, producers := b.groups.ClientCounts()
	gauge(consumers, "consumer", "remoting")
	gauge(producers, "producer", "remoting")
	consumers, producers = 0, 0
	if s := b.v5Server(); s != nil {
		for _, c := range s.ListClients() {
			switch {
			case c.IsConsumer():
				consumers++
			case c.IsProducer():
				producers++
			}
		}
	}
	gauge(consumers, "consumer", "grpc")
	gauge(producers, "producer", "grpc")
}
