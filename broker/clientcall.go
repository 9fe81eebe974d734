package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/group"
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
		reply(w, req, storeErrCode(err), fmt.Sprintf("no message at offset %d on broker %s: %v", off, b.cfg.BrokerName, err))
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
	resp, err := askClient(ctx, conn, req.Code, ext, body, clientCallTimeout)
	if err != nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("consumer %s of group %s did not answer %s: %v",
			clientID, group, protocol.CodeName(req.Code), err))
		return
	}
	relayed := remoting.NewResponse(req, resp.Code, resp.Remark)
	relayed.Body = resp.Body
	_ = w.Write(relayed)
}

// askClient sends a request to a client's connection and waits at most
// timeout for its answer.
func askClient(ctx context.Context, conn *remoting.Conn, code int16, ext map[string]string, body []byte,
	timeout time.Duration) (*remoting.Command, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return conn.Invoke(cctx, clientRequest(code, ext, body))
}

// tellClient sends a oneway request to a client's connection, waiting at
// most 3 s for the write.
func tellClient(conn *remoting.Conn, code int16, ext map[string]string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := conn.Invoke(ctx, clientRequest(code, ext, body), remoting.Oneway())
	return err
}

// clientRequest is a request from the broker to a client.
func clientRequest(code int16, ext map[string]string, body []byte) *remoting.Command {
	out := remoting.NewRequest(code, ext, body)
	out.Language = protocol.LanguageJava // NB: as a Java broker's; the Go client decodes no other name
	return out
}

// handleGetConsumerStatus serves INVOKE_BROKER_TO_GET_CONSUMER_STATUS
// (223) from an admin tool: the broker asks every live client of the group
// (or the one clientAddr names, by client id) for its offsets of the topic
// (GET_CONSUMER_STATUS_FROM_CLIENT, all at once) and answers with them by
// client id. Clients that fail are left out and named in the remark.
func (b *Broker) handleGetConsumerStatus(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetConsumerStatusRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	type answer struct {
		id      string
		offsets map[protocol.MessageQueue]int64
		err     error
	}
	var asked []group.Consumer
	for _, m := range b.groups.Consumers(h.Group) {
		if h.ClientAddr == "" || h.ClientAddr == m.ClientID {
			asked = append(asked, m)
		}
	}
	if len(asked) == 0 {
		who := "client"
		if h.ClientAddr != "" {
			who += " " + h.ClientAddr
		}
		reply(w, req, protocol.SystemError, fmt.Sprintf("consumer group %s has no live %s on broker %s", h.Group, who, b.cfg.BrokerName))
		return
	}
	answers := make([]answer, len(asked))
	var wg sync.WaitGroup
	for i, m := range asked {
		answers[i].id = m.ClientID
		conn := b.conn(m.ConnID)
		if conn == nil {
			answers[i].err = errors.New("connection gone")
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ext := protocol.Ext(&protocol.GetConsumerStatusRequestHeader{Topic: h.Topic, Group: h.Group, ClientAddr: m.Addr})
			resp, err := askClient(ctx, conn, protocol.GetConsumerStatusFromClient, ext, nil, clientCallTimeout)
			switch {
			case err != nil:
			case resp.Code != protocol.Success:
				err = fmt.Errorf("%s: %s", protocol.ResponseCodeName(resp.Code), resp.Remark)
			default:
				var st protocol.ConsumerStatusBody
				if st, err = protocol.DecodeConsumerStatusBody(resp.Body); err == nil {
					answers[i].offsets = st.MessageQueueTable
				}
			}
			answers[i].err = err
		}()
	}
	wg.Wait()
	out := protocol.GetConsumerStatusBody{ConsumerTable: map[string]map[protocol.MessageQueue]int64{}}
	var failed []string
	for _, a := range answers {
		if a.err != nil {
			failed = append(failed, a.id+": "+a.err.Error())
			continue
		}
		out.ConsumerTable[a.id] = a.offsets
	}
	if len(out.ConsumerTable) == 0 {
		reply(w, req, protocol.SystemError, "no client of group "+h.Group+" answered: "+strings.Join(failed, "; "))
		return
	}
	body, err := out.Encode()
	if err != nil {
		reply(w, req, protocol.SystemError, "broker: consumer status: "+err.Error())
		return
	}
	remark := ""
	if len(failed) > 0 {
		remark = "not answered: " + strings.Join(failed, "; ")
	}
	resp := remoting.NewResponse(req, protocol.Success, remark)
	resp.Body = body
	_ = w.Write(resp)
}

// pushReplyTimeout bounds a reply's push to its requester: below a
// replier's send timeout (3 s by default), so that the replier learns the
// outcome of its attempt.
const pushReplyTimeout = 2 * time.Second

// pushReply hands a reply message (SEND_REPLY_MESSAGE, request-reply) to
// the client its REPLY_TO_CLIENT names, on that client's connection
// (PUSH_REPLY_MESSAGE_TO_CLIENT): the requester registered as a producer
// with this broker. Several connections can carry one client id (producers
// of one process share it unless named apart): the reply goes to each, the
// most recent first, until one takes it (a Sluice client refuses a reply
// no request of its waits for). It returns SUCCESS, or a code and remark
// for the replier. m gets PUSH_REPLY_TIME.
func (b *Broker) pushReply(ctx context.Context, w remoting.ResponseWriter, m *message.Message, h protocol.SendMessageRequestHeader) (int16, string) {
	to, _ := message.PropertyValue(m.Properties, message.PropReplyToClient)
	if to == "" {
		return protocol.MessageIllegal, "a reply message needs the property REPLY_TO_CLIENT: the requester's client id"
	}
	now := time.Now().UnixMilli()
	props, err := message.SetProperty(m.Properties, message.PropPushReplyTime, strconv.FormatInt(now, 10))
	if err != nil {
		return protocol.MessageIllegal, "reply properties: " + err.Error()
	}
	m.Properties = props
	rh := &protocol.ReplyMessageRequestHeader{ProducerGroup: h.ProducerGroup, Topic: m.Topic, DefaultTopic: h.DefaultTopic,
		DefaultTopicQueueNums: h.DefaultTopicQueueNums, QueueID: m.QueueID, SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp,
		Flag: m.Flag, Properties: props, ReconsumeTimes: m.ReconsumeTimes, BornHost: peerAddr(w).String(),
		StoreHost: b.storeHost.String(), StoreTimestamp: now}
	ext := protocol.Ext(rh)
	var refused []string
	// NB: one bound for all the connections tried.
	ctx, cancel := context.WithTimeout(ctx, pushReplyTimeout)
	defer cancel()
	for _, id := range b.groups.ClientProducerConns(to) {
		conn := b.conn(id)
		if conn == nil {
			continue
		}
		resp, err := askClient(ctx, conn, protocol.PushReplyMessageToClient, ext, m.Body, pushReplyTimeout)
		if ctx.Err() != nil && err != nil {
			refused = append(refused, err.Error())
			break
		}
		switch {
		case err != nil:
			refused = append(refused, err.Error())
		case resp.Code != protocol.Success:
			refused = append(refused, protocol.ResponseCodeName(resp.Code)+": "+resp.Remark)
		default:
			return protocol.Success, ""
		}
	}
	if len(refused) == 0 {
		return protocol.SystemError, fmt.Sprintf("push reply message failed: requester %s is not connected to broker %s",
			to, b.cfg.BrokerName)
	}
	return protocol.SystemError, fmt.Sprintf("push reply message to %s failed: %s", to, strings.Join(refused, "; "))
}
