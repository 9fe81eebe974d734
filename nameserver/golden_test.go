package nameserver

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

func loadFrame(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rocketmq-client-go", name))
	require.NoError(t, err)
	return b
}

// dialRaw opens a plain TCP connection to s, closed when the test ends.
func dialRaw(t *testing.T, s *Server) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// readFrame reads one frame from a plain connection.
func readFrame(t *testing.T, conn net.Conn) *remoting.Command {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(eventually)))
	var p [4]byte
	_, err := io.ReadFull(conn, p[:])
	require.NoError(t, err)
	b := make([]byte, 4+binary.BigEndian.Uint32(p[:]))
	copy(b, p[:])
	_, err = io.ReadFull(conn, b[4:])
	require.NoError(t, err)
	cmd, n, err := remoting.DecodeFrame(b, 0)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
	return cmd
}

// requireClosedByPeer reads from conn until the server closes it; a read
// timeout fails the test.
func requireClosedByPeer(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(eventually)))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server did not close the connection: %v", err)
}

// goClientBrokerAddrs parses every brokerAddrs object of a route body the
// way the official Go client does (spec 5.1): the raw text between the
// braces, split on ",", each piece split at its first ":", quotes removed.
func goClientBrokerAddrs(body string) []map[string]string {
	var out []map[string]string
	for _, m := range regexp.MustCompile(`"brokerAddrs":\{([^}]*)\}`).FindAllStringSubmatch(body, -1) {
		addrs := map[string]string{}
		for piece := range strings.SplitSeq(m[1], ",") {
			k, v, _ := strings.Cut(piece, ":")
			addrs[strings.ReplaceAll(k, `"`, "")] = strings.ReplaceAll(v, `"`, "")
		}
		out = append(out, addrs)
	}
	return out
}

// TestGolden_GoClientRouteQuery replays the route query the official Go
// client sent in the capture (broker-a at 127.0.0.1:20911, SluiceTopic with
// 2 queues) byte for byte, and checks the reply is what the client needs.
func TestGolden_GoClientRouteQuery(t *testing.T) {
	s := startServer(t, nil)
	reg := dial(t, s, remoting.SerializeJSON)
	b := broker{cluster: "DefaultCluster", name: "broker-a", addr: "127.0.0.1:20911", ha: "127.0.0.1:20912",
		topics: []protocol.TopicConfig{topic("SluiceTopic", 2)}}
	reg.mustRegister(b)

	conn := dialRaw(t, s)
	_, err := conn.Write(loadFrame(t, "01-get-routeinfo-by-topic.bin"))
	require.NoError(t, err)
	resp := readFrame(t, conn)

	require.True(t, resp.IsResponse())
	require.Equal(t, int32(1), resp.Opaque, "the request's opaque")
	require.Equal(t, remoting.SerializeJSON, resp.SerializeType)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)

	body := string(resp.Body)
	require.Contains(t, body, `"queueDatas":[{`, "the Go client fails on a null or missing queueDatas")
	require.NotContains(t, body, "orderTopicConf", "the Go client would build its queues from it")
	var rd protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	require.Len(t, rd.QueueDatas, 1)
	q := rd.QueueDatas[0]
	require.Equal(t, "broker-a", q.BrokerName)
	require.Equal(t, int32(2), q.ReadQueueNums, "consumers use readQueueNums")
	require.Equal(t, int32(2), q.WriteQueueNums, "producers use writeQueueNums")
	require.NotZero(t, q.Perm&protocol.PermRead)
	require.NotZero(t, q.Perm&protocol.PermWrite)
	require.Equal(t, []map[string]string{{"0": "127.0.0.1:20911"}}, goClientBrokerAddrs(body))

	// The reply the client accepted in the capture, up to key order.
	captured, _, err := remoting.DecodeFrame(loadFrame(t, "01-get-routeinfo-by-topic.response.bin"), 0)
	require.NoError(t, err)
	require.JSONEq(t, string(captured.Body), body)
}

func TestGarbageFrame_ClosesOnlyThatConnection(t *testing.T) {
	s := startServer(t, nil)
	c := dial(t, s, remoting.SerializeMsgpack)
	b := masterA()
	b.topics = []protocol.TopicConfig{topic("T", 4)}
	c.mustRegister(b)

	word := func(length, headerWord uint32, rest ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, length), headerWord), rest...)
	}
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"length below 4", word(2, 0)},
		{"unknown serialize type", word(8, 9<<24|4, 1, 2, 3, 4)},
		{"header past the frame", word(8, 100, 1, 2, 3, 4)},
		{"oversize frame", word(1<<31-1, 4)},
		{"undecodable JSON header", word(8, 4, '{', '{', '{', '{')},
		{"text", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dialRaw(t, s)
			_, err := conn.Write(tc.bytes)
			require.NoError(t, err)
			requireClosedByPeer(t, conn)
			// Other connections, and what was registered over them, are
			// untouched.
			require.Equal(t, []protocol.QueueData{qd("broker-a", topic("T", 4))}, c.route("T").QueueDatas)
		})
	}
}

// TestGarbageFrame_DropsBrokersOfThatConnection: a broker connection that
// sends garbage is closed, and its registrations go with it.
func TestGarbageFrame_DropsBrokersOfThatConnection(t *testing.T) {
	s := startServer(t, nil)
	c := dial(t, s, remoting.SerializeJSON)
	kept := masterA()
	kept.topics = []protocol.TopicConfig{topic("Kept", 1)}
	c.mustRegister(kept)

	raw := dialRaw(t, s)
	b := masterA()
	b.name, b.addr = "broker-raw", "127.0.0.1:10930"
	b.topics = []protocol.TopicConfig{topic("Raw", 1)}
	body := c.encode(b.body())
	h := b.header()
	h.BodyCrc32 = message.BodyCRC(body)
	req := remoting.NewRequest(protocol.RegisterBroker, protocol.Ext(h), body)
	req.Opaque = 42
	frame, err := remoting.EncodeFrame(req)
	require.NoError(t, err)
	_, err = raw.Write(frame)
	require.NoError(t, err)
	resp := readFrame(t, raw)
	require.Equal(t, int32(42), resp.Opaque)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	c.route("Raw")

	_, err = raw.Write([]byte{0, 0, 0, 1, 0})
	require.NoError(t, err)
	requireClosedByPeer(t, raw)
	require.Eventually(t, func() bool { return c.routeGone("Raw") }, eventually, 5*time.Millisecond)
	c.route("Kept")
}
