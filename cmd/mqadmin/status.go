package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/spf13/cobra"
)

// queueStatus is one queue of a client's running info, for JSON output.
type queueStatus struct {
	protocol.MessageQueue
	protocol.ProcessQueueInfo
}

// clientStatus is one client's running info, for JSON output.
type clientStatus struct {
	ClientID        string                            `json:"clientId"`
	ClientAddr      string                            `json:"clientAddr"`
	Broker          string                            `json:"broker"` // the broker that relayed the request
	Properties      map[string]string                 `json:"properties"`
	SubscriptionSet []protocol.SubscriptionData       `json:"subscriptionSet"`
	Queues          []queueStatus                     `json:"queues"`
	StatusTable     map[string]protocol.ConsumeStatus `json:"statusTable"`
	JStack          string                            `json:"jstack,omitempty"`
	Error           string                            `json:"error,omitempty"`
}

// runningInfo asks the client c, through the first broker it is
// registered with, for its running info (GET_CONSUMER_RUNNING_INFO).
func (a *app) runningInfo(ctx context.Context, group string, c connView, jstack bool) clientStatus {
	st := clientStatus{ClientID: c.ClientID, ClientAddr: c.ClientAddr}
	if len(c.addrs) == 0 {
		st.Error = "registered with no broker"
		return st
	}
	ad, err := a.adminClient()
	if err != nil {
		st.Error = err.Error()
		return st
	}
	// NB: through the next broker the client is registered with when one
	// cannot be reached; an answer (even an error) is the client's.
	var info protocol.ConsumerRunningInfo
	for i, addr := range c.addrs {
		st.Broker = c.Brokers[i]
		info, err = ad.ConsumerRunningInfo(ctx, addr, group, c.ClientID, jstack)
		err = brokerErr(addr, protocol.GetConsumerRunningInfo, err)
		var se *serverError
		if !errors.As(err, &se) || se.err == nil {
			break
		}
	}
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.Properties, st.SubscriptionSet, st.StatusTable, st.JStack = info.Properties, info.SubscriptionSet, info.StatusTable, info.JStack
	st.Queues = []queueStatus{}
	for _, q := range slices.SortedFunc(maps.Keys(info.MQTable), protocol.CompareQueues) {
		st.Queues = append(st.Queues, queueStatus{MessageQueue: q, ProcessQueueInfo: info.MQTable[q]})
	}
	return st
}

func consumerStatusCmd(a *app) *cobra.Command {
	var group, clientID string
	var jstack bool
	cmd := &cobra.Command{
		Use:   "consumerStatus -g GROUP [-i CLIENT_ID] [-s]",
		Short: "Show what a consumer group's clients are doing: queues held, cached messages, rates (running info)",
	}
	f := cmd.Flags()
	f.StringVarP(&group, "consumerGroup", "g", "", "consumer group")
	f.StringVarP(&clientID, "clientId", "i", "", "show this client in detail")
	f.BoolVarP(&jstack, "jstackEnable", "s", false, "with -i: also print the client's goroutine stacks")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "consumerGroup"); err != nil {
			return err
		}
		if jstack && clientID == "" {
			return usagef("-s needs -i CLIENT_ID: stacks are printed for one client")
		}
		gc, err := a.consumerConnections(ctx, group)
		if err != nil {
			return err
		}
		conns := gc.Connections
		if clientID != "" {
			i := slices.IndexFunc(conns, func(c connView) bool { return c.ClientID == clientID })
			if i < 0 {
				var ids []string
				for _, c := range conns {
					ids = append(ids, c.ClientID)
				}
				return fmt.Errorf("client %s is not a live member of group %s; its members are: %s",
					clientID, group, strings.Join(ids, ", "))
			}
			conns = conns[i : i+1]
		}
		var all []clientStatus
		var failed int
		for _, c := range conns {
			st := a.runningInfo(ctx, group, c, jstack)
			if st.Error != "" {
				failed++
			}
			all = append(all, st)
		}
		switch {
		case a.json:
			err = a.printJSON(map[string]any{"group": group, "clients": all, "warning": gc.Warning})
		case clientID != "":
			err = a.printClientStatus(all[0], jstack)
		default:
			err = a.printGroupStatus(all, gc.Warning)
		}
		if err != nil {
			return err
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d clients did not report their running info", failed, len(all))
		}
		return nil
	})
	return cmd
}

