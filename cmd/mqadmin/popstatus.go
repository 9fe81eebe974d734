package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/protocol"
)

// popStatusView is what popStatus prints.
type popStatusView struct {
	Group  string                    `json:"group"`
	Topic  string                    `json:"topic,omitempty"`
	Queues []protocol.PopQueueStatus `json:"queues"`
}

// popTotals sums a POP group's queues.
type popTotals struct {
	InFlight         int64  `json:"inFlight"`
	Waiting          int64  `json:"waiting"`
	OldestInFlightMs *int64 `json:"oldestInFlightMs"` // null when nothing is in flight
	Redeliveries     int64  `json:"redeliveries"`
	DLQ              int64  `json:"dlq"`
}

func (v popStatusView) totals() popTotals {
	var t popTotals
	for _, q := range v.Queues {
		t.InFlight, t.Waiting = t.InFlight+int64(q.InFlight), t.Waiting+int64(q.Waiting)
		t.Redeliveries, t.DLQ = t.Redeliveries+q.Redeliveries, t.DLQ+q.DLQ
		if q.OldestInFlightAgeMs >= 0 && (t.OldestInFlightMs == nil || q.OldestInFlightAgeMs > *t.OldestInFlightMs) {
			ms := q.OldestInFlightAgeMs
			t.OldestInFlightMs = &ms
		}
	}
	return t
}

// String is the totals' line under the tables of popStatus and
// consumerProgress.
func (t popTotals) String() string {
	return fmt.Sprintf("In Flight: %d  Waiting: %d  Oldest In Flight: %s  Redeliveries: %d  DLQ: %d",
		t.InFlight, t.Waiting, orUnknown(t.OldestInFlightMs, msDuration), t.Redeliveries, t.DLQ)
}

// popStatus asks the brokers of topic (every broker when topic is empty)
// for a POP group's state per queue (POP_STATUS, a Sluice request: a
// broker that does not serve it is named in the error).
func (a *app) popStatus(ctx context.Context, group, topic string) (popStatusView, error) {
	var brokers []brokerRef
	var err error
	if topic != "" {
		brokers, _, err = a.topicBrokers(ctx, topic)
	} else {
		brokers, err = a.readBrokers(ctx, "")
	}
	if err != nil {
		return popStatusView{}, err
	}
	v := popStatusView{Group: group, Topic: topic, Queues: []protocol.PopQueueStatus{}}
	h := &protocol.PopStatusRequestHeader{ConsumerGroup: group, Topic: topic}
	var asked []string
	for _, b := range brokers {
		var st protocol.PopStatusBody
		if err := a.callDecode(ctx, "broker", b.Addr, protocol.PopStatus, h, nil, &st); err != nil {
			if hasCode(err, protocol.RequestCodeNotSupported) {
				return v, fmt.Errorf("broker %s does not serve POP_STATUS (not a Sluice broker, or an older one): %w", b.Addr, err)
			}
			return v, err
		}
		asked = append(asked, b.Addr)
		for _, q := range st.Queues {
			if q.BrokerName == "" {
				q.BrokerName = b.Name
			}
			v.Queues = append(v.Queues, q)
		}
	}
	if len(v.Queues) == 0 {
		on := ""
		if topic != "" {
			on = " of topic " + topic
		}
		return v, fmt.Errorf("consumer group %s has received nothing by POP (RocketMQ 5 clients)%s on broker %s since it started",
			group, on, strings.Join(asked, ", "))
	}
	slices.SortFunc(v.Queues, func(x, y protocol.PopQueueStatus) int { return protocol.CompareQueues(x.MessageQueue, y.MessageQueue) })
	return v, nil
}

func popStatusCmd(a *app) *cobra.Command {
	var group, topic string
	cmd := &cobra.Command{
		Use:   "popStatus -g GROUP [-t TOPIC]",
		Short: "Show a POP (RocketMQ 5) consumer group's messages in flight, waiting, redelivered and dead-lettered per queue",
		Long: "Show a POP (RocketMQ 5 SimpleConsumer or PushConsumer) group's state per queue: messages in flight\n" +
			"(delivered, not acked), waiting (FIFO messages held behind their message group's), the age of the\n" +
			"oldest in flight, and since the broker started the redeliveries and the messages sent to %DLQ%GROUP.\n" +
			"consumerProgress shows the group's offsets.",
	}
	cmd.Flags().StringVarP(&group, "groupName", "g", "", "consumer group")
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic the group received by POP)")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "groupName"); err != nil {
			return err
		}
		v, err := a.popStatus(ctx, group, topic)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(v)
		}
		t := newTable(a.stdout, "Topic", "Broker Name", "QID", "In Flight", "Waiting", "Oldest In Flight", "Redeliveries", "DLQ")
		for _, q := range v.Queues {
			oldest := "-"
			if q.OldestInFlightAgeMs >= 0 {
				oldest = msDuration(q.OldestInFlightAgeMs)
			}
			t.row(q.Topic, q.BrokerName, q.QueueID, q.InFlight, q.Waiting, oldest, q.Redeliveries, q.DLQ)
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\n%s\n", v.totals())
		return nil
	})
	return cmd
}
