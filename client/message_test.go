package client

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
)

// TestDecodeRecords: records decoded from one pull body keep their own
// bodies (appending to one never touches the next), and every field comes
// from its own record.
func TestDecodeRecords(t *testing.T) {
	host := netip.MustParseAddrPort("10.0.0.1:10911")
	var body []byte
	var pos []int64
	for i, s := range []struct{ topic, body, born string }{
		{"a", "first", "127.0.0.1:1"}, {"a", "second", "127.0.0.1:1"}, {"b", "third", "[::1]:2"},
	} {
		m := &message.Message{Topic: s.topic, Body: []byte(s.body), BornHost: netip.MustParseAddrPort(s.born), StoreHost: host,
			Properties: string(message.AppendProperties(nil, map[string]string{message.PropUniqKey: "U" + s.body}))}
		rec := make([]byte, m.EncodedSize())
		pos = append(pos, int64(len(body))+1000*int64(i))
		require.NoError(t, m.Encode(rec, int64(i), pos[i]))
		body = append(body, rec...)
	}
	msgs, err := decodeRecords(body, "broker-a", 1<<20)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	msgs[0].Body = append(msgs[0].Body, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"...)
	require.Equal(t, "second", string(msgs[1].Body), "appending to one body leaves the next record alone")
	for i, want := range []struct{ topic, body, born, id string }{
		{"a", "first", "127.0.0.1:1", "Ufirst"}, {"a", "second", "127.0.0.1:1", "Usecond"}, {"b", "third", "[::1]:2", "Uthird"},
	} {
		m := msgs[i]
		require.Equal(t, want.topic, m.Topic)
		require.Equal(t, want.topic, m.Queue.Topic)
		require.Equal(t, want.born, m.BornHost)
		require.Equal(t, "10.0.0.1:10911", m.StoreHost)
		require.Equal(t, want.id, m.MsgID)
		require.Equal(t, map[string]string{message.PropUniqKey: want.id}, m.Properties)
		require.Equal(t, message.OffsetMsgID(host, pos[i]), m.OffsetMsgID)
		require.Equal(t, pos[i], m.CommitLogOffset)
		require.Equal(t, int64(i), m.QueueOffset)
		if i > 0 {
			require.Equal(t, want.body, string(m.Body))
		}
	}
}

// TestFieldProperties: the map-free properties of a message without user
// properties are byte for byte what the general path writes, and refuse
// what it refuses.
func TestFieldProperties(t *testing.T) {
	gen := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.1"), 7)
	for _, m := range []*Message{
		{},
		{Tags: "TagA"},
		{Tags: "TagA", Keys: []string{"k1", "k2"}, ShardingKey: "order-7", DelayLevel: 3},
		{Keys: []string{"only"}},
		{ShardingKey: "s", DelayLevel: 18},
		{Tags: "T", DeliverAt: time.UnixMilli(1_800_000_000_123)},
		{DeliverAt: time.UnixMilli(1_800_000_000_000), Keys: []string{"k"}},
		{Tags: "bad\x02tag"},
		{Keys: []string{""}},
	} {
		for _, id := range []string{"", "7F0000010001000000000000000A0001"} {
			var b strings.Builder
			_, ferr := m.fieldProperties(&b, id, nil)
			fast := ""
			if ferr == nil {
				fast = b.String() // NB: b is the caller's to drop on an error
			}
			slow, serr := m.mapProperties(id)
			require.Equal(t, slow, fast, "%+v id %q", m, id)
			require.Equal(t, serr != nil, ferr != nil, "%+v id %q: %v / %v", m, id, serr, ferr)
			if ferr != nil {
				require.ErrorIs(t, ferr, ErrInvalidMessage)
			}
		}
		// A fresh id is written into the string and returned as its
		// UNIQ_KEY.
		fast, id, ferr := m.sendProperties("", gen)
		if ferr != nil {
			require.ErrorIs(t, ferr, ErrInvalidMessage)
			continue
		}
		_, err := message.ParseUniqID(id)
		require.NoError(t, err)
		got, _ := message.PropertyValue(fast, message.PropUniqKey)
		require.Equal(t, id, got)
		slow, err := m.mapProperties(id)
		require.NoError(t, err)
		require.Equal(t, slow, fast)
		require.NotEqual(t, id, gen.Next(), "ids repeat")
	}
}

// TestDecodeRecords_Hostile: a body of bogus records is an error, and the
// messages allocated for it stay within a few times its size.
func TestDecodeRecords_Hostile(t *testing.T) {
	body := bytes.Repeat([]byte{0, 0, 0, 4}, 1<<16)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decodeRecords(body, "broker-a", 1<<20)
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(20*len(body)), "allocated far more than the body")
}

// recordsBody encodes n messages of size bytes as a pull body, with the
// properties a producer writes.
func recordsBody(t testing.TB, n, size int) []byte {
	host := netip.MustParseAddrPort("10.0.0.1:10911")
	gen := message.NewUniqIDGenerator(host.Addr(), 7)
	var body []byte
	for i := range n {
		m := &message.Message{Topic: "bench", Body: make([]byte, size), BornHost: netip.MustParseAddrPort("10.0.0.2:40000"),
			StoreHost: host, Properties: string(message.AppendProperties(nil, map[string]string{
				message.PropUniqKey: gen.Next(), message.PropTags: "TagA", message.PropKeys: "order-" + strings.Repeat("7", i%3+1),
				message.PropCluster: "DefaultCluster"}))}
		rec := make([]byte, m.EncodedSize())
		require.NoError(t, m.Encode(rec, int64(i), int64(len(body))))
		body = append(body, rec...)
	}
	return body
}

// TestDecodeRecords_BadTail: the records before a bad one are delivered,
// with the error naming the bad one.
func TestDecodeRecords_BadTail(t *testing.T) {
	body := recordsBody(t, 3, 10)
	good := len(body)
	body = append(body, 0, 0, 0, 200, 1, 2, 3)
	msgs, err := decodeRecords(body, "broker-a", 1<<20)
	require.ErrorContains(t, err, fmt.Sprintf("decode message 3 of a %d-byte body (at byte %d)", len(body), good))
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		require.Equal(t, int64(i), m.QueueOffset)
		require.Equal(t, "TagA", m.Tags)
		require.Equal(t, m.Properties[message.PropUniqKey], m.MsgID)
	}
}

// BenchmarkDecodeRecords: a pull's 32 records of 1 KiB into messages, the
// consumer's work per message besides its handler.
func BenchmarkDecodeRecords(b *testing.B) {
	body := recordsBody(b, 32, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		msgs, err := decodeRecords(body, "broker-a", 1<<20)
		if err != nil || len(msgs) != 32 {
			b.Fatal(err, len(msgs))
		}
	}
}
