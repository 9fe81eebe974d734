package broker

import (
	"testing"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

func TestBroker_SubscriptionGroups(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeMsgpack)
	heartbeat(t, c, remoting.SerializeMsgpack, b.Addr(), "c1", "cg", map[string]string{"t": "TagA"})
	heartbeat(t, c, remoting.SerializeMsgpack, b.Addr(), "c2", "cg", map[string]string{"t": "TagB"})

	resp := invoke(t, c, b.Addr(), protocol.GetAllSubscriptionGroupConfig, nil, nil)
	var all protocol.SubscriptionGroupWrapper
	require.NoError(t, remoting.DecodeBody(resp.SerializeType, resp.Body, &all))
	require.Equal(t, int32(16), all.SubscriptionGroupTable["cg"].RetryMaxTimes, "created on heartbeat with the defaults")

	cfg := protocol.DefaultSubscriptionGroupConfig("cg")
	cfg.ConsumeEnable = false
	body, err := remoting.EncodeBody(remoting.SerializeMsgpack, cfg)
	require.NoError(t, err)
	resp = invoke(t, c, b.Addr(), protocol.UpdateAndCreateSubscriptionGroup, nil, body)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	mustSend(t, c, b.Addr(), "t", 0, "x", nil)
	waitIndexed(t, b)
	resp = invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("cg", "t", 0, 0, 0), nil)
	require.Equal(t, protocol.NoPermission, int(resp.Code), "consumption disabled")

	resp = invoke(t, c, b.Addr(), protocol.GetConsumerConnectionList, &protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "cg"}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var cc protocol.ConsumerConnection
	require.NoError(t, remoting.DecodeBody(resp.SerializeType, resp.Body, &cc))
	require.Len(t, cc.ConnectionSet, 2)
	require.Equal(t, "TagA", cc.ConnectionSet[0].Subscriptions["t"])
	require.Equal(t, "TagB", cc.ConnectionSet[1].Subscriptions["t"], "members that subscribe differently are visible")
	require.Equal(t, "GO", cc.ConnectionSet[0].Language)
	require.NotEmpty(t, cc.ConnectionSet[0].ClientAddr)

	resp = invoke(t, c, b.Addr(), protocol.DeleteSubscriptionGroup, &protocol.DeleteSubscriptionGroupRequestHeader{GroupName: "cg"}, nil)
	require.Equal(t, protocol.Success, int(resp.Code))
	resp = invoke(t, c, b.Addr(), protocol.DeleteSubscriptionGroup, &protocol.DeleteSubscriptionGroupRequestHeader{GroupName: "cg"}, nil)
	require.Equal(t, protocol.SubscriptionGroupNotExist, int(resp.Code))
	resp = invoke(t, c, b.Addr(), protocol.GetConsumerConnectionList, &protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "nobody"}, nil)
	require.Equal(t, protocol.ConsumerNotOnline, int(resp.Code))
}
