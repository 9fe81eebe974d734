package v5

import (
	"context"
	"errors"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/protocol"
)

// QueryAssignment answers where a PushConsumer receives a topic from, out
// of the same route QueryRoute answers: for a group that is not orderly
// one assignment per readable master (message queue id -1: a receive
// there takes any of its queues), for an orderly (FIFO) group one per
// read queue of each readable master; none is FORBIDDEN "no readable
// queue" (RocketMQ's proxy).
func (s *Server) QueryAssignment(ctx context.Context, req *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	group, name := req.GetGroup().GetName(), req.GetTopic().GetName()
	if _, st := s.check(ctx, "QueryAssignment", acl.Resource{Name: name, Need: acl.Sub},
		acl.Resource{Name: acl.RetryPrefix + group, Need: acl.Sub}); st != nil {
		return &v2.QueryAssignmentResponse{Status: st}, nil
	}
	if err := topic.ValidateName(group); err != nil {
		return &v2.QueryAssignmentResponse{Status: status(v2.Code_ILLEGAL_CONSUMER_GROUP, "group: "+err.Error())}, nil
	}
	if err := topic.ValidateName(name); err != nil {
		return &v2.QueryAssignmentResponse{Status: status(v2.Code_ILLEGAL_TOPIC, "topic: "+err.Error())}, nil
	}
	brokers, err := s.backend.Route(ctx, name)
	switch {
	case errors.Is(err, ErrTopicNotFound):
		return &v2.QueryAssignmentResponse{Status: status(v2.Code_TOPIC_NOT_FOUND,
			"topic "+name+" does not exist: create it with mqadmin updateTopic")}, nil
	case err != nil:
		return &v2.QueryAssignmentResponse{Status: status(v2.Code_INTERNAL_SERVER_ERROR, "route of "+name+": "+err.Error())}, nil
	}
	orderly := s.backend.Group(group).Orderly
	types := acceptTypes(s.backend.MessageType(name))
	res := &v2.Resource{Name: name, ResourceNamespace: req.GetTopic().GetResourceNamespace()}
	var out []*v2.Assignment
	for _, b := range brokers {
		if b.Perm&protocol.PermRead == 0 || b.ReadQueues <= 0 {
			continue
		}
		ep, ok := endpoints(b.GrpcAddr)
		if !ok {
			continue
		}
		broker := &v2.Broker{Name: b.Name, Id: 0, Endpoints: ep}
		if !orderly {
			perm := v2.Permission_READ
			if b.Perm&protocol.PermWrite != 0 && b.WriteQueues > 0 {
				perm = v2.Permission_READ_WRITE
			}
			out = append(out, &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: res, Id: -1, Permission: perm,
				Broker: broker, AcceptMessageTypes: types}})
			continue
		}
		for id := range b.ReadQueues {
			out = append(out, &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: res, Id: id, Permission: queuePerm(id, b),
				Broker: broker, AcceptMessageTypes: types}})
		}
	}
	if len(out) == 0 {
		return &v2.QueryAssignmentResponse{Status: status(v2.Code_FORBIDDEN,
			"no readable queue of topic "+name+" on a master serving RocketMQ 5 clients (its permission, read queues, grpc.listen)")}, nil
	}
	return &v2.QueryAssignmentResponse{Status: okStatus(), Assignments: out}, nil
}

// ForwardMessageToDeadLetterQueue stores a received message in its
// group's dead-letter topic (%DLQ%group) and acks it: a FIFO
// PushConsumer's last step after its local retries. The dead letter's
// reconsume times are the broker's deliveries of the message less one;
// the request's delivery_attempt (which counts the client's local
// retries too) is not added to them: the broker's count is the one
// delivery_attempt shows on every delivery.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *v2.ForwardMessageToDeadLetterQueueRequest) (*v2.ForwardMessageToDeadLetterQueueResponse, error) {
	dl, ok := s.backend.(DeadLetterer)
	if !ok {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: status(v2.Code_NOT_IMPLEMENTED, "this broker does not serve POP consumption")}, nil
	}
	group, name := req.GetGroup().GetName(), req.GetTopic().GetName()
	if _, st := s.check(ctx, "ForwardMessageToDeadLetterQueue", acl.Resource{Name: name, Need: acl.Sub},
		acl.Resource{Name: acl.RetryPrefix + group, Need: acl.Sub}); st != nil {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: st}, nil
	}
	if err := topic.ValidateName(group); err != nil {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: status(v2.Code_ILLEGAL_CONSUMER_GROUP, "group: "+err.Error())}, nil
	}
	if req.GetReceiptHandle() == "" {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: status(v2.Code_INVALID_RECEIPT_HANDLE, "receipt_handle is empty")}, nil
	}
	st := dl.DeadLetter(ctx, group, name, req.GetReceiptHandle())
	if st == nil || st.GetCode() == v2.Code_OK {
		s.renew.forget(group, req.GetReceiptHandle())
		st = okStatus()
	}
	return &v2.ForwardMessageToDeadLetterQueueResponse{Status: st}, nil
}
