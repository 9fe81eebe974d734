package broker

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Consumer send-back: retry topics and the dead-letter queue (spec 3.8).

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
		// NB: the reconsume count is what the producer sent, negative
		// too. As Java's, a level below 1 delays nothing: the message goes
		// to the retry topic at once (toSchedule would make queue
		// level-1 of the delay topic, one no consume queue can be).
		if level > 0 {
			if err := b.toSchedule(m, level); err != nil {
				reply(w, req, protocol.SystemError, err.Error())
				return
			}
		}
	}
	replyPut(w, req, b.store.Put(ctx, m), putSendBack)
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
