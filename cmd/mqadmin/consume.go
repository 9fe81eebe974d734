package main

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/filter"
	"github.com/spf13/cobra"
)

// pullBatch is how many messages one pull asks for.
const pullBatch = 32

// committed is an offset consumeMessage committed for a group.
type committed struct {
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	Offset     int64  `json:"offset"`
}

func consumeMessageCmd(a *app) *cobra.Command {
	var topic, group, brokerName, sql string
	var queueID, count int
	var offset int64
	cmd := &cobra.Command{
		Use:   "consumeMessage -t TOPIC [-g GROUP] [-b BROKER_NAME [-i QUEUE_ID]] [-o OFFSET] [-c COUNT] [--sql EXPR]",
		Short: "Pull and print messages; with -g, start at the group's offsets and commit what was printed",
		Long: `Pull and print up to COUNT messages of a topic, queue by queue.

Without -g nothing is committed and every queue is read from its first message
(or from -o). With -g the group's committed offsets are the starting points
(queues without one start at their first message, -o overrides), and the
offsets after the printed messages are committed for the group.

With --sql only the messages whose properties match the SQL92 expression
are printed (the broker filters, as for a consumer subscribed with
MessageSelector SQL92; a message lacking a compared property does not
match), e.g. --sql "amount BETWEEN 50 AND 99 AND region IN ('eu','us')".
With -g the offsets committed are past the messages filtered away too.`,
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.StringVarP(&group, "consumerGroup", "g", "", "consume as this group and commit its offsets")
	f.StringVarP(&brokerName, "brokerName", "b", "", "only this broker's queues")
	f.IntVarP(&queueID, "queueId", "i", 0, "only this queue (with -b)")
	f.Int64VarP(&offset, "offset", "o", 0, "start at this queue offset")
	f.IntVarP(&count, "messageNumber", "c", 128, "print at most this many messages")
	f.StringVar(&sql, "sql", "", "only messages whose properties match this SQL92 expression")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic"); err != nil {
			return err
		}
		sel := client.Tag("*")
		if cmd.Flags().Changed("sql") {
			if _, err := filter.Compile(sql); err != nil {
				return usagef("--sql %q: %v", sql, err)
			}
			sel = client.SQL92(sql)
		}
		oneQueue := cmd.Flags().Changed("queueId")
		if oneQueue && brokerName == "" {
			return usagef("-i QUEUE_ID needs -b BROKER_NAME")
		}
		if count < 1 {
			return usagef("-c %d: the count must be at least 1", count)
		}
		if offset < 0 {
			return usagef("-o %d: the offset must be at least 0", offset)
		}
		pgroup := group
		if pgroup == "" {
			pgroup = toolsConsumerGroup
		}
		pc, err := a.pullConsumer(pgroup)
		if err != nil {
			return err
		}
		queues, err := pickQueues(ctx, pc, topic, brokerName, queueID, oneQueue)
		if err != nil {
			return err
		}
		var msgs []*client.Message
		commits := []committed{}
		for _, q := range queues {
			if len(msgs) >= count {
				break
			}
			start := offset
			if group != "" && !cmd.Flags().Changed("offset") {
				if start, err = pc.CommittedOffset(ctx, q); err != nil {
					return err
				}
				start = max(start, 0)
			}
			next, err := drain(ctx, pc, q, sel, start, min(pullBatch, count-len(msgs)), func(m *client.Message) bool {
				msgs = append(msgs, m)
				return len(msgs) >= count
			})
			if err != nil {
				return err
			}
			if group != "" && next != start {
				if err := pc.CommitOffset(ctx, q, next); err != nil {
					return err
				}
				commits = append(commits, committed{BrokerName: q.BrokerName, QueueID: q.QueueID, Offset: next})
			}
		}
		if a.json {
			views := make([]msgView, len(msgs))
			for i, m := range msgs {
				views[i] = viewOf(m)
			}
			return a.printJSON(map[string]any{"messages": views, "group": group, "committed": commits})
		}
		if err := a.printMessages(msgs); err != nil {
			return err
		}
		if len(msgs) > 0 {
			fmt.Fprintln(a.stdout)
		}
		fmt.Fprintf(a.stdout, "%d message(s) from %d queue(s)", len(msgs), len(queues))
		if group == "" {
			fmt.Fprintln(a.stdout, "; nothing committed (no -g)")
			return nil
		}
		fmt.Fprintf(a.stdout, "; committed for group %s:", group)
		for _, c := range commits {
			fmt.Fprintf(a.stdout, " %s#%d=%d", c.BrokerName, c.QueueID, c.Offset)
		}
		fmt.Fprintln(a.stdout)
		return nil
	})
	return cmd
}

func printMsgCmd(a *app) *cobra.Command {
	var topic, begin, end string
	cmd := &cobra.Command{
		Use:   "printMsg -t TOPIC [-s BEGIN] [-e END]",
		Short: "Print every queue's messages stored in a time range",
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	cmd.Flags().StringVarP(&begin, "beginTimestamp", "s", "", `stored at or after: ms, "now", RFC 3339 or yyyy-MM-dd#HH:mm:ss:SSS`)
	cmd.Flags().StringVarP(&end, "endTimestamp", "e", "", "stored at or before (same forms as -s)")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic"); err != nil {
			return err
		}
		bt, et, err := timeRange("s", begin, end)
		if err != nil {
			return err
		}
		pc, err := a.pullConsumer(toolsConsumerGroup)
		if err != nil {
			return err
		}
		queues, err := pickQueues(ctx, pc, topic, "", 0, false)
		if err != nil {
			return err
		}
		msgs := []*client.Message{}
		for _, q := range queues {
			start := int64(0)
			if !bt.IsZero() {
				if start, err = pc.OffsetAt(ctx, q, bt); err != nil {
					return err
				}
			}
			_, err := drain(ctx, pc, q, client.Tag("*"), start, pullBatch, func(m *client.Message) bool {
				if !et.IsZero() && m.StoreTimestamp.After(et) {
					return true
				}
				if bt.IsZero() || !m.StoreTimestamp.Before(bt) {
					msgs = append(msgs, m)
				}
				return false
			})
			if err != nil {
				return err
			}
		}
		if len(msgs) == 0 && !a.json {
			fmt.Fprintf(a.stdout, "no message in topic %s in that time range\n", topic)
			return nil
		}
		return a.printMessages(msgs)
	})
	return cmd
}
