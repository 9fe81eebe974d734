package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// TestIntegration_RoutedBeforeReply: the broker is routed when Start
// returns, and a request that creates a topic (admin create, auto-create on
// send, a heartbeat's retry topic) is answered only once the nameserver
// routes the topic, as with Java: the official Go client starts a consumer
// right after and fails without a route.
func TestIntegration_RoutedBeforeReply(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	cfg := testConfig(t.TempDir())
	cfg.NamesrvAddr = ns.Addr()
	cfg.RegisterInterval = 10 * time.Minute // the periodic one does not come into play
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	require.NotNil(t, route(t, c, ns.Addr(), "TBW102"), "the broker is routed when Start returns")

	resp := invoke(t, c, b.Addr(), protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: "made",
		ReadQueueNums: 3, WriteQueueNums: 3, Perm: protocol.PermRead | protocol.PermWrite}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	r := route(t, c, ns.Addr(), "made")
	require.NotNil(t, r, "admin-created topic routed when the reply comes")
	require.Equal(t, int32(3), r.QueueDatas[0].WriteQueueNums)

	mustSend(t, c, b.Addr(), "auto", 0, "x", nil)
	require.NotNil(t, route(t, c, ns.Addr(), "auto"), "auto-created topic routed when the send is acknowledged")

	heartbeat(t, c, remoting.SerializeJSON, b.Addr(), "client-1", "cg", map[string]string{"made": "*"})
	require.NotNil(t, route(t, c, ns.Addr(), "%RETRY%cg"), "retry topic routed when the heartbeat is answered")
}

// TestBroker_HeartbeatAfterDisconnect: a heartbeat handled after its
// connection closed and was cleaned up registers nobody (otherwise the
// client would stay a group member, and get queues, until expiry).
func TestBroker_HeartbeatAfterDisconnect(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	heartbeat(t, c, remoting.SerializeJSON, b.Addr(), "client-1", "cg", map[string]string{"t": "*"})
	require.Equal(t, []string{"client-1"}, b.groups.ConsumerIDs("cg"))
	conns := b.server.Conns()
	require.Len(t, conns, 1)
	gone := conns[0]

	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return b.conn(gone.ID()) == nil && len(b.groups.ConsumerIDs("cg")) == 0 },
		5*time.Second, time.Millisecond, "the closed connection's member is dropped")

	// The same heartbeat, handled late on the closed connection.
	cd := protocol.ConsumerData{GroupName: "cg", ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
		ConsumeFromWhere:    "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "t", SubString: "*", ExpressionType: "TAG"}}}
	body, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.HeartbeatData{ClientID: "client-1", ConsumerDataSet: []protocol.ConsumerData{cd}})
	require.NoError(t, err)
	b.handleHeartbeat(context.Background(), lateWriter{gone}, remoting.NewRequest(protocol.HeartBeat, nil, body))
	require.Empty(t, b.groups.ConsumerIDs("cg"))
}

// lateWriter is the ResponseWriter of a request whose connection is gone.
type lateWriter struct{ c *remoting.Conn }

func (w lateWriter) Write(*remoting.Command) error     { return remoting.ErrConnClosed }
func (w lateWriter) WriteSoon(*remoting.Command) error { return remoting.ErrConnClosed }
func (w lateWriter) Conn() *remoting.Conn              { return w.c }
