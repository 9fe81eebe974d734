package broker

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// lenientFrame is a hand-made frame of internal/remoting/testdata/lenient-json:
// a JSON header as RocketMQ clients other than Java and Go write it
// (numbers, booleans and nulls in extFields, a null remark, unknown keys).
func lenientFrame(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "remoting", "testdata", "lenient-json", name))
	require.NoError(t, err)
	return b
}

// exchange writes frame on conn and returns the answer to it, with the
// raw bytes of its header; requests the broker sends meanwhile
// (NOTIFY_CONSUMER_IDS_CHANGED) are skipped.
func exchange(t *testing.T, conn net.Conn, frame []byte) (*remoting.Command, []byte) {
	t.Helper()
	_, err := conn.Write(frame)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	for {
		var prefix [8]byte
		_, err = io.ReadFull(conn, prefix[:])
		require.NoError(t, err)
		b := make([]byte, 4+binary.BigEndian.Uint32(prefix[:]))
		copy(b, prefix[:])
		_, err = io.ReadFull(conn, b[8:])
		require.NoError(t, err)
		cmd, _, err := remoting.DecodeFrame(b, 0)
		require.NoError(t, err)
		require.Equal(t, remoting.SerializeJSON, cmd.SerializeType)
		if cmd.IsResponse() {
			return cmd, b[8 : 8+binary.BigEndian.Uint32(prefix[4:])&0xFFFFFF]
		}
		require.Equal(t, protocol.NotifyConsumerIDsChanged, int(cmd.Code))
	}
}

// requireStringExt checks an answer's header as Java writes one: every
// extFields value a JSON string.
func requireStringExt(t *testing.T, header []byte) {
	t.Helper()
	var h struct {
		ExtFields map[string]string `json:"extFields"`
	}
	require.NoError(t, json.Unmarshal(header, &h), string(header))
}

// TestBroker_LenientJSONHeaders (issue 14, defect 6): a consumer's
// HEART_BEAT, a SEND_MESSAGE and a PULL_MESSAGE whose JSON headers carry
// numbers, booleans and nulls are served as the Java broker serves them.
// Before, the broker closed the connection ("expected a string").
func TestBroker_LenientJSONHeaders(t *testing.T) {
	cfg := testConfig(t.TempDir())
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	invoke(t, c, b.Addr(), protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: "LenientTopic",
		ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}, nil)
	conn, err := net.Dial("tcp", b.Addr())
	require.NoError(t, err)
	defer conn.Close()

	resp, _ := exchange(t, conn, lenientFrame(t, "01-heart-beat-consumer.bin"))
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.Equal(t, int32(1), resp.Opaque)
	resp = invoke(t, c, b.Addr(), protocol.GetConsumerListByGroup,
		&protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "cg-lenient"}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var l protocol.ConsumerList
	require.NoError(t, remoting.DecodeBody(remoting.SerializeJSON, resp.Body, &l))
	require.Equal(t, []string{"198.51.100.7@4242"}, l.ConsumerIDList)

	resp, header := exchange(t, conn, lenientFrame(t, "02-send-message.bin"))
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.Equal(t, int32(7), resp.Opaque)
	requireStringExt(t, header)
	var sent protocol.SendMessageResponseHeader
	require.NoError(t, sent.FromExt(resp.ExtFields))
	require.Equal(t, int32(0), sent.QueueID)
	require.Equal(t, int64(0), sent.QueueOffset)

	waitIndexed(t, b)
	resp, header = exchange(t, conn, lenientFrame(t, "03-pull-message.bin"))
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.Equal(t, int32(8), resp.Opaque)
	requireStringExt(t, header)
	require.Equal(t, int64(1), pullExt(t, resp).NextBeginOffset)
	recs := decodeRecords(t, resp.Body)
	require.Len(t, recs, 1)
	require.Equal(t, "hello from node", string(recs[0].Body))
	require.Equal(t, "LenientTopic", string(recs[0].Topic))
	require.Equal(t, int64(1764590000000), recs[0].BornTimestamp)
	tags, _ := message.PropertyValue(string(recs[0].Properties), "TAGS")
	keys, _ := message.PropertyValue(string(recs[0].Properties), "KEYS")
	require.Equal(t, []string{"TagA", "order-7"}, []string{tags, keys})
}
