package nameserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestLenientJSON_RouteQuery (issue 14, defect 6): a GET_ROUTEINFO_BY_TOPIC
// whose JSON header has a null remark, a boolean in extFields and an
// unknown key (hand-made, internal/remoting/testdata/lenient-json) gets the
// route, as from the Java nameserver. Before, the connection was closed.
func TestLenientJSON_RouteQuery(t *testing.T) {
	s := startServer(t, nil)
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("LenientTopic", 2)}
	dial(t, s, remoting.SerializeJSON).mustRegister(b)

	frame, err := os.ReadFile(filepath.Join("..", "internal", "remoting", "testdata", "lenient-json",
		"04-get-routeinfo-by-topic.bin"))
	require.NoError(t, err)
	conn := dialRaw(t, s)
	_, err = conn.Write(frame)
	require.NoError(t, err)
	resp := readFrame(t, conn)
	require.True(t, resp.IsResponse())
	require.Equal(t, int32(9), resp.Opaque)
	require.Equal(t, remoting.SerializeJSON, resp.SerializeType)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	var rd protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	require.Equal(t, []protocol.QueueData{qd("broker-a", topic("LenientTopic", 2))}, rd.QueueDatas)
	require.Equal(t, []map[string]string{{"0": b.addr}}, goClientBrokerAddrs(string(resp.Body)))
}
