package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/broker/group"
	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// handleHeartbeat serves HEART_BEAT (34): registers producers and consumers
// with their subscriptions, creates %RETRY% topics, and tells a group to
// rebalance when its membership or subscriptions changed (spec 3.3).
func (b *Broker) handleHeartbeat(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var hb protocol.HeartbeatData
	if err := remoting.DecodeBody(req.SerializeType, req.Body, &hb); err != nil {
		reply(w, req, protocol.SystemError, "bad heartbeat body: "+err.Error())
		return
	}
	if hb.ClientID == "" {
		reply(w, req, protocol.SystemError, "heartbeat without clientID")
		return
	}
	var connID uint64
	var addr string
	if c := w.Conn(); c != nil {
		connID, addr = c.ID(), c.RemoteAddr().String()
	}
	now := time.Now()
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		subs := make(map[string]group.Subscription, len(cd.SubscriptionDataSet))
		for _, sd := range cd.SubscriptionDataSet {
			s := group.ParseSubscription(sd.Topic, sd.SubString)
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
			g := cd.GroupName
			go b.notifyConsumerIDsChanged(g)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if pd.GroupName != "" {
			b.groups.RegisterProducer(pd.GroupName, hb.ClientID, connID, now)
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
			go b.notifyConsumerIDsChanged(g)
		}
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
		go b.notifyConsumerIDsChanged(h.ConsumerGroup)
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

// replyBody answers SUCCESS with v encoded in the request's codec family.
func (b *Broker) replyBody(w remoting.ResponseWriter, req *remoting.Command, v any) {
	body, err := remoting.EncodeBody(req.SerializeType, v)
	if err != nil {
		reply(w, req, protocol.SystemError, "broker: encode response: "+err.Error())
		return
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.Body = body
	_ = w.Write(resp)
}

// replyExt answers SUCCESS with a typed ext header.
func replyExt(w remoting.ResponseWriter, req *remoting.Command, h interface{ ToExt(map[string]string) }) {
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(h)
	_ = w.Write(resp)
}

// handleQueryOffset serves QUERY_CONSUMER_OFFSET (14): a stored offset, or
// 0 for a queue that still starts at 0, else QUERY_NOT_FOUND (spec 3.6).
func (b *Broker) handleQueryOffset(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.QueryConsumerOffsetRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	off, ok := b.offsets.Query(h.ConsumerGroup, h.Topic, h.QueueID)
	if !ok {
		if b.store.MinOffset(h.Topic, h.QueueID) != 0 {
			reply(w, req, protocol.QueryNotFound, fmt.Sprintf("no offset stored for group %s on %s/%d", h.ConsumerGroup, h.Topic, h.QueueID))
			return
		}
		off = 0
	}
	replyExt(w, req, &protocol.QueryConsumerOffsetResponseHeader{Offset: off})
}

// handleUpdateOffset serves UPDATE_CONSUMER_OFFSET (15).
func (b *Broker) handleUpdateOffset(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.UpdateConsumerOffsetRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	if h.CommitOffset < 0 {
		reply(w, req, protocol.SystemError, fmt.Sprintf("commitOffset %d is negative", h.CommitOffset))
		return
	}
	b.offsets.Commit(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	reply(w, req, protocol.Success, "")
}

// handleMaxOffset, handleMinOffset, handleSearchOffset and
// handleEarliestTime serve codes 30, 31, 29 and 32 (spec 3.7).
func (b *Broker) handleMaxOffset(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetMaxOffsetRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	replyExt(w, req, &protocol.GetMaxOffsetResponseHeader{Offset: b.store.MaxOffset(h.Topic, h.QueueID)})
}

func (b *Broker) handleMinOffset(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetMinOffsetRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	replyExt(w, req, &protocol.GetMinOffsetResponseHeader{Offset: b.store.MinOffset(h.Topic, h.QueueID)})
}

func (b *Broker) handleSearchOffset(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.SearchOffsetByTimestampRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	off, err := b.store.OffsetByTime(h.Topic, h.QueueID, h.Timestamp)
	if err != nil {
		reply(w, req, protocol.SystemError, "broker: search by time: "+err.Error())
		return
	}
	replyExt(w, req, &protocol.SearchOffsetByTimestampResponseHeader{Offset: off})
}

func (b *Broker) handleEarliestTime(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetEarliestMsgStoretimeRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	ts, err := b.store.EarliestStoreTime(h.Topic, h.QueueID)
	if err != nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("no message in %s/%d: %v", h.Topic, h.QueueID, err))
		return
	}
	replyExt(w, req, &protocol.GetEarliestMsgStoretimeResponseHeader{Timestamp: ts})
}

// handleLock and handleUnlock serve LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ
// (42) for orderly consumers (spec 3.10).
func (b *Broker) handleLock(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var body protocol.LockBatchRequest
	if err := remoting.DecodeBody(req.SerializeType, req.Body, &body); err != nil {
		reply(w, req, protocol.SystemError, "bad lock body: "+err.Error())
		return
	}
	held := b.groups.Lock(body.ConsumerGroup, body.ClientID, toQueues(body.MQSet), time.Now())
	out := make([]protocol.MessageQueue, len(held))
	for i, q := range held {
		out[i] = protocol.MessageQueue(q)
	}
	b.replyBody(w, req, protocol.LockBatchResponse{LockOKMQSet: out})
}

func (b *Broker) handleUnlock(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var body protocol.LockBatchRequest
	if err := remoting.DecodeBody(req.SerializeType, req.Body, &body); err != nil {
		reply(w, req, protocol.SystemError, "bad unlock body: "+err.Error())
		return
	}
	b.groups.Unlock(body.ConsumerGroup, body.ClientID, toQueues(body.MQSet))
	reply(w, req, protocol.Success, "")
}

func toQueues(mqs []protocol.MessageQueue) []group.Queue {
	out := make([]group.Queue, len(mqs))
	for i, q := range mqs {
		out[i] = group.Queue(q)
	}
	return out
}

// handleSendBack serves CONSUMER_SEND_MSG_BACK (36): the failed message goes
// to %RETRY%<group> behind a delay level, or to %DLQ%<group> past its
// maximum reconsume count (spec 3.8).
func (b *Broker) handleSendBack(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.ConsumerSendMsgBackRequestHeader
	if !decodeHeader(w, req, &h, "bad send-back header") {
		return
	}
	retryTopic := topic.RetryPrefix + h.Group
	if _, err := b.ensureTopic(retryTopic, 1); err != nil {
		reply(w, req, protocol.SystemError, "broker: create "+retryTopic+": "+err.Error())
		return
	}
	rec, err := b.store.ReadMessage(h.Offset)
	if err != nil {
		reply(w, req, storeErrCode(err), fmt.Sprintf("no message at offset %d to send back: %v", h.Offset, err))
		return
	}
	r, err := message.Decode(rec)
	if err != nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("message at offset %d unreadable: %v", h.Offset, err))
		return
	}
	props := string(r.Properties)
	if _, ok := message.PropertyValue(props, message.PropRetryTopic); !ok {
		props, _ = message.SetProperty(props, message.PropRetryTopic, string(r.Topic))
	}
	if _, ok := message.PropertyValue(props, message.PropOriginMessageID); !ok {
		origin := h.OriginMsgID
		if u, ok := message.PropertyValue(props, message.PropUniqKey); ok {
			origin = u
		}
		if origin == "" {
			origin = message.OffsetMsgID(r.StoreHost, r.PhysicalOffset)
		}
		props, _ = message.SetProperty(props, message.PropOriginMessageID, origin)
	}
	m := &message.Message{Topic: retryTopic, Flag: r.Flag, SysFlag: r.SysFlag &^ (message.FlagBornHostV6 | message.FlagStoreHostV6),
		BornTimestamp: r.BornTimestamp, BornHost: r.BornHost, StoreHost: b.storeHost,
		ReconsumeTimes: r.ReconsumeTimes + 1, Body: r.Body,
		// NB: a committed transactional message is no longer one (spec 3.8).
		Properties: message.DeleteProperty(message.DeleteProperty(props, message.PropDelay), message.PropTranMsg)}
	dead, err := b.deadLetter(m, h.Group, r.ReconsumeTimes, h.MaxReconsumeTimes, h.DelayLevel < 0)
	if err != nil {
		reply(w, req, protocol.SystemError, err.Error())
		return
	}
	if !dead {
		level := int(h.DelayLevel)
		if level == 0 {
			level = 3 + int(r.ReconsumeTimes)
		}
		if err := b.toSchedule(m, level); err != nil {
			reply(w, req, protocol.SystemError, err.Error())
			return
		}
	}
	replyPut(w, req, b.store.Put(ctx, m))
}