// statusTotals sums a client's topics' rates.
func statusTotals(st clientStatus) (pull, ok, fail float64, failedHour int64) {
	for _, s := range st.StatusTable {
		pull += s.PullTPS
		ok += s.ConsumeOKTPS
		fail += s.ConsumeFailedTPS
		failedHour += s.ConsumeFailedMsgs
	}
	return
}

func (a *app) printGroupStatus(all []clientStatus, warning string) error {
	t := newTable(a.stdout, "ClientId", "Addr", "Type", "Orderly", "Queues", "Cached", "PullTPS", "ConsumeOKTPS",
		"FailedTPS", "Failed(1h)")
	var errs []string
	for _, st := range all {
		if st.Error != "" {
			t.row(st.ClientID, st.ClientAddr, "-", "-", "-", "-", "-", "-", "-", "-")
			errs = append(errs, st.ClientID+": "+st.Error)
			continue
		}
		cached := 0
		for _, q := range st.Queues {
			cached += q.CachedMsgCount
		}
		pull, ok, fail, failedHour := statusTotals(st)
		t.row(st.ClientID, st.ClientAddr, consumeKind(st.Properties[protocol.PropConsumeType]),
			orDash(st.Properties[protocol.PropConsumeOrderly]), len(st.Queues), cached,
			fmtRate(pull), fmtRate(ok), fmtRate(fail), failedHour)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, e := range errs {
		fmt.Fprintln(a.stdout, "ERROR "+e)
	}
	if warning != "" {
		fmt.Fprintln(a.stdout, warning)
	}
	return nil
}

func (a *app) printClientStatus(st clientStatus, jstack bool) error {
	w := a.stdout
	if st.Error != "" {
		fmt.Fprintf(w, "client %s: %s\n", st.ClientID, st.Error)
		return nil
	}
	fmt.Fprintf(w, "Client %s (%s), through broker %s\n\n#Properties\n", st.ClientID, st.ClientAddr, st.Broker)
	for _, k := range slices.Sorted(maps.Keys(st.Properties)) {
		fmt.Fprintf(w, "%-40s: %s\n", k, st.Properties[k])
	}
	fmt.Fprintln(w, "\n#Subscriptions")
	for _, s := range st.SubscriptionSet {
		fmt.Fprintf(w, "%s %q (version %d)\n", s.Topic, s.SubString, s.SubVersion)
	}
	fmt.Fprintln(w)
	t := newTable(w, "Topic", "Broker", "QID", "CommitOffset", "Cached", "CachedMin", "CachedMax", "CachedMiB",
		"Locked", "LastLock", "LastPull", "LastConsume", "Dropped")
	for _, q := range st.Queues {
		t.row(q.Topic, q.BrokerName, q.QueueID, q.CommitOffset, q.CachedMsgCount, q.CachedMsgMinOffset,
			q.CachedMsgMaxOffset, q.CachedMsgSizeInMiB, q.Locked, fmtTime(q.LastLockTimestamp), fmtTime(q.LastPullTimestamp),
			fmtTime(q.LastConsumeTimestamp), q.Dropped)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "Topic", "PullRT(ms)", "PullTPS", "ConsumeRT(ms)", "ConsumeOKTPS", "FailedTPS", "Failed(1h)")
	for _, topic := range slices.Sorted(maps.Keys(st.StatusTable)) {
		s := st.StatusTable[topic]
		t.row(topic, fmtRate(s.PullRT), fmtRate(s.PullTPS), fmtRate(s.ConsumeRT), fmtRate(s.ConsumeOKTPS),
			fmtRate(s.ConsumeFailedTPS), s.ConsumeFailedMsgs)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if jstack {
		if st.JStack == "" {
			st.JStack = "(the client sent no stacks: the official Go client ignores jstackEnable)"
		}
		fmt.Fprintf(w, "\n#Goroutines\n%s\n", st.JStack)
	}
	return nil
}

func consumeKind(t string) string {
	switch t {
	case "CONSUME_PASSIVELY":
		return "push"
	case "CONSUME_ACTIVELY":
		return "pull"
	}
	return orDash(t)
}

func fmtRate(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// consumeDirectly hands the message id names to a consumer through the
// broker that stores it (CONSUME_MESSAGE_DIRECTLY) and prints what the
// consumer's handler answered.
func (a *app) consumeDirectly(ctx context.Context, id, group, clientID string) error {
	host, _, err := message.ParseOffsetMsgID(id)
	if err != nil {
		return usagef("-i %s is not an offset message id: %v", id, err)
	}
	ad, err := a.adminClient()
	if err != nil {
		return err
	}
	res, err := ad.ConsumeDirectly(ctx, id, group, clientID)
	if err != nil {
		return fmt.Errorf("consume %s directly on client %s of group %s: %w", id, clientID, group,
			brokerErr(host.String(), protocol.ConsumeMessageDirectly, err))
	}
	if a.json {
		return a.printJSON(map[string]any{"msgId": id, "group": group, "clientId": clientID, "order": res.Order,
			"autoCommit": res.AutoCommit, "consumeResult": res.ConsumeResult.String(), "remark": res.Remark,
			"spentTimeMillis": res.SpentTimeMills})
	}
	fmt.Fprintf(a.stdout, "message %s consumed directly by client %s of group %s: %s in %d ms",
		id, clientID, group, res.ConsumeResult, res.SpentTimeMills)
	if res.Remark != "" {
		fmt.Fprintf(a.stdout, " (%s)", res.Remark)
	}
	fmt.Fprintln(a.stdout)
	return nil
}

// queueOffset is one row of getConsumerStatus.
type queueOffset struct {
	protocol.MessageQueue
	Offset int64 `json:"offset"`
}

func getConsumerStatusCmd(a *app) *cobra.Command {
	var group, topic, clientID string
	cmd := &cobra.Command{
		Use:   "getConsumerStatus -g GROUP -t TOPIC [-i CLIENT_ID]",
		Short: "Show the offsets each live client of a group holds for a topic's queues (asked through the brokers)",
	}
	f := cmd.Flags()
	f.StringVarP(&group, "consumerGroup", "g", "", "consumer group")
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.StringVarP(&clientID, "originClientId", "i", "", "only this client")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "consumerGroup", "topic"); err != nil {
			return err
		}
		brokers, _, err := a.topicBrokers(ctx, topic)
		if err != nil {
			return err
		}
		// NB: every broker asks the same clients, and a client answers
		// with all its queues of the topic: merged by queue.
		tables := map[string]map[protocol.MessageQueue]int64{}
		var warnings []string
		var errs []error
		for _, b := range brokers {
			resp, err := a.callRelayed(ctx, "broker", b.Addr, protocol.InvokeBrokerToGetConsumerStatus,
				&protocol.GetConsumerStatusRequestHeader{Topic: topic, Group: group, ClientAddr: clientID}, nil)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			st, err := protocol.DecodeGetConsumerStatusBody(resp.Body)
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %s answered with a consumer status mqadmin cannot read: %w", b.Addr, err))
				continue
			}
			if resp.Remark != "" {
				warnings = append(warnings, "broker "+brokerLabel(b)+": "+resp.Remark)
			}
			for id, table := range st.ConsumerTable {
				if tables[id] == nil {
					tables[id] = map[protocol.MessageQueue]int64{}
				}
				maps.Copy(tables[id], table)
			}
		}
		byClient := map[string][]queueOffset{}
		for id, table := range tables {
			byClient[id] = []queueOffset{}
			for _, q := range slices.SortedFunc(maps.Keys(table), protocol.CompareQueues) {
				byClient[id] = append(byClient[id], queueOffset{MessageQueue: q, Offset: table[q]})
			}
		}
		if len(byClient) == 0 {
			return fmt.Errorf("no client of group %s reported offsets of topic %s: %w", group, topic, joinLine(errs))
		}
		if a.json {
			if err := a.printJSON(map[string]any{"group": group, "topic": topic, "clients": byClient,
				"warnings": nonNil(warnings)}); err != nil {
				return err
			}
		} else {
			t := newTable(a.stdout, "ClientId", "Topic", "Broker", "QID", "Offset")
			for _, id := range slices.Sorted(maps.Keys(byClient)) {
				if len(byClient[id]) == 0 {
					t.row(id, topic, "-", "-", "-")
				}
				for _, q := range byClient[id] {
					t.row(id, q.Topic, q.BrokerName, q.QueueID, q.Offset)
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(a.stdout, "WARNING "+w)
			}
		}
		return errors.Join(errs...)
	})
	return cmd
}
