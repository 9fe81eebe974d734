package message

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// sampleProps is 63 bytes of Go-client-style properties, as in the spec's
// size example.
const sampleProps = "UNIQ_KEY\x01C000020272AC00000000952411A80001\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02"

// sampleMessage is the spec §6.1 example: body "hello-1", topic "TopicTest",
// 63 bytes of properties, IPv4 hosts: 170 bytes.
func sampleMessage() Message {
	return Message{
		Topic:          "TopicTest",
		QueueID:        3,
		Flag:           7,
		BornTimestamp:  1795993369620,
		BornHost:       netip.MustParseAddrPort("127.0.0.1:55156"),
		StoreTimestamp: 1795993369621,
		StoreHost:      netip.MustParseAddrPort("127.0.0.1:20911"),
		ReconsumeTimes: 1,
		Body:           []byte("hello-1"),
		Properties:     sampleProps,
	}
}

// encodeT encodes m into a fresh buffer.
func encodeT(t testing.TB, m *Message, queueOffset, pos int64) []byte {
	t.Helper()
	buf := make([]byte, m.EncodedSize())
	require.NoError(t, m.Encode(buf, queueOffset, pos))
	return buf
}

// requireMatches checks that r is the decoding of m encoded at (queueOffset,
// pos).
func requireMatches(t testing.TB, m *Message, r Record, queueOffset, pos int64) {
	t.Helper()
	require.Equal(t, int32(m.EncodedSize()), r.TotalSize)
	require.Equal(t, BodyCRC(m.Body), r.BodyCRC)
	require.Equal(t, m.QueueID, r.QueueID)
	require.Equal(t, m.Flag, r.Flag)
	require.Equal(t, queueOffset, r.QueueOffset)
	require.Equal(t, pos, r.PhysicalOffset)
	require.Equal(t, m.StoredSysFlag(), r.SysFlag)
	require.Equal(t, m.BornTimestamp, r.BornTimestamp)
	require.Equal(t, unmap(m.BornHost), r.BornHost)
	require.Equal(t, m.StoreTimestamp, r.StoreTimestamp)
	require.Equal(t, unmap(m.StoreHost), r.StoreHost)
	require.Equal(t, m.ReconsumeTimes, r.ReconsumeTimes)
	require.Equal(t, m.PreparedTransactionOffset, r.PreparedTransactionOffset)
	require.True(t, bytes.Equal(m.Body, r.Body), "body")
	require.Equal(t, m.Topic, string(r.Topic))
	require.Equal(t, m.Properties, string(r.Properties))
}

// unmap is how Encode stores a host: IPv4-mapped as IPv4, no zone.
func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

// frame is a captured remoting frame: its JSON header and body.
type frame struct {
	Code      int               `json:"code"`
	ExtFields map[string]string `json:"extFields"`
	Body      []byte            `json:"-"`
}

// readFrame reads testdata/rocketmq-client-go/name, checking the frame
// layout: [int32 length][int32 type<<24|headerLen][header][body].
func readFrame(t testing.TB, name string) frame {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rocketmq-client-go", name))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 8)
	require.Equal(t, len(b)-4, int(binary.BigEndian.Uint32(b)), "frame length")
	word := binary.BigEndian.Uint32(b[4:])
	require.Zero(t, word>>24, "serialize type JSON")
	hl := int(word & 0xFFFFFF)
	require.LessOrEqual(t, 8+hl, len(b))
	var f frame
	require.NoError(t, json.Unmarshal(b[8:8+hl], &f))
	f.Body = b[8+hl:]
	return f
}

// splitRecords cuts a pull body into its records.
func splitRecords(t testing.TB, body []byte) [][]byte {
	t.Helper()
	var recs [][]byte
	for len(body) > 0 {
		r, err := Decode(body)
		require.NoError(t, err)
		recs = append(recs, body[:r.TotalSize])
		body = body[r.TotalSize:]
	}
	return recs
}

// goldenRecordsFile holds records written by Encode (golden_test.go).
var goldenRecordsFile = filepath.Join("testdata", "records-v1.golden")

// seedRecords returns every golden record: the captured pull bodies and
// records-v1.golden (if present), for fuzz seeds.
func seedRecords(t testing.TB) [][]byte {
	t.Helper()
	var recs [][]byte
	for _, name := range []string{"10-pull-message-queue0.response.bin", "11-pull-message-queue1.response.bin"} {
		recs = append(recs, splitRecords(t, readFrame(t, name).Body)...)
	}
	if b, err := os.ReadFile(goldenRecordsFile); err == nil {
		recs = append(recs, splitRecords(t, b)...)
	}
	return recs
}
