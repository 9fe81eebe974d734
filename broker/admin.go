package broker

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// fixedTopic reports whether an admin may neither change nor delete topic:
// a system topic, or the auto-create template new topics are made from.
func fixedTopic(name string) bool { return systemTopics[name] || name == topic.AutoCreateTemplate }

// handleCreateTopic serves UPDATE_AND_CREATE_TOPIC (17) and registers the
// change with the nameservers at once (spec 3.11).
func (b *Broker) handleCreateTopic(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.CreateTopicRequestHeader
	if !decodeHeader(w, req, &h, "bad create-topic header") {
		return
	}
	if fixedTopic(h.Topic) {
		reply(w, req, protocol.SystemError, fmt.Sprintf("topic %s is a system topic and cannot be changed", h.Topic))
		return
	}
	if h.ReadQueueNums <= 0 || h.WriteQueueNums <= 0 || h.ReadQueueNums > 1024 || h.WriteQueueNums > 1024 {
		reply(w, req, protocol.SystemError, fmt.Sprintf("queue counts read=%d write=%d must be within 1..1024", h.ReadQueueNums, h.WriteQueueNums))
		return
	}
	if h.TopicFilterType != "" && h.TopicFilterType != "SINGLE_TAG" && h.TopicFilterType != "MULTI_TAG" {
		reply(w, req, protocol.SystemError, fmt.Sprintf("topicFilterType %q must be SINGLE_TAG or MULTI_TAG", h.TopicFilterType))
		return
	}
	cur, _ := b.topics.Get(h.Topic)
	attrs, err := topic.ApplyAttributes(cur.Attributes, h.Attributes) // NB: an update without -a keeps them
	if err != nil {
		reply(w, req, protocol.SystemError, err.Error())
		return
	}
	changed, err := b.topics.Put(topic.Config{TopicName: h.Topic, ReadQueueNums: h.ReadQueueNums, WriteQueueNums: h.WriteQueueNums,
		Perm: h.Perm, TopicFilterType: h.TopicFilterType, TopicSysFlag: h.TopicSysFlag, Order: h.Order, Attributes: attrs})
	if err != nil {
		reply(w, req, protocol.SystemError, err.Error())
		return
	}
	if changed {
		b.registerNow()
	}
	reply(w, req, protocol.Success, "")
}

// handleDeleteTopic serves DELETE_TOPIC_IN_BROKER (215).
func (b *Broker) handleDeleteTopic(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.DeleteTopicRequestHeader
	if !decodeHeader(w, req, &h, "bad delete-topic header") {
		return
	}
	if fixedTopic(h.Topic) {
		reply(w, req, protocol.SystemError, fmt.Sprintf("topic %s is a system topic and cannot be deleted", h.Topic))
		return
	}
	if _, err := b.deleteTopic(ctx, h.Topic); err != nil {
		reply(w, req, protocol.SystemError, err.Error())
		return
	}
	reply(w, req, protocol.Success, "")
}

// handleAllTopics serves GET_ALL_TOPIC_CONFIG (21).
func (b *Broker) handleAllTopics(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	cfgs, version := b.topics.All()
	table := make(map[string]protocol.TopicConfig, len(cfgs))
	for _, c := range cfgs {
		table[c.TopicName] = c
	}
	b.replyBody(w, req, protocol.TopicConfigSerializeWrapper{TopicConfigTable: table, DataVersion: version})
}

