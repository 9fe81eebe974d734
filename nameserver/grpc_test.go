package nameserver

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestRoute_GrpcAddrs: a broker's registered gRPC address is in the routes
// asked for withGrpc only; other routes keep their bytes (4.x clients).
func TestRoute_GrpcAddrs(t *testing.T) {
	c := dial(t, startServer(t, nil), remoting.SerializeJSON)
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("TopicTest", 4)}
	body := c.encode(b.body())
	h := b.header()
	h.BodyCrc32 = message.BodyCRC(body)
	h.GrpcAddr = "127.0.0.1:8081"
	resp := c.call(protocol.RegisterBroker, h, body)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)

	resp = c.routeResp("TopicTest")
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.NotContains(t, string(resp.Body), "grpc", "a 4.x route is unchanged")

	resp = c.call(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: "TopicTest", WithGrpc: true}, nil)
	var rd protocol.TopicRouteData
	c.decode(resp, &rd)
	require.Len(t, rd.BrokerDatas, 1)
	require.Equal(t, map[int64]string{0: "127.0.0.1:8081"}, rd.BrokerDatas[0].GrpcAddrs)
}
