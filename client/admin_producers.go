package client

import (
	"cmp"
	"context"
	"slices"

	"github.com/sluicemq/sluice/internal/protocol"
)

// ProducerMember is one live client of a producer group.
type ProducerMember struct {
	ClientID   string
	ClientAddr string
	Language   string
	Version    int32
}

// ProducerConnections returns the live clients of producer group group
// registered with the broker at addr (GET_PRODUCER_CONNECTION_LIST),
// sorted by client id. RocketMQ 5 producers have no group: a broker lists
// them under each topic they publish. A group with none there is a
// *BrokerError with code SYSTEM_ERROR, as Apache RocketMQ answers.
func (a *Admin) ProducerConnections(ctx context.Context, addr, group string) ([]ProducerMember, error) {
	var pc protocol.ProducerConnection
	r := request{code: protocol.GetProducerConnectionList,
		ext: protocol.Ext(&protocol.GetProducerConnectionListRequestHeader{ProducerGroup: group})}
	if err := a.brokerDecode(ctx, addr, r, &pc); err != nil {
		return nil, err
	}
	out := make([]ProducerMember, 0, len(pc.ConnectionSet))
	for _, c := range pc.ConnectionSet {
		out = append(out, ProducerMember{ClientID: c.ClientID, ClientAddr: c.ClientAddr, Language: c.Language, Version: c.Version})
	}
	slices.SortFunc(out, func(x, y ProducerMember) int {
		return cmp.Or(cmp.Compare(x.ClientID, y.ClientID), cmp.Compare(x.ClientAddr, y.ClientAddr))
	})
	return out, nil
}