// handleEndTransaction serves END_TRANSACTION (37): a commit stores the half
// message under its real topic and queue; a rollback drops it (spec 3.9).
func (b *Broker) handleEndTransaction(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.EndTransactionRequestHeader
	if !decodeHeader(w, req, &h, "bad end-transaction header") {
		return
	}
	if h.CommitOrRollback != message.TxCommit && h.CommitOrRollback != message.TxRollback {
		reply(w, req, protocol.Success, "") // no decision yet
		return
	}
	// NB: held through markDone, so that concurrent decisions about one half
	// message store it under its real topic at most once.
	unlock := b.tx.lockDecision(h.TranStateTableOffset)
	defer unlock()
	if b.tx.decided(h.TranStateTableOffset) {
		reply(w, req, protocol.Success, "") // already committed or rolled back
		return
	}
	rec, err := b.store.ReadMessage(h.CommitLogOffset)
	if err != nil {
		reply(w, req, storeErrCode(err), fmt.Sprintf("no half message at offset %d: %v", h.CommitLogOffset, err))
		return
	}
	r, err := message.Decode(rec)
	if err != nil || string(r.Topic) != transHalfTopic {
		reply(w, req, protocol.SystemError, fmt.Sprintf("offset %d is not a half message", h.CommitLogOffset))
		return
	}
	props := string(r.Properties)
	if g, _ := message.PropertyValue(props, message.PropProducerGroup); g != h.ProducerGroup {
		reply(w, req, protocol.SystemError, fmt.Sprintf("half message at %d belongs to producer group %q, not %q", h.CommitLogOffset, g, h.ProducerGroup))
		return
	}
	if r.QueueOffset != h.TranStateTableOffset {
		reply(w, req, protocol.SystemError, fmt.Sprintf("half message at %d has queue offset %d, not %d", h.CommitLogOffset, r.QueueOffset, h.TranStateTableOffset))
		return
	}
	if h.CommitOrRollback == message.TxRollback {
		if err := b.tx.markDone(ctx, r.QueueOffset); err != nil {
			reply(w, req, protocol.SystemError, "broker: record rollback: "+err.Error())
			return
		}
		reply(w, req, protocol.Success, "")
		return
	}
	realTopic, _ := message.PropertyValue(props, message.PropRealTopic)
	realQID, _ := message.PropertyValue(props, message.PropRealQueueID)
	qid, _ := strconv.Atoi(realQID)
	// NB: delivered as a plain message, as Java's EndTransactionProcessor
	// does: a consumer that sends it on must not make a half message of it.
	props = message.DeleteProperty(message.DeleteProperty(message.DeleteProperty(props, message.PropRealTopic),
		message.PropRealQueueID), message.PropTranMsg)
	m := &message.Message{Topic: realTopic, QueueID: int32(qid), Flag: r.Flag,
		SysFlag:       (r.SysFlag &^ (message.TxMask | message.FlagBornHostV6 | message.FlagStoreHostV6)) | message.TxCommit,
		BornTimestamp: r.BornTimestamp, BornHost: r.BornHost, StoreHost: b.storeHost,
		ReconsumeTimes: r.ReconsumeTimes, Body: r.Body, Properties: props}
	res := b.store.Put(ctx, m)
	if !res.Stored() {
		replyPut(w, req, res)
		return
	}
	if err := b.tx.markDone(ctx, r.QueueOffset); err != nil {
		b.logger.Error("broker: record commit", "half_offset", r.QueueOffset, "err", err)
	}
	reply(w, req, protocol.Success, "")
}

