package v5_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// settings sends set on a Telemetry stream of ctx's client and waits for
// the answer.
func settings(t *testing.T, c v2.MessagingServiceClient, ctx context.Context, set *v2.Settings) {
	t.Helper()
	st, err := c.Telemetry(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: set}}))
	reply, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, reply.GetStatus().GetCode(), reply.GetStatus().GetMessage())
	require.NoError(t, st.CloseSend())
}

// TestClients_InConnectionListsAndMetrics: v5 clients show beside 4.x ones
// in the broker's GET_CONSUMER_CONNECTION_LIST (mqadmin consumerConnection,
// the console's group page) and GET_PRODUCER_CONNECTION_LIST (mqadmin
// producerConnection; a v5 producer under each of its topics), with
// address, language and version, and in the sluice_clients counts; a
// client that terminates leaves both.
func TestClients_InConnectionListsAndMetrics(t *testing.T) {
	b := startBroker(t, func(c *conf.Broker) { c.MetricsListen = "127.0.0.1:0" })
	createTopic(t, b, "CT", 2, "", "", false)
	c := dial(t, b.GRPCAddr(), false)

	prod, simple := v2.ClientType_PRODUCER, v2.ClientType_SIMPLE_CONSUMER
	ua := &v2.UA{Language: v2.Language_GOLANG, Version: "5.1.4"}
	settings(t, c, callCtx(t, "v5-prod", "", ""), &v2.Settings{ClientType: &prod, UserAgent: ua,
		PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{{Name: "CT"}}}}})
	settings(t, c, callCtx(t, "v5-cons", "", ""), &v2.Settings{ClientType: &simple, UserAgent: ua,
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "CG"},
			Subscriptions: []*v2.SubscriptionEntry{{Topic: &v2.Resource{Name: "CT"},
				Expression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"}}}}}})

	// A 4.x client of the same consumer group, and a 4.x producer group.
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer rc.Close()
	invoke := func(code int16, ext map[string]string, body any) *remoting.Command {
		t.Helper()
		var raw []byte
		if body != nil {
			var err error
			raw, err = remoting.EncodeBody(remoting.SerializeJSON, body)
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, b.Addr(), remoting.NewRequest(code, ext, raw))
		require.NoError(t, err)
		return resp
	}
	hb := protocol.HeartbeatData{ClientID: "v4-client",
		ProducerDataSet: []protocol.ProducerData{{GroupName: "PG"}},
		ConsumerDataSet: []protocol.ConsumerData{{GroupName: "CG", ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
			ConsumeFromWhere:    "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "CT", SubString: "*", ExpressionType: "TAG"}}}}}
	resp := invoke(protocol.HeartBeat, nil, hb)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)

	consumers := func() []protocol.Connection {
		t.Helper()
		resp := invoke(protocol.GetConsumerConnectionList, protocol.Ext(&protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "CG"}), nil)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		var cc protocol.ConsumerConnection
		require.NoError(t, remoting.DecodeBody(resp.SerializeType, resp.Body, &cc))
		require.Equal(t, "CONSUME_PASSIVELY", cc.ConsumeType, "the 4.x member's")
		require.Contains(t, cc.SubscriptionTable, "CT")
		return cc.ConnectionSet
	}
	producers := func(group string) (int16, []protocol.Connection) {
		t.Helper()
		resp := invoke(protocol.GetProducerConnectionList, protocol.Ext(&protocol.GetProducerConnectionListRequestHeader{ProducerGroup: group}), nil)
		if resp.Code != protocol.Success {
			return resp.Code, nil
		}
		var pc protocol.ProducerConnection
		require.NoError(t, remoting.DecodeBody(resp.SerializeType, resp.Body, &pc))
		return resp.Code, pc.ConnectionSet
	}

	conns := consumers()
	require.Len(t, conns, 2)
	byID := map[string]protocol.Connection{conns[0].ClientID: conns[0], conns[1].ClientID: conns[1]}
	v5c := byID["v5-cons"]
	require.True(t, strings.HasPrefix(v5c.ClientAddr, "127.0.0.1:"), v5c.ClientAddr)
	require.Equal(t, "GO", v5c.Language)
	require.Equal(t, "V5_1_4", protocol.VersionName(v5c.Version))
	require.Equal(t, map[string]string{"CT": "*"}, v5c.Subscriptions)
	require.Equal(t, map[string]string{"CT": "TAG"}, v5c.ExpressionTypes)
	require.Contains(t, byID, "v4-client")

	code, pconns := producers("CT")
	require.Equal(t, int16(protocol.Success), code)
	require.Len(t, pconns, 1)
	require.Equal(t, "v5-prod", pconns[0].ClientID)
	require.Equal(t, "GO", pconns[0].Language)
	require.Equal(t, "V5_1_4", protocol.VersionName(pconns[0].Version))
	require.True(t, strings.HasPrefix(pconns[0].ClientAddr, "127.0.0.1:"), pconns[0].ClientAddr)
	code, pconns = producers("PG")
	require.Equal(t, int16(protocol.Success), code)
	require.Len(t, pconns, 1)
	require.Equal(t, "v4-client", pconns[0].ClientID)
	require.True(t, strings.HasPrefix(pconns[0].ClientAddr, "127.0.0.1:"), pconns[0].ClientAddr)
	require.NotEmpty(t, pconns[0].Language)

	metrics := func() string {
		t.Helper()
		r, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
		require.NoError(t, err)
		defer r.Body.Close()
		raw, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		return string(raw)
	}
	m := metrics()
	for _, line := range []string{`sluice_clients{protocol="grpc",role="consumer"} 1`, `sluice_clients{protocol="grpc",role="producer"} 1`,
		`sluice_clients{protocol="remoting",role="consumer"} 1`, `sluice_clients{protocol="remoting",role="producer"} 1`} {
		require.Contains(t, m, line)
	}

	for _, id := range []string{"v5-cons", "v5-prod"} {
		r, err := c.NotifyClientTermination(callCtx(t, id, "", ""), &v2.NotifyClientTerminationRequest{})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, r.GetStatus().GetCode())
	}
	conns = consumers()
	require.Len(t, conns, 1)
	require.Equal(t, "v4-client", conns[0].ClientID)
	code, _ = producers("CT")
	require.Equal(t, int16(protocol.SystemError), code, "no producer of CT left")
	m = metrics()
	require.Contains(t, m, `sluice_clients{protocol="grpc",role="consumer"} 0`)
	require.Contains(t, m, `sluice_clients{protocol="grpc",role="producer"} 0`)
}
