package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/spf13/cobra"
)

// progressRow is a consumer group's position in one queue. Pointers are
// nil (JSON null, "unknown" in tables) when the value is not known: the
// group committed no offset there, or the broker could not say when the
// oldest waiting message was stored.
type progressRow struct {
	Topic          string `json:"topic"`
	BrokerName     string `json:"brokerName"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset *int64 `json:"consumerOffset"`
	Lag            *int64 `json:"lag"`
	// LagTimeMs is now minus the store time of the oldest message the
	// group has not consumed; 0 when nothing is waiting.
	LagTimeMs *int64 `json:"lagTimeMs"`
	// OldestUnconsumed is that store time (RFC 3339), null when nothing is
	// waiting or it is unknown.
	OldestUnconsumed *string `json:"oldestUnconsumed"`
}

// progressView is what consumerProgress reports.
type progressView struct {
	Group  string        `json:"group"`
	Topic  string        `json:"topic,omitempty"`
	Queues []progressRow `json:"queues"`
	// TotalLag sums the queues whose lag is known; UnknownLagQueues
	// counts the others.
	TotalLag         int64  `json:"totalLag"`
	UnknownLagQueues int    `json:"unknownLagQueues"`
	MaxLagTimeMs     *int64 `json:"maxLagTimeMs"` // null when no queue's lag time is known
	// Pop sums the group's POP state (RocketMQ 5 consumers: popStatus has
	// it per queue); absent when the group received nothing by POP.
	Pop *popTotals `json:"pop,omitempty"`
}

// progressOf turns one queue of a GET_CONSUME_STATS answer into a row.
func progressOf(q protocol.QueueProgress, now time.Time) progressRow {
	r := progressRow{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID, BrokerOffset: q.BrokerOffset}
	if q.ConsumerOffset < 0 {
		return r // no committed offset: where the group would start is up to its clients
	}
	co := q.ConsumerOffset
	lag := max(q.BrokerOffset-co, 0)
	r.ConsumerOffset, r.Lag = &co, &lag
	switch {
	case lag == 0:
		zero := int64(0)
		r.LagTimeMs = &zero
	case q.OldestUnconsumedTimestamp > 0:
		ms := max(now.Sub(time.UnixMilli(q.OldestUnconsumedTimestamp)).Milliseconds(), 0)
		r.LagTimeMs = &ms
		r.OldestUnconsumed = jsonTime(q.OldestUnconsumedTimestamp)
	}
	return r
}

// consumerProgress asks the brokers of topic (every master when topic is
// empty) for group's progress (GET_CONSUME_STATS).
func (a *app) consumerProgress(ctx context.Context, group, topic string) (progressView, error) {
	var brokers []brokerRef
	var err error
	if topic != "" {
		brokers, _, err = a.topicBrokers(ctx, topic)
	} else {
		brokers, err = a.readBrokers(ctx, "")
	}
	if err != nil {
		return progressView{}, err
	}
	v := progressView{Group: group, Topic: topic, Queues: []progressRow{}}
	h := &protocol.GetConsumeStatsRequestHeader{ConsumerGroup: group, Topic: topic}
	var asked []string
	for _, b := range brokers {
		var st protocol.ConsumeStats
		if err := a.callDecode(ctx, "broker", b.Addr, protocol.GetConsumeStats, h, nil, &st); err != nil {
			return v, err
		}
		asked = append(asked, b.Addr)
		now := time.Now()
		for _, q := range st.Queues {
			if q.BrokerName == "" {
				q.BrokerName = b.Name
			}
			v.Queues = append(v.Queues, progressOf(q, now))
		}
	}
	if len(v.Queues) == 0 {
		on := ""
		if topic != "" {
			on = " to topic " + topic
		}
		return v, fmt.Errorf("consumer group %s is unknown: no committed offset and no live subscription%s on broker %s",
			group, on, strings.Join(asked, ", "))
	}
	slices.SortFunc(v.Queues, func(x, y progressRow) int {
		if c := strings.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		if c := strings.Compare(x.BrokerName, y.BrokerName); c != 0 {
			return c
		}
		return int(x.QueueID - y.QueueID)
	})
	for _, r := range v.Queues {
		if r.Lag == nil {
			v.UnknownLagQueues++
		} else {
			v.TotalLag += *r.Lag
		}
		if r.LagTimeMs != nil && (v.MaxLagTimeMs == nil || *r.LagTimeMs > *v.MaxLagTimeMs) {
			ms := *r.LagTimeMs
			v.MaxLagTimeMs = &ms
		}
	}
	// NB: the offsets are the answer; POP state is added where a broker has
	// some (an error here means none, or a broker that is not Sluice)
	if pv, err := a.popStatus(ctx, group, topic); err == nil {
		t := pv.totals()
		v.Pop = &t
	}
	return v, nil
}

func msDuration(ms int64) string { return fmtDuration(time.Duration(ms) * time.Millisecond) }

func consumerProgressCmd(a *app) *cobra.Command {
	var group, topic string
	cmd := &cobra.Command{
		Use:   "consumerProgress -g GROUP [-t TOPIC]",
		Short: "Show a consumer group's offsets, lag and lag time per queue",
	}
	cmd.Flags().StringVarP(&group, "groupName", "g", "", "consumer group")
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic the group has offsets for or subscribes to)")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "groupName"); err != nil {
			return err
		}
		v, err := a.consumerProgress(ctx, group, topic)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(v)
		}
		t := newTable(a.stdout, "Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "Lag Time")
		for _, r := range v.Queues {
			t.row(r.Topic, r.BrokerName, r.QueueID, r.BrokerOffset, orUnknown(r.ConsumerOffset, itoa),
				orUnknown(r.Lag, itoa), orUnknown(r.LagTimeMs, msDuration))
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\nDiff Total: %d\n", v.TotalLag)
		fmt.Fprintf(a.stdout, "Max Lag Time: %s\n", orUnknown(v.MaxLagTimeMs, msDuration))
		if v.UnknownLagQueues > 0 {
			fmt.Fprintf(a.stdout, "%d queue(s) without a committed offset: their lag is unknown and not in the total\n",
				v.UnknownLagQueues)
		}
		if v.Pop != nil {
			fmt.Fprintf(a.stdout, "POP (RocketMQ 5 consumers, per queue: popStatus): %s\n", v.Pop)
		}
		return nil
	})
	return cmd
}

func resetOffsetByTimeCmd(a *app) *cobra.Command {
	var group, topic, when string
	cmd := &cobra.Command{
		Use:   "resetOffsetByTime -g GROUP -t TOPIC -s TIME",
		Short: "Move a group's committed offsets on every queue of a topic to the first message stored at or after a time",
		Long: `Move a group's committed offsets on every queue of a topic to the first
message stored at or after TIME: milliseconds since the epoch, "now", RFC 3339
(2024-05-01T10:00:00Z) or yyyy-MM-dd#HH:mm:ss:SSS.

Each broker of the topic moves the offsets and tells the group's running
consumers, which restart from the new offsets (Sluice's client at once, the
official RocketMQ clients after a pause of about 10 s). A broker that does not
know INVOKE_BROKER_TO_RESET_OFFSET gets the offsets written directly; its
running consumers then keep their own, so stop them first.`,
	}
	cmd.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	cmd.Flags().StringVarP(&when, "timestamp", "s", "", `time: ms since the epoch, "now", RFC 3339 or yyyy-MM-dd#HH:mm:ss:SSS`)
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "group", "topic", "timestamp"); err != nil {
			return err
		}
		at, err := parseTime("s", when)
		if err != nil {
			return err
		}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		offsets, err := ad.ResetOffsetByTime(ctx, group, topic, at)
		if err != nil {
			return err
		}
		type row struct {
			BrokerName string `json:"brokerName"`
			QueueID    int    `json:"queueId"`
			Offset     int64  `json:"offset"`
		}
		rows := []row{}
		for q, off := range offsets {
			rows = append(rows, row{BrokerName: q.BrokerName, QueueID: q.QueueID, Offset: off})
		}
		slices.SortFunc(rows, func(x, y row) int {
			if c := strings.Compare(x.BrokerName, y.BrokerName); c != 0 {
				return c
			}
			return x.QueueID - y.QueueID
		})
		if a.json {
			return a.printJSON(map[string]any{"group": group, "topic": topic, "timestamp": at.UnixMilli(),
				"queues": rows})
		}
		fmt.Fprintf(a.stdout, "reset offsets of group %s on topic %s to %s\n", group, topic, fmtAt(at))
		t := newTable(a.stdout, "Broker Name", "QID", "New Offset")
		for _, r := range rows {
			t.row(r.BrokerName, r.QueueID, r.Offset)
		}
		return t.flush()
	})
	return cmd
}
