package v5

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/protocol"
)

// acceptTypes maps a topic's message.type attribute to the types its
// queues take; unset or MIXED takes them all.
func acceptTypes(attr string) []v2.MessageType {
	switch strings.ToUpper(attr) {
	case "NORMAL":
		return []v2.MessageType{v2.MessageType_NORMAL}
	case "FIFO":
		return []v2.MessageType{v2.MessageType_FIFO}
	case "DELAY":
		return []v2.MessageType{v2.MessageType_DELAY}
	case "TRANSACTION":
		return []v2.MessageType{v2.MessageType_TRANSACTION}
	}
	return []v2.MessageType{v2.MessageType_NORMAL, v2.MessageType_FIFO, v2.MessageType_DELAY, v2.MessageType_TRANSACTION}
}

// kindOf is a message's type as a topic's message.type names it: what
// its system properties make it (a valid message: see toMessage).
func kindOf(m *v2.Message) string {
	sp := m.GetSystemProperties()
	switch {
	case sp.GetMessageType() == v2.MessageType_TRANSACTION:
		return "TRANSACTION"
	case sp.MessageGroup != nil:
		return "FIFO"
	case sp.DeliveryTimestamp != nil:
		return "DELAY"
	}
	return "NORMAL"
}

// refuseType is the status of a message whose type its topic's
// message.type does not take (RocketMQ's proxy: TopicMessageType validate
// failed), nil when the topic takes it.
func (s *Server) refuseType(m *v2.Message) *v2.Status {
	name := m.GetTopic().GetName()
	want := strings.ToUpper(s.backend.MessageType(name))
	if want == "" || want == "MIXED" {
		return nil
	}
	if got := kindOf(m); got != want {
		return status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "topic "+name+" takes "+want+
			" messages only (its message.type attribute), this one is "+got+
			": send it to another topic, or change the topic with mqadmin updateTopic -a +message.type=MIXED")
	}
	return nil
}

// endpoints turns "host:port" into v5 Endpoints.
func endpoints(addr string) (*v2.Endpoints, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, false
	}
	scheme := v2.AddressScheme_DOMAIN_NAME
	if ip, err := netip.ParseAddr(host); err == nil {
		scheme = v2.AddressScheme_IPv4
		if ip.Is6() && !ip.Is4In6() {
			scheme = v2.AddressScheme_IPv6
		}
	}
	return &v2.Endpoints{Scheme: scheme, Addresses: []*v2.Address{{Host: host, Port: int32(p)}}}, true
}

// queuePerm is a queue id's v5 permission: readable below the read count,
// writable below the write count, as the topic's permission allows.
func queuePerm(id int32, b RouteBroker) v2.Permission {
	r := id < b.ReadQueues && b.Perm&protocol.PermRead != 0
	w := id < b.WriteQueues && b.Perm&protocol.PermWrite != 0
	switch {
	case r && w:
		return v2.Permission_READ_WRITE
	case r:
		return v2.Permission_READ
	case w:
		return v2.Permission_WRITE
	}
	return v2.Permission_NONE
}

// QueryRoute answers a topic's queues: master entries only, ids from 0,
// each with its master's gRPC endpoint.
func (s *Server) QueryRoute(ctx context.Context, req *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	if _, st := s.check(ctx, "QueryRoute"); st != nil {
		return &v2.QueryRouteResponse{Status: st}, nil
	}
	name := req.GetTopic().GetName()
	if err := topic.ValidateName(name); err != nil {
		return &v2.QueryRouteResponse{Status: status(v2.Code_ILLEGAL_TOPIC, "topic: "+err.Error())}, nil
	}
	brokers, err := s.backend.Route(ctx, name)
	switch {
	case errors.Is(err, ErrTopicNotFound):
		return &v2.QueryRouteResponse{Status: status(v2.Code_TOPIC_NOT_FOUND,
			"topic "+name+" does not exist: create it with mqadmin updateTopic")}, nil
	case err != nil:
		return &v2.QueryRouteResponse{Status: status(v2.Code_INTERNAL_SERVER_ERROR, "route of "+name+": "+err.Error())}, nil
	}
	types := acceptTypes(s.backend.MessageType(name))
	res := &v2.Resource{Name: name, ResourceNamespace: req.GetTopic().GetResourceNamespace()}
	var mqs []*v2.MessageQueue
	for _, b := range brokers {
		ep, ok := endpoints(b.GrpcAddr)
		if !ok {
			continue
		}
		broker := &v2.Broker{Name: b.Name, Id: 0, Endpoints: ep}
		for id := range max(b.ReadQueues, b.WriteQueues) {
			mqs = append(mqs, &v2.MessageQueue{Topic: res, Id: id, Permission: queuePerm(id, b), Broker: broker,
				AcceptMessageTypes: types})
		}
	}
	if len(mqs) == 0 {
		return &v2.QueryRouteResponse{Status: status(v2.Code_NOT_FOUND,
			"no master of topic "+name+"'s brokers serves RocketMQ 5 clients (grpc.listen)")}, nil
	}
	return &v2.QueryRouteResponse{Status: okStatus(), MessageQueues: mqs}, nil
}
