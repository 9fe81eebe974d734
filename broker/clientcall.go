package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// clientCallTimeout bounds a request the broker relays to a consumer
// (Java's callClient uses 10 s).
const clientCallTimeout = 10 * time.Second

// handleConsumerRunningInfo serves GET_CONSUMER_RUNNING_INFO (307) from an
// admin tool: the broker asks the consumer named clientId on its own
// connection and relays the answer.
func (b *Broker) handleConsumerRunningInfo(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetConsumerRunningInfoRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	b.callConsumer(ctx, w, req, h.ConsumerGroup, h.ClientID, protocol.Ext(&h), nil)
}

// handleConsumeMessageDirectly serves CONSUME_MESSAGE_DIRECTLY (309) from
// an admin tool: the broker reads the message the offset msgId names and
// sends it to the consumer named clientId, whose handler consumes it
// outside its queues; the consumer's result is relayed.
func (b *Broker) handleConsumeMessageDirectly(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.ConsumeMessageDirectlyRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	if h.ClientID == "" {
		reply(w, req, protocol.SystemError, "CONSUME_MESSAGE_DIRECTLY needs clientId: the consumer to hand the message to")
		return
	}
	host, off, err := message.ParseOffsetMsgID(h.MsgID)
	if err != nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("msgId %q is not an offset message id: %v", h.MsgID, err))
		return
	}
	if host != b.storeHost {
		reply(w, req, protocol.SystemError, fmt.Sprintf("message %s was stored by the broker at %s; broker %s stores as %s",
			h.MsgID, host, b.cfg.BrokerName, b.storeHost))
		return
	}
	rec, err := b.store.ReadMessage(off)
	if err != nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("no message at offset %d on broker %s: %v", off, b.cfg.BrokerName, err))
		return
	}
	h.BrokerName = b.cfg.BrokerName
	b.callConsumer(ctx, w, req, h.ConsumerGroup, h.ClientID, protocol.Ext(&h), rec)
}

// callConsumer sends req's code with ext and body to the consumer clientID
// of group and answers req with the consumer's answer.
func (b *Broker) callConsumer(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command, group, clientID string,
	ext map[string]string, body []byte) {
	var conn *remoting.Conn
	for _, m := range b.groups.Consumers(group) {
		if m.ClientID == clientID {
			conn = b.conn(m.ConnID)
			break
		}
	}
	if conn == nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("consumer %s of group %s is not online on broker %s",
			clientID, group, b.cfg.BrokerName))
		return
	}
	out := remoting.NewRequest(req.Code, ext, body)
	out.Language = protocol.LanguageJava
	cctx, cancel := context.WithTimeout(ctx, clientCallTimeout)
	defer cancel()
	resp, err := conn.Invoke(cctx, out)
	if err != nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("consumer %s of group %s did not answer %s: %v",
			clientID, group, protocol.CodeName(req.Code), err))
		return
	}
	relayed := remoting.NewResponse(req, resp.Code, resp.Remark)
	relayed.Body = resp.Body
	_ = w.Write(relayed)
}
