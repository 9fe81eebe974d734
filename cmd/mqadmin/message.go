package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/spf13/cobra"
)

func messageCommands(a *app) []*cobra.Command {
	return []*cobra.Command{queryMsgByIDCmd(a), queryMsgByKeyCmd(a), queryMsgByOffsetCmd(a), sendMessageCmd(a),
		consumeMessageCmd(a), printMsgCmd(a), resendDLQCmd(a)}
}

// toolsConsumerGroup is the group mqadmin pulls with when none is given;
// it never commits offsets.
const toolsConsumerGroup = "TOOLS_CONSUMER"

// pullConsumer returns a started pull consumer of group, closed when run
// returns.
func (a *app) pullConsumer(group string) (*client.PullConsumer, error) {
	opts, err := a.clientOptions()
	if err != nil {
		return nil, err
	}
	pc, err := client.NewPullConsumer(group, opts...)
	if err != nil {
		return nil, usageError{msg: err.Error()}
	}
	if err := pc.Start(); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() { _ = pc.Close() })
	return pc, nil
}

func queryMsgByIDCmd(a *app) *cobra.Command {
	var ids, group, clientID string
	cmd := &cobra.Command{
		Use:   "queryMsgById -i OFFSET_MSG_ID[,OFFSET_MSG_ID...] [-g GROUP -d CLIENT_ID]",
		Short: "Print a message by its offset message id (the broker address and commitlog offset it encodes), or have a consumer consume it again",
	}
	cmd.Flags().StringVarP(&ids, "msgId", "i", "", "offset message id(s), comma-separated")
	cmd.Flags().StringVarP(&group, "consumerGroup", "g", "", "with -d: the consumer group of the client to hand the message to")
	cmd.Flags().StringVarP(&clientID, "clientId", "d", "", "with -g: hand the message to this client's handler "+
		"(CONSUME_MESSAGE_DIRECTLY) instead of printing it")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "msgId"); err != nil {
			return err
		}
		if (group == "") != (clientID == "") {
			return usagef("-g and -d go together: the group and the client id of the consumer to hand the message to")
		}
		var list []string
		for _, id := range strings.Split(ids, ",") {
			id = strings.TrimSpace(id)
			if id == "" {
				continue
			}
			if _, _, err := message.ParseOffsetMsgID(id); err != nil {
				return usagef("-i %s is not an offset message id (32 or 56 hex characters: store host, port, "+
					"commitlog offset): %v", id, err)
			}
			list = append(list, id)
		}
		if len(list) == 0 {
			return usagef("-i %q holds no message id", ids)
		}
		if clientID != "" {
			for _, id := range list {
				if err := a.consumeDirectly(ctx, id, group, clientID); err != nil {
					return err
				}
			}
			return nil
		}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		var msgs []*client.Message
		for _, id := range list {
			m, err := ad.QueryByID(ctx, id)
			if err != nil {
				host, off, _ := message.ParseOffsetMsgID(id)
				return fmt.Errorf("message %s (broker %s, commitlog offset %d): %w", id, host, off, err)
			}
			msgs = append(msgs, m)
		}
		return a.printMessages(msgs)
	})
	return cmd
}

func queryMsgByKeyCmd(a *app) *cobra.Command {
	var topic, key, begin, end string
	var maxNum int
	cmd := &cobra.Command{
		Use:   "queryMsgByKey -t TOPIC -k KEY [-b BEGIN] [-e END]",
		Short: "Print the messages of a topic whose KEYS (or UNIQ_KEY id) hold a key",
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	cmd.Flags().StringVarP(&key, "msgKey", "k", "", "key (a KEYS token or a message id)")
	cmd.Flags().StringVarP(&begin, "beginTimestamp", "b", "", `stored at or after: ms, "now", RFC 3339 or yyyy-MM-dd#HH:mm:ss:SSS`)
	cmd.Flags().StringVarP(&end, "endTimestamp", "e", "", "stored at or before (same forms as -b)")
	cmd.Flags().IntVar(&maxNum, "maxNum", 64, "at most this many messages")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic", "msgKey"); err != nil {
			return err
		}
		if err := notBlank(cmd, "msgKey"); err != nil {
			return err
		}
		if maxNum < 1 {
			return usagef("--maxNum %d: give at least 1", maxNum)
		}
		bt, et, err := timeRange("b", begin, end)
		if err != nil {
			return err
		}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		msgs, err := ad.QueryByKey(ctx, topic, key, maxNum, bt, et)
		if err != nil {
			return err
		}
		if len(msgs) == 0 && !a.json {
			fmt.Fprintf(a.stdout, "no message with key %s in topic %s\n", key, topic)
			return nil
		}
		return a.printMessages(msgs)
	})
	return cmd
}