// handleViewMessage serves VIEW_MESSAGE_BY_ID (33): the raw record at a
// commitlog offset.
func (b *Broker) handleViewMessage(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.ViewMessageByIDRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	rec, err := b.store.ReadMessage(h.Offset)
	if err != nil {
		reply(w, req, storeErrCode(err), fmt.Sprintf("no message at offset %d on broker %s: %v", h.Offset, b.cfg.BrokerName, err))
		return
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.Body = rec
	_ = w.Write(resp)
}

// queryMaxNum caps a key query's maxNum: each candidate is read from the
// key index and each result from the log (Java caps it lower, at
// maxMsgsNumBatch, 64; the console asks for up to 256).
const queryMaxNum = 256

// handleQueryMessage serves QUERY_MESSAGE (12): records by key or UNIQ_KEY,
// the newest first, at most queryMaxNum and as many as fit in a frame.
func (b *Broker) handleQueryMessage(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.QueryMessageRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	end := h.EndTimestamp
	if end <= 0 {
		end = time.Now().UnixMilli() + 1000
	}
	recs, err := b.store.QueryByKey(h.Topic, h.Key, h.BeginTimestamp, end, min(max(int(h.MaxNum), 1), queryMaxNum))
	if err != nil {
		reply(w, req, storeErrCode(err), "broker: query: "+err.Error())
		return
	}
	if len(recs) == 0 {
		reply(w, req, protocol.QueryNotFound, fmt.Sprintf("no message with key %s in topic %s on broker %s", h.Key, h.Topic, b.cfg.BrokerName))
		return
	}
	// NB: an answer larger than a frame is never sent: the client would
	// wait for its timeout. 64 KiB is the header's room (conf's).
	room := int(b.cfg.Remoting.MaxFrameSize) - 64<<10
	var body []byte
	for _, r := range recs {
		if len(body) > 0 && len(body)+len(r) > room {
			break
		}
		body = append(body, r...)
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(&protocol.QueryMessageResponseHeader{IndexLastUpdateTimestamp: time.Now().UnixMilli(),
		IndexLastUpdatePhyoffset: b.store.Dispatched()})
	resp.Body = body
	_ = w.Write(resp)
}

// handleRuntimeInfo serves GET_BROKER_RUNTIME_INFO (28).
func (b *Broker) handleRuntimeInfo(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	putMsgs, putBytes, getMsgs, getBytes := b.stats.totals()
	l := b.store.Log()
	t := map[string]string{
		"brokerName":          b.cfg.BrokerName,
		"clusterName":         b.cfg.ClusterName,
		"brokerAddr":          b.addr,
		"brokerVersionDesc":   protocol.VersionName(protocol.CurrentVersion), // RocketMQ's keys
		"brokerVersion":       strconv.Itoa(int(protocol.CurrentVersion)),
		"flushMode":           b.cfg.Store.Flush,
		"commitLogMinOffset":  strconv.FormatInt(int64(l.Min()), 10),
		"commitLogMaxOffset":  strconv.FormatInt(int64(l.Next()), 10),
		"commitLogDurable":    strconv.FormatInt(int64(l.Durable()), 10),
		"dispatchBehindBytes": strconv.FormatInt(b.store.DispatchLag(), 10),
		"dispatchRetries":     strconv.FormatInt(b.store.DispatchRetries(), 10),
		"keyIndexDegraded":    strconv.FormatBool(b.store.KeyIndexDegraded()),
		"putMessageTotal":     strconv.FormatInt(putMsgs, 10),
		"putMessageBytes":     strconv.FormatInt(putBytes, 10),
		"getMessageTotal":     strconv.FormatInt(getMsgs, 10),
		"getMessageBytes":     strconv.FormatInt(getBytes, 10),
		"sendBusyTotal":       strconv.FormatInt(b.stats.busy.Load(), 10),
		"pullParked":          strconv.FormatInt(b.hold.Parked(), 10),
		"goroutines":          strconv.Itoa(runtime.NumGoroutine()),
	}
	b.diskRuntime(t)
	for k, v := range b.replicationStatus() {
		t[k] = v
	}
	b.dedupRuntime(t)
	b.replyBody(w, req, protocol.KVTable{Table: t})
}

// handleTopicStats serves GET_TOPIC_STATS_INFO (202).
func (b *Broker) handleTopicStats(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.TopicRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	cfg, ok := b.knownTopic(w, req, h.Topic)
	if !ok {
		return
	}
	var stats protocol.TopicStats
	for q := range cfg.Queues() {
		s := protocol.QueueStat{MessageQueue: protocol.MessageQueue{Topic: h.Topic, BrokerName: b.cfg.BrokerName, QueueID: q},
			MinOffset: b.store.MinOffset(h.Topic, q), MaxOffset: b.store.MaxOffset(h.Topic, q)}
		if s.MaxOffset > s.MinOffset {
			s.LastUpdateTimestamp, _ = b.store.StoreTimeAt(h.Topic, q, s.MaxOffset-1)
		}
		stats.Queues = append(stats.Queues, s)
	}
	b.replyBody(w, req, stats)
}

// handleConsumeStats serves GET_CONSUME_STATS (208): per queue the broker's
// max offset, the group's offset and the store time of the oldest message
// it has not consumed, for every topic (or the one asked for) the group
// has an offset on or a live subscription to. So a group unknown here
// gets no queues, whether a topic was named or not.
func (b *Broker) handleConsumeStats(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetConsumeStatsRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	topics := map[string]bool{}
	add := func(t string) {
		if h.Topic == "" || t == h.Topic {
			topics[t] = true
		}
	}
	for _, k := range b.offsets.Keys() {
		if k.Group == h.ConsumerGroup {
			add(k.Topic)
		}
	}
	for _, c := range b.groups.Consumers(h.ConsumerGroup) {
		for t := range c.Subs {
			add(t)
		}
	}
	stats := protocol.ConsumeStats{Group: h.ConsumerGroup}
	for t := range topics {
		cfg, ok := b.topics.Get(t)
		if !ok {
			continue
		}
		stored := b.offsets.Queues(h.ConsumerGroup, t)
		for q := range cfg.Queues() {
			p := protocol.QueueProgress{MessageQueue: protocol.MessageQueue{Topic: t, BrokerName: b.cfg.BrokerName, QueueID: q},
				BrokerOffset: b.store.MaxOffset(t, q), ConsumerOffset: -1}
			if off, ok := stored[q]; ok {
				p.ConsumerOffset = off
				if off < p.BrokerOffset {
					p.OldestUnconsumedTimestamp, _ = b.store.StoreTimeAt(t, q, max(off, b.store.MinOffset(t, q)))
				}
			}
			stats.Queues = append(stats.Queues, p)
		}
	}
	sortProgress(stats.Queues)
	b.replyBody(w, req, stats)
}

func sortProgress(qs []protocol.QueueProgress) {
	slices.SortFunc(qs, func(a, b protocol.QueueProgress) int { return protocol.CompareQueues(a.MessageQueue, b.MessageQueue) })
}
