package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/spf13/cobra"
)

func groupCommands(a *app) []*cobra.Command {
	return []*cobra.Command{updateSubGroupCmd(a), deleteSubGroupCmd(a), consumerProgressCmd(a),
		consumerConnectionCmd(a), consumerStatusCmd(a), getConsumerStatusCmd(a), resetOffsetByTimeCmd(a),
		producerConnectionCmd(a), popStatusCmd(a)}
}

// boolFlag is a RocketMQ-style boolean flag that takes a value
// ("-s false"), unlike pflag's bare booleans.
type boolFlag struct {
	short, long, usage string
	set                func(*protocol.SubscriptionGroupConfig, bool)
	v                  string
}

// intFlag is a numeric subscription group setting.
type intFlag struct {
	short, long, usage string
	set                func(*protocol.SubscriptionGroupConfig, int64)
	v                  int64
}

func updateSubGroupCmd(a *app) *cobra.Command {
	var group, brokerAddr, cluster string
	bools := []*boolFlag{
		{short: "s", long: "consumeEnable", usage: "whether the group may consume (true|false)",
			set: func(c *protocol.SubscriptionGroupConfig, v bool) { c.ConsumeEnable = v }},
		{short: "m", long: "consumeFromMinEnable", usage: "whether a new group starts at the min offset (true|false)",
			set: func(c *protocol.SubscriptionGroupConfig, v bool) { c.ConsumeFromMinEnable = v }},
		{short: "d", long: "consumeBroadcastEnable", usage: "whether broadcasting consumption is allowed (true|false)",
			set: func(c *protocol.SubscriptionGroupConfig, v bool) { c.ConsumeBroadcastEnable = v }},
		{short: "a", long: "notifyConsumerIdsChangedEnable", usage: "whether members are told when the group changes (true|false)",
			set: func(c *protocol.SubscriptionGroupConfig, v bool) { c.NotifyConsumerIdsChangedEnable = v }},
		{short: "o", long: "consumeMessageOrderly", usage: "whether RocketMQ 5 clients of the group consume FIFO, per message group (true|false)",
			set: func(c *protocol.SubscriptionGroupConfig, v bool) { c.ConsumeMessageOrderly = v }},
	}
	ints := []*intFlag{
		{short: "q", long: "retryQueueNums", usage: "retry queue count",
			set: func(c *protocol.SubscriptionGroupConfig, v int64) { c.RetryQueueNums = int32(v) }},
		{short: "r", long: "retryMaxTimes", usage: "retries before a message goes to %DLQ%<group> (RocketMQ 5 clients: max attempts = this + 1)",
			set: func(c *protocol.SubscriptionGroupConfig, v int64) { c.RetryMaxTimes = int32(v) }},
		{short: "i", long: "brokerId", usage: "broker id to consume from",
			set: func(c *protocol.SubscriptionGroupConfig, v int64) { c.BrokerID = v }},
		{short: "w", long: "whichBrokerWhenConsumeSlowly", usage: "broker id to consume from when consuming slowly",
			set: func(c *protocol.SubscriptionGroupConfig, v int64) { c.WhichBrokerWhenConsumeSlowly = v }},
	}
	cmd := &cobra.Command{
		Use:   "updateSubGroup -g GROUP (-b BROKER_ADDR | -c CLUSTER) [-r RETRY_MAX_TIMES] [-o BOOL] [-q N] [-s BOOL] ...",
		Short: "Create or update a consumer group's settings; settings not given keep their current value",
	}
	f := cmd.Flags()
	f.StringVarP(&group, "groupName", "g", "", "consumer group")
	f.StringVarP(&brokerAddr, "brokerAddr", "b", "", "broker address (ip:port)")
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster")
	for _, b := range bools {
		f.StringVarP(&b.v, b.long, b.short, "", b.usage)
	}
	for _, n := range ints {
		f.Int64VarP(&n.v, n.long, n.short, 0, n.usage)
	}
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "groupName"); err != nil {
			return err
		}
		if err := oneOf(cmd, "brokerAddr", "clusterName"); err != nil {
			return err
		}
		var edits []func(*protocol.SubscriptionGroupConfig)
		for _, b := range bools {
			if !cmd.Flags().Changed(b.long) {
				continue
			}
			v, err := strconv.ParseBool(b.v)
			if err != nil {
				return usagef("-%s %q: want true or false", b.short, b.v)
			}
			edits = append(edits, func(c *protocol.SubscriptionGroupConfig) { b.set(c, v) })
		}
		for _, n := range ints {
			if !cmd.Flags().Changed(n.long) {
				continue
			}
			if n.v < 0 {
				return usagef("-%s %d: must not be negative", n.short, n.v)
			}
			edits = append(edits, func(c *protocol.SubscriptionGroupConfig) { n.set(c, n.v) })
		}
		brokers, err := a.targets(ctx, brokerAddr, cluster)
		if err != nil {
			return err
		}
		type result struct {
			brokerRef
			Config protocol.SubscriptionGroupConfig `json:"config"`
		}
		var out []result
		for _, b := range brokers {
			var all protocol.SubscriptionGroupWrapper
			if err := a.callDecode(ctx, "broker", b.Addr, protocol.GetAllSubscriptionGroupConfig, nil, nil, &all); err != nil {
				return err
			}
			c, ok := all.SubscriptionGroupTable[group]
			if !ok {
				c = protocol.DefaultSubscriptionGroupConfig(group)
			}
			for _, e := range edits {
				e(&c)
			}
			if _, err := a.call(ctx, "broker", b.Addr, protocol.UpdateAndCreateSubscriptionGroup, nil, c); err != nil {
				return err
			}
			out = append(out, result{brokerRef: b, Config: c})
		}
		if a.json {
			return a.printJSON(out)
		}
		for _, r := range out {
			c := r.Config
			fmt.Fprintf(a.stdout, "update subscription group %s on %s success: retryMaxTimes=%d retryQueueNums=%d "+
				"consumeEnable=%t consumeFromMinEnable=%t consumeBroadcastEnable=%t brokerId=%d "+
				"whichBrokerWhenConsumeSlowly=%d notifyConsumerIdsChangedEnable=%t consumeMessageOrderly=%t\n",
				group, brokerLabel(r.brokerRef), c.RetryMaxTimes, c.RetryQueueNums, c.ConsumeEnable, c.ConsumeFromMinEnable,
				c.ConsumeBroadcastEnable, c.BrokerID, c.WhichBrokerWhenConsumeSlowly, c.NotifyConsumerIdsChangedEnable,
				c.ConsumeMessageOrderly)
		}
		return nil
	})
	return cmd
}

