package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/spf13/cobra"
)

// dlqMessage is a message found in a group's dead-letter topic.
type dlqMessage struct {
	rec    message.Record
	holder brokerRef // the broker that holds it
}

// resendStrip are the properties a resent message does not carry over:
// broker bookkeeping of the DLQ copy, and a delay that would hide it.
var resendStrip = []string{message.PropDelay, message.PropRealTopic, message.PropRealQueueID, message.PropWait,
	message.PropCluster, message.PropMinOffset, message.PropMaxOffset, message.PropTranMsg,
	message.PropTranPreparedQueueOffset}

// msgEnd is where a resent message went, or where it was found.
type msgEnd struct {
	Topic       string `json:"topic"`
	BrokerName  string `json:"brokerName"`
	BrokerAddr  string `json:"brokerAddr"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	OffsetMsgID string `json:"offsetMsgId"`
}

func resendDLQCmd(a *app) *cobra.Command {
	var group, id string
	cmd := &cobra.Command{
		Use:   "resendDLQ -g GROUP -i MSG_ID",
		Short: "Send a message of %DLQ%<group> to %RETRY%<group>, so that the group consumes it again",
		Long: `Send a message of the dead-letter topic %DLQ%<group> to the group's retry topic
%RETRY%<group> on the same broker, with its reconsume count reset to 0: the
group's consumers receive it again, under its original topic (RETRY_TOPIC).

MSG_ID is the message's id (UNIQ_KEY, what consumers see) or the offset
message id of its copy in the DLQ. The DLQ copy stays where it is.`,
	}
	cmd.Flags().StringVarP(&group, "consumerGroup", "g", "", "consumer group")
	cmd.Flags().StringVarP(&id, "msgId", "i", "", "message id (UNIQ_KEY) or offset message id of the DLQ copy")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "consumerGroup", "msgId"); err != nil {
			return err
		}
		dlq, retry := client.DLQTopic(group), client.RetryTopic(group)
		brokers, _, err := a.topicBrokers(ctx, dlq)
		if err != nil {
			return fmt.Errorf("group %s has no dead-letter topic %s: %w", group, dlq, err)
		}
		found, err := a.findDLQMessage(ctx, dlq, id, brokers)
		if err != nil {
			return err
		}
		from := msgEnd{Topic: string(found.rec.Topic), BrokerName: found.holder.Name, BrokerAddr: found.holder.Addr,
			QueueID: found.rec.QueueID, QueueOffset: found.rec.QueueOffset,
			OffsetMsgID: message.OffsetMsgID(found.rec.StoreHost, found.rec.PhysicalOffset)}
		to, err := a.resend(ctx, found, retry)
		if err != nil {
			return err
		}
		uniq, _ := message.PropertyValue(string(found.rec.Properties), message.PropUniqKey)
		origin, _ := message.PropertyValue(string(found.rec.Properties), message.PropRetryTopic)
		if a.json {
			return a.printJSON(map[string]any{"group": group, "msgId": uniq, "originalTopic": origin,
				"previousReconsumeTimes": found.rec.ReconsumeTimes, "from": from, "to": to})
		}
		fmt.Fprintf(a.stdout, "resent message %s from %s (%s queue %d offset %d, offset msg id %s, reconsumed %d times)\n",
			orDash(uniq), from.Topic, brokerLabel(found.holder), from.QueueID, from.QueueOffset, from.OffsetMsgID,
			found.rec.ReconsumeTimes)
		fmt.Fprintf(a.stdout, "  to %s (%s queue %d offset %d, offset msg id %s) with reconsume times reset to 0\n",
			to.Topic, brokerLabel(found.holder), to.QueueID, to.QueueOffset, to.OffsetMsgID)
		fmt.Fprintf(a.stdout, "consumers of group %s will receive it again", group)
		if origin != "" {
			fmt.Fprintf(a.stdout, " as a message of topic %s", origin)
		}
		fmt.Fprintf(a.stdout, "; the copy in %s stays there\n", dlq)
		return nil
	})
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// findDLQMessage finds id in dlq: by offset message id when it names one
// of the DLQ's brokers, otherwise by UNIQ_KEY through the key index (the
// newest copy when the message went to the DLQ more than once).
func (a *app) findDLQMessage(ctx context.Context, dlq, id string, brokers []brokerRef) (dlqMessage, error) {
	if host, off, err := message.ParseOffsetMsgID(id); err == nil {
		for _, b := range brokers {
			if b.Addr != host.String() {
				continue
			}
			resp, err := a.call(ctx, "broker", b.Addr, protocol.ViewMessageByID, &protocol.ViewMessageByIDRequestHeader{Offset: off}, nil)
			if err != nil {
				return dlqMessage{}, err
			}
			rec, err := message.Decode(resp.Body)
			if err != nil {
				return dlqMessage{}, fmt.Errorf("broker %s answered VIEW_MESSAGE_BY_ID with an unreadable record: %w", b.Addr, err)
			}
			if string(rec.Topic) != dlq {
				return dlqMessage{}, fmt.Errorf("message %s is in topic %s, not in %s", id, rec.Topic, dlq)
			}
			return dlqMessage{rec: rec, holder: b}, nil
		}
	}
	var best *dlqMessage
	var asked []string
	h := &protocol.QueryMessageRequestHeader{Topic: dlq, Key: id, MaxNum: 32}
	for _, b := range brokers {
		asked = append(asked, brokerLabel(b))
		resp, err := a.call(ctx, "broker", b.Addr, protocol.QueryMessage, h, nil, protocol.QueryNotFound)
		if err != nil {
			return dlqMessage{}, err
		}
		if resp.Code == protocol.QueryNotFound {
			continue
		}
		for body := resp.Body; len(body) > 0; {
			rec, err := message.Decode(body)
			if err != nil {
				return dlqMessage{}, fmt.Errorf("broker %s answered QUERY_MESSAGE with an unreadable record: %w", b.Addr, err)
			}
			body = body[rec.TotalSize:]
			uniq, _ := message.PropertyValue(string(rec.Properties), message.PropUniqKey)
			if string(rec.Topic) != dlq || uniq != id {
				continue
			}
			if best == nil || rec.StoreTimestamp > best.rec.StoreTimestamp {
				best = &dlqMessage{rec: rec, holder: b}
			}
		}
	}
	if best == nil {
		return dlqMessage{}, fmt.Errorf("no message with id %s in %s (asked %s)", id, dlq, strings.Join(asked, ", "))
	}
	return *best, nil
}

// resend stores m's body and properties in retry on the broker that holds
// m (SEND_MESSAGE; the broker picks the retry queue).
func (a *app) resend(ctx context.Context, m dlqMessage, retry string) (msgEnd, error) {
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
	body := slices.Clone(m.rec.Body)
	resp, err := a.call(ctx, "broker", m.holder.Addr, protocol.SendMessage, h, body,
		protocol.FlushDiskTimeout, protocol.FlushSlaveTimeout, protocol.SlaveNotAvailable)
	if err != nil {
		return msgEnd{}, err
	}
	var rh protocol.SendMessageResponseHeader
	if err := rh.FromExt(resp.ExtFields); err != nil {
		return msgEnd{}, fmt.Errorf("broker %s answered SEND_MESSAGE with a header mqadmin cannot read: %w", m.holder.Addr, err)
	}
	return msgEnd{Topic: retry, BrokerName: m.holder.Name, BrokerAddr: m.holder.Addr, QueueID: rh.QueueID,
		QueueOffset: rh.QueueOffset, OffsetMsgID: rh.MsgID}, nil
}
