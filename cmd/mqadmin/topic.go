package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	topicpkg "github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/spf13/cobra"
)

func topicCommands(a *app) []*cobra.Command {
	return []*cobra.Command{updateTopicCmd(a), deleteTopicCmd(a), topicListCmd(a), topicRouteCmd(a), topicStatusCmd(a)}
}

// permString shows topic permission bits as RocketMQ does (6 = RW).
func permString(p int) string {
	s := ""
	if p&protocol.PermRead != 0 {
		s += "R"
	}
	if p&protocol.PermWrite != 0 {
		s += "W"
	}
	if s == "" {
		s = "-"
	}
	return fmt.Sprintf("%d (%s)", p, s)
}

func updateTopicCmd(a *app) *cobra.Command {
	var (
		topic, brokerAddr, cluster string
		read, write, perm          int
		order, attrs               string
	)
	cmd := &cobra.Command{
		Use:   "updateTopic -t TOPIC (-b BROKER_ADDR | -c CLUSTER) [-r N] [-w N] [-p PERM] [-o BOOL] [-a +message.type=TYPE]",
		Short: "Create or update a topic on one broker or on every master of a cluster",
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&brokerAddr, "brokerAddr", "b", "", "create on this broker (ip:port)")
	f.StringVarP(&cluster, "clusterName", "c", "", "create on every master of this cluster")
	f.IntVarP(&read, "readQueueNums", "r", 8, "read queue count")
	f.IntVarP(&write, "writeQueueNums", "w", 8, "write queue count")
	f.IntVarP(&perm, "perm", "p", 6, "permission: 2 write, 4 read, 6 read+write")
	f.StringVarP(&order, "order", "o", "false", "whether the topic is ordered (true|false)")
	f.StringVarP(&attrs, "attributes", "a", "", "RocketMQ 5 topic attributes to change: +message.type=NORMAL|FIFO|DELAY|TRANSACTION|MIXED "+
		"(the message types the topic takes; unset is MIXED), -message.type to remove; not given: kept")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic"); err != nil {
			return err
		}
		if err := oneOf(cmd, "brokerAddr", "clusterName"); err != nil {
			return err
		}
		if read < 1 || write < 1 || read > 1024 || write > 1024 {
			return usagef("-r and -w must be within 1..1024")
		}
		if perm != protocol.PermWrite && perm != protocol.PermRead && perm != protocol.PermRead|protocol.PermWrite {
			return usagef("-p %d: permission is 2 (write), 4 (read) or 6 (read+write)", perm)
		}
		ordered, err := strconv.ParseBool(order)
		if err != nil {
			return usagef("-o %q: want true or false", order)
		}
		if _, err := topicpkg.ApplyAttributes(nil, attrs); err != nil {
			return usagef("-a %q: %s", attrs, strings.TrimPrefix(err.Error(), "topic: "))
		}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		brokers, err := a.targets(ctx, brokerAddr, cluster)
		if err != nil {
			return err
		}
		var errs []error
		var done []brokerRef
		for _, b := range brokers {
			err := ad.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueues: read, WriteQueues: write, Perm: perm,
				Order: ordered, Attributes: attrs, BrokerAddr: b.Addr})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, b)
		}
		var orderConf *string
		if ordered && len(done) > 0 {
			v, err := a.updateOrderConf(ctx, topic, write, done[0], cluster)
			if err != nil {
				errs = append(errs, err)
			} else {
				orderConf = &v
			}
		}
		if err := a.reportTopicUpdate(topic, read, write, perm, ordered, attrs, done, orderConf); err != nil {
			return err
		}
		if write > read && len(done) > 0 {
			// NB: Java's mqadmin takes it silently; a shrink lowers -w first.
			fmt.Fprintf(a.stderr, "mqadmin: warning: topic %s has %d write queues but %d read queues: messages sent to "+
				"queues %d to %d reach no consumer until -r is at least %d\n", topic, write, read, read, write-1, write)
		}
		return errors.Join(errs...)
	})
	return cmd
}

func (a *app) reportTopicUpdate(topic string, read, write, perm int, order bool, attrs string, done []brokerRef, orderConf *string) error {
	if a.json {
		v := map[string]any{"topic": topic, "readQueueNums": read, "writeQueueNums": write, "perm": perm,
			"order": order, "brokers": nonNil(done)}
		if attrs != "" {
			v["attributes"] = attrs
		}
		if orderConf != nil {
			v["orderTopicConf"] = *orderConf
		}
		return a.printJSON(v)
	}
	for _, b := range done {
		fmt.Fprintf(a.stdout, "create topic %s on %s success: readQueueNums=%d writeQueueNums=%d perm=%s order=%t%s\n",
			topic, brokerLabel(b), read, write, permString(perm), order, attrsNote(attrs))
	}
	if orderConf != nil {
		fmt.Fprintf(a.stdout, "order config of topic %s on the nameservers: %s\n", topic, *orderConf)
	}
	return nil
}

// attrsNote is the success line's note of attribute changes.
func attrsNote(attrs string) string {
	if attrs == "" {
		return ""
	}
	return " attributes=" + attrs
}