func deleteSubGroupCmd(a *app) *cobra.Command {
	var group, brokerAddr, cluster string
	cmd := &cobra.Command{
		Use:   "deleteSubGroup -g GROUP (-b BROKER_ADDR | -c CLUSTER)",
		Short: "Delete a consumer group's settings and its committed offsets",
	}
	cmd.Flags().StringVarP(&group, "groupName", "g", "", "consumer group")
	cmd.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "broker address (ip:port)")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "groupName"); err != nil {
			return err
		}
		if err := oneOf(cmd, "brokerAddr", "clusterName"); err != nil {
			return err
		}
		brokers, err := a.targets(ctx, brokerAddr, cluster)
		if err != nil {
			return err
		}
		for _, b := range brokers {
			if _, err := a.call(ctx, "broker", b.Addr, protocol.DeleteSubscriptionGroup,
				&protocol.DeleteSubscriptionGroupRequestHeader{GroupName: group}, nil); err != nil {
				return err
			}
			if !a.json {
				fmt.Fprintf(a.stdout, "delete subscription group %s from %s success (its committed offsets there are gone too)\n",
					group, brokerLabel(b))
			}
		}
		if a.json {
			return a.printJSON(map[string]any{"group": group, "brokers": brokers})
		}
		return nil
	})
	return cmd
}

// connView is one client of a consumer group, merged over the brokers
// that know it.
type connView struct {
	ClientID      string            `json:"clientId"`
	ClientAddr    string            `json:"clientAddr"`
	Language      string            `json:"language"`
	Version       int32             `json:"version"`
	Subscriptions map[string]string `json:"subscriptions"` // topic → expression
	// ExpressionTypes is topic → TAG or SQL92 (TAG when the broker does
	// not say, as Apache RocketMQ's).
	ExpressionTypes map[string]string `json:"expressionTypes"`
	Brokers         []string          `json:"brokers"` // names (or addresses) of the brokers it is registered with
	addrs           []string          // addresses of those brokers
}

// subscriptionLabel is how a member subscribes to topic: its expression
// type and quoted expression, TAG:"TagA" or SQL92:"a > 1".
func (c connView) subscriptionLabel(topic string) string {
	return c.ExpressionTypes[topic] + ":" + strconv.Quote(c.Subscriptions[topic])
}

// groupConns is what consumerConnection reports.
type groupConns struct {
	Group            string     `json:"group"`
	ConsumeType      string     `json:"consumeType"`
	MessageModel     string     `json:"messageModel"`
	ConsumeFromWhere string     `json:"consumeFromWhere"`
	Connections      []connView `json:"connections"`
	Consistent       bool       `json:"consistent"` // every member subscribes the same way
	Warning          string     `json:"warning,omitempty"`
}

