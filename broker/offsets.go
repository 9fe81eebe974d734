package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Consumer offsets and queue offset lookups (spec 3.6, 3.7).

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
		reply(w, req, storeErrCode(err), "broker: search by time: "+err.Error())
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
		reply(w, req, storeErrCode(err), fmt.Sprintf("no message in %s/%d: %v", h.Topic, h.QueueID, err))
		return
	}
	replyExt(w, req, &protocol.GetEarliestMsgStoretimeResponseHeader{Timestamp: ts})
}

// handleResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET (222): the
// group's offsets on every queue of the topic here move to the first
// message stored at or after the timestamp (-1: the end of each queue);
// without isForce an offset only moves back. The live members of the group
// are told with RESET_CONSUMER_CLIENT_OFFSET (220), so that they restart
// from the new offsets instead of committing their old ones over them;
// a RocketMQ 5 (POP) group's in-flight messages are forgotten (their
// handles no longer ack) and it pops from the new offsets.
// The answer's body is the new offset table.
func (b *Broker) handleResetOffset(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.ResetOffsetRequestHeader
	if !decodeHeader(w, req, &h, "bad reset-offset header") {
		return
	}
	// NB: a group name no client can use would only leave offsets behind
	// (a consumer's own commits are taken as Java's broker takes them).
	if !validGroup(w, req, h.Group) {
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
				reply(w, req, storeErrCode(err), fmt.Sprintf("broker: search %s/%d by time: %v", h.Topic, qid, err))
				return
			}
		}
		if cur, ok := b.offsets.Query(h.Group, h.Topic, qid); ok && !h.IsForce && cur < off {
			off = cur // NB: without isForce, never skip messages forward
		}
		b.offsets.Commit(h.Group, h.Topic, qid, off)
		// NB: a RocketMQ 5 (POP) group's own position too, lest its next
		// pop or ack commit the old one over the reset (pop.Table.Reset;
		// after the commit, as it says).
		b.pop.Reset(h.Group, h.Topic, qid, off)
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