// timeRange parses optional begin and end flags: -e, and beginFlag (b or
// s, the shorthand the command gives its begin flag).
func timeRange(beginFlag, begin, end string) (time.Time, time.Time, error) {
	var bt, et time.Time
	var err error
	if begin != "" {
		if bt, err = parseTime(beginFlag, begin); err != nil {
			return bt, et, err
		}
	}
	if end != "" {
		if et, err = parseTime("e", end); err != nil {
			return bt, et, err
		}
	}
	if !bt.IsZero() && !et.IsZero() && et.Before(bt) {
		return bt, et, usagef("the end time %s is before the begin time %s", fmtAt(et), fmtAt(bt))
	}
	return bt, et, nil
}

func queryMsgByOffsetCmd(a *app) *cobra.Command {
	var topic, brokerName string
	var queueID int
	var offset int64
	cmd := &cobra.Command{
		Use:   "queryMsgByOffset -t TOPIC -b BROKER_NAME -i QUEUE_ID -o OFFSET",
		Short: "Print the message at a queue offset",
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	cmd.Flags().StringVarP(&brokerName, "brokerName", "b", "", "broker name")
	cmd.Flags().IntVarP(&queueID, "queueId", "i", 0, "queue id")
	cmd.Flags().Int64VarP(&offset, "offset", "o", 0, "queue offset")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic", "brokerName", "queueId", "offset"); err != nil {
			return err
		}
		pc, err := a.pullConsumer(toolsConsumerGroup)
		if err != nil {
			return err
		}
		q := client.MessageQueue{Topic: topic, BrokerName: brokerName, QueueID: queueID}
		res, err := pc.Pull(ctx, q, offset, 1)
		if err != nil {
			return err
		}
		if res.Status != client.PullFound || len(res.Messages) == 0 || res.Messages[0].QueueOffset != offset {
			return fmt.Errorf("no message at offset %d of queue %s (%s; the queue holds offsets %d to %d)",
				offset, q, res.Status, res.MinOffset, res.MaxOffset-1)
		}
		return a.printMessages(res.Messages[:1])
	})
	return cmd
}

