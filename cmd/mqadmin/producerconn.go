package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/protocol"
)

// producerConn is one client of a producer group, merged over the brokers
// that know it.
type producerConn struct {
	ClientID   string   `json:"clientId"`
	ClientAddr string   `json:"clientAddr"`
	Language   string   `json:"language"`
	Version    int32    `json:"version"`
	Brokers    []string `json:"brokers"` // names of the brokers it is registered with
}

// producerConnections asks each broker of topic's route for the producer
// group's live clients (GET_PRODUCER_CONNECTION_LIST). Apache RocketMQ's
// mqadmin asks one broker of the route; every broker is asked here, so a
// producer connected to another one is listed too.
func (a *app) producerConnections(ctx context.Context, group, topic string) ([]producerConn, error) {
	brokers, _, err := a.topicBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	ad, err := a.adminClient()
	if err != nil {
		return nil, err
	}
	byKey := map[string]*producerConn{}
	var none []error
	for _, b := range brokers {
		ms, err := ad.ProducerConnections(ctx, b.Addr, group)
		err = brokerErr(b.Addr, protocol.GetProducerConnectionList, err)
		if hasCode(err, protocol.SystemError) {
			none = append(none, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			k := m.ClientID + "\x00" + m.ClientAddr
			v := byKey[k]
			if v == nil {
				v = &producerConn{ClientID: m.ClientID, ClientAddr: m.ClientAddr, Language: m.Language, Version: m.Version}
				byKey[k] = v
			}
			v.Brokers = append(v.Brokers, brokerLabel(b))
		}
	}
	if len(byKey) == 0 {
		return nil, fmt.Errorf("producer group %s has no live client on the brokers of topic %s: %w", group, topic, joinLine(none))
	}
	out := make([]producerConn, 0, len(byKey))
	for _, v := range byKey {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(x, y producerConn) int {
		return strings.Compare(x.ClientID+"\x00"+x.ClientAddr, y.ClientID+"\x00"+y.ClientAddr)
	})
	return out, nil
}

func producerConnectionCmd(a *app) *cobra.Command {
	var group, topic string
	cmd := &cobra.Command{
		Use:   "producerConnection -g GROUP -t TOPIC",
		Short: "List a producer group's live clients (RocketMQ 5 producers: -g names the topic)",
		Long: "List a producer group's live clients on the brokers of a topic. RocketMQ 5 producers have no group:\n" +
			"the brokers list them under each topic they publish, so -g TOPIC -t TOPIC finds them.",
	}
	cmd.Flags().StringVarP(&group, "producerGroup", "g", "", "producer group (a topic for RocketMQ 5 producers)")
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic whose brokers to ask")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "producerGroup", "topic"); err != nil {
			return err
		}
		conns, err := a.producerConnections(ctx, group, topic)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(map[string]any{"group": group, "topic": topic, "connections": conns})
		}
		t := newTable(a.stdout, "ClientId", "Addr", "Language", "Version", "Brokers")
		for _, c := range conns {
			t.row(c.ClientID, c.ClientAddr, c.Language, protocol.VersionName(c.Version), strings.Join(c.Brokers, ","))
		}
		return t.flush()
	})
	return cmd
}