// updateOrderConf writes topic's ORDER_TOPIC_CONFIG entry ("brokerA:8;
// brokerB:8") on every nameserver, as RocketMQ's updateTopic -o true does:
// with a cluster, every broker of the cluster with write queues each (the
// entry is replaced); with one broker (b, given by address), that broker's
// part of the entry. It returns the entry now stored. (mqadmin
// deleteKvConfig -s ORDER_TOPIC_CONFIG -k TOPIC removes it.)
func (a *app) updateOrderConf(ctx context.Context, topic string, write int, b brokerRef, cluster string) (string, error) {
	ns, err := a.nameServers()
	if err != nil {
		return "", err
	}
	ci, err := a.clusterInfo(ctx)
	if err != nil {
		return "", err
	}
	var names []string
	if cluster != "" {
		// NB: every broker of the cluster, as Java: a broker whose master is
		// down keeps its queues, and its keys stay where they were.
		names = ci.Clusters[cluster]
	} else {
		for name, bi := range ci.Brokers {
			if bi.Addrs[0] == b.Addr {
				names = []string{name}
			}
		}
		if names == nil {
			return "", fmt.Errorf("broker %s is not registered with the nameservers as a master: cannot name it in "+
				"the order config of topic %s", b.Addr, topic)
		}
	}
	var final string
	for i, addr := range ns {
		parts := map[string]int{}
		if cluster == "" {
			resp, err := a.call(ctx, "nameserver", addr, protocol.GetKVConfig, &protocol.KVConfigRequestHeader{
				Namespace: protocol.OrderTopicConfigNamespace, Key: topic}, nil, protocol.QueryNotFound)
			if err != nil {
				return "", orderConfErr(topic, ns[:i], err)
			}
			if resp.Code == protocol.Success {
				var h protocol.GetKVConfigResponseHeader
				if err := h.FromExt(resp.ExtFields); err != nil {
					return "", fmt.Errorf("nameserver %s answered GET_KV_CONFIG with a bad header: %w", addr, err)
				}
				for _, e := range strings.Split(h.Value, ";") {
					name, n, ok := strings.Cut(strings.TrimSpace(e), ":")
					if v, err := strconv.Atoi(strings.TrimSpace(n)); ok && name != "" && err == nil {
						parts[strings.TrimSpace(name)] = v
					}
				}
			}
		}
		for _, name := range names {
			parts[name] = write
		}
		var entries []string
		for _, name := range slices.Sorted(maps.Keys(parts)) {
			entries = append(entries, name+":"+strconv.Itoa(parts[name]))
		}
		v := strings.Join(entries, ";")
		if i > 0 && v != final {
			fmt.Fprintf(a.stderr, "mqadmin: nameserver %s now holds order config %s for topic %s, nameserver %s holds %s\n",
				addr, v, topic, ns[0], final)
		}
		if i == 0 {
			final = v
		}
		h := &protocol.KVConfigRequestHeader{Namespace: protocol.OrderTopicConfigNamespace, Key: topic, Value: v}
		if _, err := a.call(ctx, "nameserver", addr, protocol.PutKVConfig, h, nil); err != nil {
			return "", orderConfErr(topic, ns[:i], err)
		}
	}
	return final, nil
}

// orderConfErr says which nameservers got the order config before err.
func orderConfErr(topic string, done []string, err error) error {
	if len(done) == 0 {
		return fmt.Errorf("order config of topic %s not written: %w", topic, err)
	}
	return fmt.Errorf("order config of topic %s written on nameservers %s only: %w", topic, strings.Join(done, ";"), err)
}

func brokerLabel(b brokerRef) string {
	if b.Name == "" {
		return b.Addr
	}
	return b.Name + " (" + b.Addr + ")"
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func deleteTopicCmd(a *app) *cobra.Command {
	var topic, cluster string
	cmd := &cobra.Command{
		Use:   "deleteTopic -t TOPIC -c CLUSTER",
		Short: "Delete a topic from every master of a cluster and from the nameservers",
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "cluster to delete the topic from")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic", "clusterName"); err != nil {
			return err
		}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		brokers, err := a.masters(ctx, cluster)
		if err != nil {
			return err
		}
		if err := ad.DeleteTopic(ctx, topic, cluster); err != nil {
			return err
		}
		ns, _ := a.nameServers()
		if a.json {
			return a.printJSON(map[string]any{"topic": topic, "cluster": cluster, "brokers": brokers, "nameservers": ns})
		}
		for _, b := range brokers {
			fmt.Fprintf(a.stdout, "delete topic %s from broker %s success\n", topic, brokerLabel(b))
		}
		fmt.Fprintf(a.stdout, "delete topic %s from nameserver %s success\n", topic, strings.Join(ns, ";"))
		return nil
	})
	return cmd
}

func topicListCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "topicList", Short: "List every topic the nameservers know"}
	cmd.RunE = action(func(ctx context.Context, _ *cobra.Command) error {
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		topics, err := ad.TopicList(ctx)
		if err != nil {
			return a.nsErr(err)
		}
		if a.json {
			return a.printJSON(map[string]any{"topics": nonNil(topics)})
		}
		for _, t := range topics {
			fmt.Fprintln(a.stdout, t)
		}
		return nil
	})
	return cmd
}

// routeView is a topic route as mqadmin prints it.
type routeView struct {
	Topic   string       `json:"topic"`
	Brokers []brokerView `json:"brokers"`
	Queues  []queueView  `json:"queues"`
}

type brokerView struct {
	Cluster    string           `json:"cluster"`
	BrokerName string           `json:"brokerName"`
	Addrs      map[int64]string `json:"brokerAddrs"`
	// GrpcAddrs: the RocketMQ 5 endpoints by broker id, where served.
	GrpcAddrs map[int64]string `json:"grpcAddrs,omitempty"`
}

type queueView struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
}

func topicRouteCmd(a *app) *cobra.Command {
	var topic string
	cmd := &cobra.Command{Use: "topicRoute -t TOPIC", Short: "Show which brokers serve a topic, and its queues"}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic"); err != nil {
			return err
		}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		r, err := ad.TopicRoute(ctx, topic)
		if err != nil {
			return a.nsErr(err)
		}
		v := routeView{Topic: topic, Brokers: []brokerView{}, Queues: []queueView{}}
		for _, b := range r.Brokers {
			v.Brokers = append(v.Brokers, brokerView{Cluster: b.Cluster, BrokerName: b.BrokerName, Addrs: b.Addrs, GrpcAddrs: b.GrpcAddrs})
		}
		for _, q := range r.Queues {
			v.Queues = append(v.Queues, queueView{BrokerName: q.BrokerName, ReadQueueNums: q.ReadQueues,
				WriteQueueNums: q.WriteQueues, Perm: q.Perm})
		}
		slices.SortFunc(v.Brokers, func(x, y brokerView) int { return strings.Compare(x.BrokerName, y.BrokerName) })
		slices.SortFunc(v.Queues, func(x, y queueView) int { return strings.Compare(x.BrokerName, y.BrokerName) })
		if a.json {
			return a.printJSON(v)
		}
		t := newTable(a.stdout, "Cluster", "Broker Name", "BID", "Addr", "gRPC Addr")
		for _, b := range v.Brokers {
			for _, id := range slices.Sorted(maps.Keys(b.Addrs)) {
				grpc := b.GrpcAddrs[id]
				if grpc == "" {
					grpc = "-" // NB: serves RocketMQ 4.x clients only
				}
				t.row(b.Cluster, b.BrokerName, id, b.Addrs[id], grpc)
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(a.stdout)
		t = newTable(a.stdout, "Broker Name", "Read Queues", "Write Queues", "Perm")
		for _, q := range v.Queues {
			t.row(q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, permString(q.Perm))
		}
		return t.flush()
	})
	return cmd
}

// queueStatView is one queue's bounds in topicStatus.
type queueStatView struct {
	BrokerName          string  `json:"brokerName"`
	QueueID             int32   `json:"queueId"`
	MinOffset           int64   `json:"minOffset"`
	MaxOffset           int64   `json:"maxOffset"`
	LastUpdateTimestamp int64   `json:"lastUpdateTimestamp"`
	LastUpdateTime      *string `json:"lastUpdateTime"` // null when the queue is empty
}

func topicStatusCmd(a *app) *cobra.Command {
	var topic string
	cmd := &cobra.Command{Use: "topicStatus -t TOPIC", Short: "Show every queue's min and max offset and last update time"}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "topic"); err != nil {
			return err
		}
		brokers, _, err := a.topicBrokers(ctx, topic)
		if err != nil {
			return err
		}
		out := []queueStatView{}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		for _, b := range brokers {
			qs, err := ad.TopicStats(ctx, b.Addr, b.Name, topic)
			if err != nil {
				return brokerErr(b.Addr, protocol.GetTopicStatsInfo, err)
			}
			for _, q := range qs {
				var last int64
				if !q.LastUpdate.IsZero() {
					last = q.LastUpdate.UnixMilli()
				}
				out = append(out, queueStatView{BrokerName: q.Queue.BrokerName, QueueID: int32(q.Queue.QueueID), MinOffset: q.MinOffset,
					MaxOffset: q.MaxOffset, LastUpdateTimestamp: last, LastUpdateTime: jsonTime(last)})
			}
		}
		slices.SortFunc(out, func(x, y queueStatView) int {
			if c := strings.Compare(x.BrokerName, y.BrokerName); c != 0 {
				return c
			}
			return int(x.QueueID - y.QueueID)
		})
		if a.json {
			return a.printJSON(map[string]any{"topic": topic, "queues": out})
		}
		t := newTable(a.stdout, "Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated")
		for _, q := range out {
			t.row(q.BrokerName, q.QueueID, q.MinOffset, q.MaxOffset, fmtTime(q.LastUpdateTimestamp))
		}
		return t.flush()
	})
	return cmd
}