func sendMessageCmd(a *app) *cobra.Command {
	var topic, body, keys, tags, brokerName string
	var queueID int
	cmd := &cobra.Command{
		Use:   "sendMessage -t TOPIC -p BODY [-k KEYS] [-c TAGS] [-b BROKER_NAME -i QUEUE_ID]",
		Short: "Send one message",
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.StringVarP(&body, "body", "p", "", "message body (text)")
	f.StringVarP(&keys, "keys", "k", "", "keys, space-separated")
	f.StringVarP(&tags, "tags", "c", "", "tag")
	f.StringVarP(&brokerName, "broker", "b", "", "send to this broker name (with -i)")
	f.IntVarP(&queueID, "qid", "i", 0, "send to this queue id (with -b)")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic", "body"); err != nil {
			return err
		}
		if cmd.Flags().Changed("broker") != cmd.Flags().Changed("qid") {
			return usagef("give -b BROKER_NAME and -i QUEUE_ID together")
		}
		opts, err := a.clientOptions()
		if err != nil {
			return err
		}
		opts = append(opts, client.WithGroup("TOOLS_PRODUCER"), client.WithSendTimeout(a.timeout))
		m := &client.Message{Topic: topic, Body: []byte(body), Tags: tags, Keys: strings.Fields(keys)}
		if brokerName != "" {
			opts = append(opts, client.WithQueueSelector(client.ManualSelector()))
			m.Queue = client.MessageQueue{Topic: topic, BrokerName: brokerName, QueueID: queueID}
		}
		p, err := client.NewProducer(opts...)
		if err != nil {
			return usageError{msg: err.Error()}
		}
		if err := p.Start(); err != nil {
			return err
		}
		a.closers = append(a.closers, func() { _ = p.Close() })
		res, err := p.Send(ctx, m)
		if err != nil {
			return err
		}
		if a.json {
			if err := a.printJSON(map[string]any{"status": res.Status.String(), "msgId": res.MsgID,
				"offsetMsgId": res.OffsetMsgID, "topic": res.Queue.Topic, "brokerName": res.Queue.BrokerName,
				"queueId": res.Queue.QueueID, "queueOffset": res.QueueOffset}); err != nil {
				return err
			}
			return notSendOK(res)
		}
		t := newTable(a.stdout, "Broker Name", "QID", "Send Result", "MsgId", "Offset Msg Id", "Queue Offset")
		t.row(res.Queue.BrokerName, res.Queue.QueueID, res.Status, res.MsgID, res.OffsetMsgID, res.QueueOffset)
		if err := t.flush(); err != nil {
			return err
		}
		return notSendOK(res)
	})
	return cmd
}

// notSendOK fails a send that was stored but not as the broker is
// configured to promise (exit status 1): a SYNC_MASTER without its slave
// answers SEND_SLAVE_NOT_AVAILABLE, which a script must not take for
// success.
func notSendOK(res client.SendResult) error {
	why := map[client.SendStatus]string{
		client.SendFlushDiskTimeout:  "not flushed to disk within the broker's sync flush timeout",
		client.SendFlushSlaveTimeout: "not replicated to a slave within the broker's timeout",
		client.SendSlaveNotAvailable: "not replicated: the master has no slave in sync",
	}[res.Status]
	if why == "" {
		return nil
	}
	return fmt.Errorf("%s: the message is stored on %s but %s", res.Status, res.Queue.BrokerName, why)
}

// drain pulls q from off on and hands each message to fn until fn says
// stop or the queue has nothing more. It returns the offset after the
// last message fn took.
func drain(ctx context.Context, pc *client.PullConsumer, q client.MessageQueue, sel client.MessageSelector, off int64, batch int,
	fn func(*client.Message) (stop bool)) (int64, error) {
	for {
		res, err := pc.PullSelector(ctx, q, sel, off, batch)
		if err != nil {
			return off, err
		}
		switch res.Status {
		case client.PullFound:
			for _, m := range res.Messages {
				if fn(m) {
					return m.QueueOffset + 1, nil
				}
			}
			if res.NextOffset <= off {
				return off, nil
			}
			off = res.NextOffset
		case client.PullNoMatchedMsg, client.PullOffsetIllegal:
			// NB: an offset below the queue's minimum moves to it.
			if res.NextOffset == off || res.NextOffset < 0 {
				return off, nil
			}
			off = res.NextOffset
		default:
			return off, nil
		}
		if err := ctx.Err(); err != nil {
			return off, err
		}
	}
}

// pickQueues returns the queues of topic, or one broker's, or one queue.
func pickQueues(ctx context.Context, pc *client.PullConsumer, topic, brokerName string, queueID int, oneQueue bool) (
	[]client.MessageQueue, error) {
	all, err := pc.Queues(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []client.MessageQueue
	for _, q := range all {
		if brokerName != "" && q.BrokerName != brokerName || oneQueue && q.QueueID != queueID {
			continue
		}
		out = append(out, q)
	}
	if len(out) == 0 {
		if oneQueue {
			return nil, errors.New("topic " + topic + " has no readable queue " + brokerName + " #" + fmt.Sprint(queueID))
		}
		return nil, errors.New("topic " + topic + " has no readable queue on broker " + brokerName)
	}
	return out, nil
}