// consumerConnections asks every master for the group's live clients
// (GET_CONSUMER_CONNECTION_LIST). A group no broker knows is an error.
func (a *app) consumerConnections(ctx context.Context, group string) (groupConns, error) {
	brokers, err := a.readBrokers(ctx, "")
	if err != nil {
		return groupConns{}, err
	}
	ad, err := a.adminClient()
	if err != nil {
		return groupConns{}, err
	}
	out := groupConns{Group: group, Connections: []connView{}}
	byID := map[string]*connView{}
	var offline []error
	for _, b := range brokers {
		cc, err := ad.ConsumerConnections(ctx, b.Addr, group)
		err = brokerErr(b.Addr, protocol.GetConsumerConnectionList, err)
		if hasCode(err, protocol.ConsumerNotOnline) {
			offline = append(offline, err)
			continue
		}
		if err != nil {
			return out, err
		}
		if out.ConsumeType == "" {
			out.ConsumeType, out.MessageModel, out.ConsumeFromWhere = cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere
		}
		for _, c := range cc.Members {
			v := byID[c.ClientID]
			if v == nil {
				v = &connView{ClientID: c.ClientID, ClientAddr: c.ClientAddr, Language: c.Language, Version: c.Version,
					Subscriptions: map[string]string{}, ExpressionTypes: map[string]string{}}
				byID[c.ClientID] = v
			}
			maps.Copy(v.Subscriptions, c.Subscriptions)
			maps.Copy(v.ExpressionTypes, c.ExpressionTypes)
			v.Brokers = append(v.Brokers, brokerLabel(b))
			v.addrs = append(v.addrs, b.Addr)
		}
	}
	if len(byID) == 0 {
		return out, fmt.Errorf("consumer group %s has no live client on any broker: %w", group, joinLine(offline))
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		out.Connections = append(out.Connections, *byID[id])
	}
	out.Warning = subscriptionWarning(group, out.Connections)
	out.Consistent = out.Warning == ""
	return out, nil
}

// subscriptionWarning describes how members of a group subscribe
// differently, or returns "" when they all subscribe alike. Members of one
// group must subscribe alike, or rebalancing hands queues to clients that
// filter their messages away.
func subscriptionWarning(group string, conns []connView) string {
	topics := map[string]bool{}
	for _, c := range conns {
		for t := range c.Subscriptions {
			topics[t] = true
		}
	}
	var diffs []string
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		byExpr := map[string][]string{}
		for _, c := range conns {
			label := "not subscribed"
			if _, ok := c.Subscriptions[t]; ok {
				label = c.subscriptionLabel(t)
			}
			byExpr[label] = append(byExpr[label], c.ClientID)
		}
		if len(byExpr) < 2 {
			continue
		}
		var parts []string
		for _, e := range slices.Sorted(maps.Keys(byExpr)) {
			parts = append(parts, e+" ("+strings.Join(byExpr[e], ", ")+")")
		}
		diffs = append(diffs, "topic "+t+": "+strings.Join(parts, " vs "))
	}
	if len(diffs) == 0 {
		return ""
	}
	return "WARNING: members of group " + group + " subscribe differently; " + strings.Join(diffs, "; ") +
		". Members of one group must subscribe alike, or some messages are never consumed."
}

func consumerConnectionCmd(a *app) *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "consumerConnection -g GROUP",
		Short: "List a consumer group's live clients and their subscriptions",
	}
	cmd.Flags().StringVarP(&group, "consumerGroup", "g", "", "consumer group")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "consumerGroup"); err != nil {
			return err
		}
		gc, err := a.consumerConnections(ctx, group)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(gc)
		}
		t := newTable(a.stdout, "ClientId", "Addr", "Language", "Version", "Subscriptions")
		for _, c := range gc.Connections {
			var subs []string
			for _, topic := range slices.Sorted(maps.Keys(c.Subscriptions)) {
				subs = append(subs, topic+"="+c.subscriptionLabel(topic))
			}
			t.row(c.ClientID, c.ClientAddr, c.Language, protocol.VersionName(c.Version), strings.Join(subs, " "))
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\nConsumeType: %s\nMessageModel: %s\nConsumeFromWhere: %s\n",
			gc.ConsumeType, gc.MessageModel, gc.ConsumeFromWhere)
		if gc.Warning != "" {
			fmt.Fprintln(a.stdout, gc.Warning)
		}
		return nil
	})
	return cmd
}
