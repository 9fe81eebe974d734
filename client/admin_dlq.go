package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
)

// resendStrip are the properties a resent DLQ message does not carry over:
// broker bookkeeping of the DLQ copy, and a delay that would hide it.
var resendStrip = []string{message.PropDelay, message.PropRealTopic, message.PropRealQueueID, message.PropWait,
	message.PropCluster, message.PropMinOffset, message.PropMaxOffset, message.PropTranMsg,
	message.PropTranPreparedQueueOffset}

// ErrMessageNotFound matches the error of a lookup that found no message.
var ErrMessageNotFound = errors.New("client: message not found")

// notFoundError is a lookup that found no message; it says where it looked.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == ErrMessageNotFound }

// MessagePlace is where a message is stored.
type MessagePlace struct {
	Topic       string `json:"topic"`
	BrokerName  string `json:"brokerName"`
	BrokerAddr  string `json:"brokerAddr"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	OffsetMsgID string `json:"offsetMsgId"`
}

// DLQResend is what ResendDLQ did.
type DLQResend struct {
	MsgID          string // UNIQ_KEY, "" when the message has none
	OriginalTopic  string // the topic the group consumes it from (RETRY_TOPIC), "" if unknown
	ReconsumeTimes int32  // of the DLQ copy
	From, To       MessagePlace
}

// dlqCopy is a message found in a group's dead-letter topic.
type dlqCopy struct {
	rec        message.Record
	name, addr string // the broker that holds it
}

// ResendDLQ sends a message of group's dead-letter topic (%DLQ%group) to
// the group's retry topic on the broker that holds it, with its reconsume
// count reset to 0, so that the group's consumers receive it again under
// its original topic. id is the message's UNIQ_KEY (the newest copy is
// taken when it went to the DLQ more than once) or the offset message id
// of its DLQ copy. The DLQ copy stays where it is.
func (a *Admin) ResendDLQ(ctx context.Context, group, id string) (DLQResend, error) {
	dlq := DLQTopic(group)
	r, err := a.TopicRoute(ctx, dlq)
	if err != nil {
		return DLQResend{}, fmt.Errorf("group %s has no dead-letter topic %s: %w", group, dlq, err)
	}
	slices.SortFunc(r.Brokers, func(x, y BrokerAddrs) int { return strings.Compare(x.BrokerName, y.BrokerName) })
	found, err := a.findDLQCopy(ctx, dlq, id, r)
	if err != nil {
		return DLQResend{}, err
	}
	props := string(found.rec.Properties)
	out := DLQResend{ReconsumeTimes: found.rec.ReconsumeTimes,
		From: MessagePlace{Topic: string(found.rec.Topic), BrokerName: found.name, BrokerAddr: found.addr,
			QueueID: found.rec.QueueID, QueueOffset: found.rec.QueueOffset,
			OffsetMsgID: message.OffsetMsgID(found.rec.StoreHost, found.rec.PhysicalOffset)}}
	out.MsgID, _ = message.PropertyValue(props, message.PropUniqKey)
	out.OriginalTopic, _ = message.PropertyValue(props, message.PropRetryTopic)
	out.To, err = a.resendCopy(ctx, found, RetryTopic(group))
	return out, err
}

// findDLQCopy finds id in dlq: by offset message id when it names one of
// the DLQ's brokers, otherwise by UNIQ_KEY through the key index.
func (a *Admin) findDLQCopy(ctx context.Context, dlq, id string, r TopicRoute) (dlqCopy, error) {
	if host, off, err := message.ParseOffsetMsgID(id); err == nil {
		for _, b := range r.Brokers {
			if b.Addrs[0] != host.String() {
				continue
			}
			resp, err := a.brokerCall(ctx, b.Addrs[0], request{code: protocol.ViewMessageByID,
				ext: protocol.Ext(&protocol.ViewMessageByIDRequestHeader{Offset: off})})
			if err != nil {
				return dlqCopy{}, err
			}
			rec, err := message.Decode(resp.Body)
			if err != nil {
				return dlqCopy{}, fmt.Errorf("client: broker %s answered VIEW_MESSAGE_BY_ID with an unreadable record: %w", b.Addrs[0], err)
			}
			if string(rec.Topic) != dlq {
				return dlqCopy{}, fmt.Errorf("message %s is in topic %s, not in %s", id, rec.Topic, dlq)
			}
			return dlqCopy{rec: rec, name: b.BrokerName, addr: b.Addrs[0]}, nil
		}
	}
	var best *dlqCopy
	var asked []string
	h := &protocol.QueryMessageRequestHeader{Topic: dlq, Key: id, MaxNum: 32}
	for _, b := range r.Brokers {
		addr, ok := b.Addrs[0]
		if !ok {
			continue
		}
		asked = append(asked, b.BrokerName+" ("+addr+")")
		resp, err := a.brokerCall(ctx, addr, request{code: protocol.QueryMessage, ext: protocol.Ext(h)}, protocol.QueryNotFound)
		if err != nil {
			return dlqCopy{}, err
		}
		if resp.Code == protocol.QueryNotFound {
			continue
		}
		for body := resp.Body; len(body) > 0; {
			rec, err := message.Decode(body)
			if err != nil {
				return dlqCopy{}, fmt.Errorf("client: broker %s answered QUERY_MESSAGE with an unreadable record: %w", addr, err)
			}
			body = body[rec.TotalSize:]
			uniq, _ := message.PropertyValue(string(rec.Properties), message.PropUniqKey)
			if string(rec.Topic) != dlq || uniq != id {
				continue
			}
			if best == nil || rec.StoreTimestamp > best.rec.StoreTimestamp {
				best = &dlqCopy{rec: rec, name: b.BrokerName, addr: addr}
			}
		}
	}
	if best == nil {
		return dlqCopy{}, &notFoundError{msg: fmt.Sprintf("no message with id %s in %s (asked %s)", id, dlq, strings.Join(asked, ", "))}
	}
	return *best, nil
}

// resendCopy stores m's body and properties in retry on the broker that
// holds m (SEND_MESSAGE; the broker picks the retry queue).
func (a *Admin) resendCopy(ctx context.Context, m dlqCopy, retry string) (MessagePlace, error) {
	props := string(m.rec.Properties)
	for _, p := range resendStrip {
		props = message.DeleteProperty(props, p)
	}
	if _, ok := message.PropertyValue(props, message.PropOriginMessageID); !ok {
		origin, ok := message.PropertyValue(props, message.PropUniqKey)
		if !ok {
			origin = message.OffsetMsgID(m.rec.StoreHost, m.rec.PhysicalOffset)
		}
		if p, err := message.SetProperty(props, message.PropOriginMessageID, origin); err == nil {
			props = p
		}
	}
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "TOOLS_PRODUCER", Topic: retry, DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 1, QueueID: -1, SysFlag: m.rec.SysFlag & (message.FlagCompressed | message.CompressionMask),
		BornTimestamp: time.Now().UnixMilli(), Flag: m.rec.Flag, Properties: props}
	resp, err := a.brokerCall(ctx, m.addr, request{code: protocol.SendMessage, ext: protocol.Ext(h), body: slices.Clone(m.rec.Body)},
		protocol.FlushDiskTimeout, protocol.FlushSlaveTimeout, protocol.SlaveNotAvailable)
	if err != nil {
		return MessagePlace{}, err
	}
	var rh protocol.SendMessageResponseHeader
	if err := rh.FromExt(resp.ExtFields); err != nil {
		return MessagePlace{}, fmt.Errorf("client: broker %s answered SEND_MESSAGE with an unreadable header: %w", m.addr, err)
	}
	return MessagePlace{Topic: retry, BrokerName: m.name, BrokerAddr: m.addr, QueueID: rh.QueueID,
		QueueOffset: rh.QueueOffset, OffsetMsgID: rh.MsgID}, nil
}