// deadLetter moves m to its group's dead-letter topic (%DLQ%<group>,
// queue 0) and reports true when the message was already consumed and
// failed reconsumed times, the group's maximum (or the request's own
// maximum, when it gives one) or more, or when force is set (a send-back
// with a negative delay level). The one place the DLQ rule lives, for
// sends to a retry topic and for send-backs (spec 3.1 step 4, 3.8).
func (b *Broker) deadLetter(m *message.Message, grp string, reconsumed int32, maxOverride *int32, force bool) (bool, error) {
	maxRe := b.retryMaxTimes(grp)
	if maxOverride != nil && *maxOverride >= 0 {
		maxRe = *maxOverride
	}
	if !force && reconsumed < maxRe {
		return false, nil
	}
	dlq := topic.DLQPrefix + grp
	if _, err := b.ensureTopic(dlq, 1); err != nil {
		return false, fmt.Errorf("broker: cannot create %s: %w", dlq, err)
	}
	m.Topic, m.QueueID = dlq, 0
	m.Properties = message.DeleteProperty(m.Properties, message.PropDelay)
	return true, nil
}

// retryMaxTimes is a group's configured retryMaxTimes (16 by default).
func (b *Broker) retryMaxTimes(g string) int32 {
	if c, ok := b.groupCfgs.Get(g); ok {
		return c.RetryMaxTimes
	}
	return defaultMaxReconsume
}

// handleResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET (222): the
// group's offsets on every queue of the topic here move to the first
// message stored at or after the timestamp (-1: the end of each queue);
// without isForce an offset only moves back. The live members of the group
// are told with RESET_CONSUMER_CLIENT_OFFSET (220), so that they restart
// from the new offsets instead of committing their old ones over them.
// The answer's body is the new offset table.
func (b *Broker) handleResetOffset(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.ResetOffsetRequestHeader
	if !decodeHeader(w, req, &h, "bad reset-offset header") {
		return
	}
	cfg, ok := b.knownTopic(w, req, h.Topic)
	if !ok {
		return
	}
	body := protocol.ResetOffsetBody{OffsetTable: map[protocol.MessageQueue]int64{}}
	for qid := range cfg.ReadQueueNums {
		off := b.store.MaxOffset(h.Topic, qid)
		if h.Timestamp >= 0 {
			var err error
			if off, err = b.store.OffsetByTime(h.Topic, qid, h.Timestamp); err != nil {
				reply(w, req, protocol.SystemError, fmt.Sprintf("broker: search %s/%d by time: %v", h.Topic, qid, err))
				return
			}
		}
		if cur, ok := b.offsets.Query(h.Group, h.Topic, qid); ok && !h.IsForce && cur < off {
			off = cur // NB: without isForce, never skip messages forward
		}
		b.offsets.Commit(h.Group, h.Topic, qid, off)
		body.OffsetTable[protocol.MessageQueue{Topic: h.Topic, BrokerName: b.cfg.BrokerName, QueueID: qid}] = off
	}
	enc, err := json.Marshal(body)
	if err != nil {
		reply(w, req, protocol.SystemError, "broker: encode offset table: "+err.Error())
		return
	}
	// NB: the body is JSON whatever the header codec, as Java sends it.
	b.tellGroup(h.Group, protocol.ResetConsumerClientOffset, &h, enc)
	b.logger.Info("broker: offsets reset", "group", h.Group, "topic", h.Topic, "timestamp", h.Timestamp, "queues", len(body.OffsetTable))
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.Body = enc
	_ = w.Write(resp)
}
