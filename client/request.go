package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Request-reply (RocketMQ 4.6+): a requester's message carries a
// correlation id and the requester's client id; a consumer answers it with
// NewReply, sent with any Producer to the cluster's reply topic; the
// broker that gets the reply pushes it to the requester's connection
// (PUSH_REPLY_MESSAGE_TO_CLIENT), where Request is waiting for it.

// ErrNoReply is returned by Request when no reply came before its
// deadline (or the request's TTL).
var ErrNoReply = errors.New("client: no reply to the request")

// defaultRequestTTL bounds a Request whose context has no deadline.
const defaultRequestTTL = 3 * time.Second

// Request sends m and waits for a consumer's reply to it (see NewReply),
// until ctx ends; without a deadline, for 3 s. The deadline is also the
// request's TTL, in whole seconds (at least one), as the official client
// sets it. The reply carries the replier's body and properties; its
// ARRIVE_TIME property is when it reached this client (unix ms).
func (p *Producer) Request(ctx context.Context, m *Message) (*Message, error) {
	if err := p.checkStarted(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, invalidMessage("nil message")
	}
	ttl := defaultRequestTTL
	if d, ok := ctx.Deadline(); ok {
		ttl = time.Until(d)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ttl)
		defer cancel()
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: %w", ErrNoReply, context.DeadlineExceeded)
	}
	c := p.core
	if err := c.ensureReplyRoutes(ctx, m.Topic); err != nil {
		return nil, err
	}
	id := c.ids.Next()
	req := m.cloneWith(message.PropCorrelationID, id, message.PropReplyToClient, c.id,
		message.PropTTL, strconv.Itoa(max(int(ttl/time.Second), 1)))
	ch := c.expectReply(id)
	defer c.dropReply(id)
	if _, err := p.Send(ctx, req); err != nil {
		return nil, fmt.Errorf("client: request to %s not sent: %w", m.Topic, err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: correlation id %s, topic %s: %w", ErrNoReply, id, m.Topic, ctx.Err())
	case <-c.quit:
		return nil, ErrClosed
	}
}

// NewReply returns the reply to request (a message delivered to a
// consumer, sent with Request): send it with any started Producer. body is
// the reply's body; the reply goes to the requester's cluster's reply
// topic, with the correlation id, requester and TTL of the request.
func NewReply(request *Message, body []byte) (*Message, error) {
	if request == nil {
		return nil, invalidMessage("nil request")
	}
	props := request.Properties
	cluster, corr, to := props[message.PropCluster], props[message.PropCorrelationID], props[message.PropReplyToClient]
	if cluster == "" || corr == "" || to == "" {
		return nil, invalidMessage("message %s is not a request: it lacks CLUSTER, CORRELATION_ID or REPLY_TO_CLIENT", request.MsgID)
	}
	reply := &Message{Topic: protocol.ReplyTopic(cluster), Body: body, Properties: map[string]string{
		message.PropMsgType: replyMsgType, message.PropCorrelationID: corr, message.PropReplyToClient: to,
	}}
	if ttl := props[message.PropTTL]; ttl != "" {
		reply.Properties[message.PropTTL] = ttl
	}
	return reply, nil
}

// replyMsgType is MSG_TYPE of a reply: sent as SEND_REPLY_MESSAGE_V2.
const replyMsgType = "reply"

// ensureReplyRoutes makes sure this client talks to every broker a reply
// to a request on topic can come from (the reply topics of topic's
// clusters, on all their brokers), and that they know it as a producer:
// a reply is pushed on the requester's own connection. A reply topic
// counts as done once a heartbeat to its brokers went through; until then
// every Request tries again.
func (c *core) ensureReplyRoutes(ctx context.Context, topic string) error {
	r, err := c.routes.get(ctx, topic)
	if err != nil {
		return err
	}
	var todo []string
	c.mu.Lock()
	for _, b := range r.data.BrokerDatas {
		if t := protocol.ReplyTopic(b.Cluster); b.Cluster != "" && !c.replyReady[t] && !slices.Contains(todo, t) {
			todo = append(todo, t)
		}
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	for _, t := range todo {
		if _, err := c.routes.get(ctx, t); err != nil {
			return fmt.Errorf("client: route of the reply topic %s: %w", t, err)
		}
	}
	// NB: only the brokers a reply can come from: one down elsewhere must
	// not make every request heartbeat again.
	if err := c.heartbeatTo(ctx, c.routes.addrsOf(todo, false)); err != nil {
		// NB: the request goes on (the reply may come through another
		// broker of the cluster), and the next one heartbeats again.
		c.log.Warn("client: heartbeat before a request", "err", err)
		return nil
	}
	c.mu.Lock()
	for _, t := range todo {
		c.replyReady[t] = true
	}
	c.mu.Unlock()
	return nil
}

// expectReply registers a request's correlation id and returns the
// channel its reply arrives on.
func (c *core) expectReply(id string) chan *Message {
	ch := make(chan *Message, 1)
	c.mu.Lock()
	c.replies[id] = ch
	c.mu.Unlock()
	return ch
}

func (c *core) dropReply(id string) {
	c.mu.Lock()
	delete(c.replies, id)
	c.mu.Unlock()
}

// onReply serves PUSH_REPLY_MESSAGE_TO_CLIENT: the reply goes to the
// Request waiting for its correlation id; one nobody waits for (late, or
// for another process) is dropped.
func (c *core) onReply(req *remoting.Command) *remoting.Command {
	var h protocol.ReplyMessageRequestHeader
	if err := h.FromExt(req.ExtMap()); err != nil {
		return remoting.NewResponse(req, protocol.SystemError, "client: bad PUSH_REPLY_MESSAGE_TO_CLIENT header: "+err.Error())
	}
	body := req.Body
	if h.SysFlag&message.FlagCompressed != 0 {
		b, err := message.Decompress(body, c.cfg.maxBodySize)
		if err != nil {
			return remoting.NewResponse(req, protocol.SystemError, "client: reply body: "+err.Error())
		}
		body = b
	}
	props := message.ParseProperties(h.Properties)
	props[message.PropArriveTime] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	m := &Message{Topic: h.Topic, Body: body, Flag: h.Flag, Properties: props, Tags: props[message.PropTags],
		MsgID: props[message.PropUniqKey], Queue: MessageQueue{Topic: h.Topic, QueueID: int(h.QueueID)},
		ReconsumeTimes: int(h.ReconsumeTimes), BornTimestamp: time.UnixMilli(h.BornTimestamp),
		StoreTimestamp: time.UnixMilli(h.StoreTimestamp), BornHost: h.BornHost, StoreHost: h.StoreHost}
	corr := props[message.PropCorrelationID]
	c.mu.Lock()
	ch := c.replies[corr]
	delete(c.replies, corr)
	c.mu.Unlock()
	if ch == nil {
		// NB: refused, so that a broker holding several connections of
		// this client id (producers of one process share it) tries the
		// next one, and a replier learns of a late or duplicate reply.
		c.log.Debug("client: reply nobody waits for", "correlation_id", corr, "from", h.BornHost)
		return remoting.NewResponse(req, protocol.SystemError,
			fmt.Sprintf("client: no request of this producer waits for correlation id %s (late or duplicate reply)", corr))
	}
	ch <- m
	return remoting.NewResponse(req, protocol.Success, "")
}
