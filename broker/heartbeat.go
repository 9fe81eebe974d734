package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/broker/group"
	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Heartbeats and the consumer registry: who is in a group, and telling
// the members when that changes (spec 3.3).

// handleHeartbeat serves HEART_BEAT (34): registers producers and consumers
// with their subscriptions, creates %RETRY% topics, and tells a group to
// rebalance when its membership or subscriptions changed (spec 3.3).
func (b *Broker) handleHeartbeat(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var hb protocol.HeartbeatData
	if err := decodeBody(req, &hb); err != nil {
		reply(w, req, protocol.SystemError, "bad heartbeat body: "+err.Error())
		return
	}
	if hb.ClientID == "" {
		reply(w, req, protocol.SystemError, "heartbeat without clientID")
		return
	}
	var connID uint64
	var addr string
	warn := b.logger.Warn
	if c := w.Conn(); c != nil {
		connID, addr = c.ID(), c.RemoteAddr().String()
		// NB: a client heartbeats a refused subscription every 30 s, and
		// a hostile one as often as it likes: a line per address a minute.
		warn = func(msg string, args ...any) { c.WarnPeer("subscription_refused", msg, args...) }
	}
	now := time.Now()
	var refused *subscriptionError
consumers:
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		subs := make(map[string]group.Subscription, len(cd.SubscriptionDataSet))
		for _, sd := range cd.SubscriptionDataSet {
			s, err := b.parseSubscription(cd.GroupName, sd.Topic, sd.ExpressionType, sd.SubString)
			if err != nil {
				// NB: the group is not registered with a filter it
				// cannot apply; its pulls get SUBSCRIPTION_NOT_EXIST.
				warn("broker: subscription refused", "remote", addr, "group", clip(cd.GroupName), "client", clip(hb.ClientID),
					"topic", clip(sd.Topic), "type", clip(sd.ExpressionType), "expression", clip(sd.SubString), "err", clip(err.remark))
				b.stats.subsRefused.Add(1)
				refused = err
				continue consumers
			}
			s.SubVersion = sd.SubVersion
			subs[sd.Topic] = s
		}
		if _, err := b.groupCfgs.Ensure(cd.GroupName); err != nil {
			b.logger.Warn("broker: create subscription group", "group", cd.GroupName, "err", err)
		}
		if _, err := b.ensureTopic(topic.RetryPrefix+cd.GroupName, 1); err != nil {
			b.logger.Warn("broker: create retry topic", "group", cd.GroupName, "err", err)
		}
		changed := b.groups.Register(cd.GroupName, group.Consumer{ClientID: hb.ClientID, ConnID: connID,
			MessageModel: cd.MessageModel, ConsumeType: cd.ConsumeType, ConsumeFromWhere: cd.ConsumeFromWhere,
			Subs: subs, LastSeen: now, Addr: addr, Language: req.Language.String(), Version: int32(req.Version)})
		if changed {
			b.consumersChanged(cd.GroupName)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if pd.GroupName != "" {
			b.groups.RegisterProducerSDK(pd.GroupName, hb.ClientID, connID, now, req.Language.String(), int32(req.Version))
		}
	}
	// A client that shuts down right after a heartbeat (the Go client
	// heartbeats on every rebalance) can close the connection before the
	// heartbeat is handled. If the connection is already gone, its cleanup
	// ran before the registration above, which would then linger as a live
	// member until expiry and get queues assigned: undo it. (Cleanup that
	// runs later drops it itself.)
	if connID != 0 && b.conn(connID) == nil {
		for _, g := range b.groups.DropConn(connID) {
			b.consumersChanged(g)
		}
	}
	if refused != nil {
		reply(w, req, refused.code, refused.remark)
		return
	}
	reply(w, req, protocol.Success, "")
}

// handleUnregisterClient serves UNREGISTER_CLIENT (35).
func (b *Broker) handleUnregisterClient(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.UnregisterClientRequestHeader
	if !decodeHeader(w, req, &h, "bad unregister header") {
		return
	}
	if h.ConsumerGroup != "" && b.groups.Unregister(h.ConsumerGroup, h.ClientID) {
		b.consumersChanged(h.ConsumerGroup)
	}
	reply(w, req, protocol.Success, "")
}

// handleConsumerList serves GET_CONSUMER_LIST_BY_GROUP (38).
func (b *Broker) handleConsumerList(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetConsumerListByGroupRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	ids := b.groups.ConsumerIDs(h.ConsumerGroup)
	if len(ids) == 0 {
		reply(w, req, protocol.SystemError, fmt.Sprintf("no consumer for group %s on broker %s", h.ConsumerGroup, b.cfg.BrokerName))
		return
	}
	b.replyBody(w, req, protocol.ConsumerList{ConsumerIDList: ids})
}

// clipLen bounds a value a peer sent in a log line.
const clipLen = 256

// clip returns s, or its first clipLen bytes and how long it was: a
// heartbeat's expression can be megabytes, and each heartbeat logs it.
func clip(s string) string {
	if len(s) <= clipLen {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(s[:clipLen], ""), len(s))
}
