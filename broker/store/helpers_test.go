package store

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

var bornHost = netip.MustParseAddrPort("192.0.2.2:50000")

func testConf(dir string) conf.Store {
	c := conf.DefaultBroker().Store
	c.Dir = dir
	c.SegmentSize = 1 << 20
	c.ConsumeQueueEntries = 1000
	c.RetentionInterval = 0
	return c
}

func testOpts() Options {
	return Options{
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		KeyIndex:     keyindex.Options{SlotsPerFile: 1024, EntriesPerFile: 4096},
		ConsumeQueue: consumequeue.Options{},
	}
}

func mustOpen(t testing.TB, c conf.Store, o Options) *Store {
	t.Helper()
	s, err := Open(c, o)
	require.NoError(t, err)
	return s
}

// msg builds a message; props are name/value pairs.
func msg(topic string, qid int32, body string, props ...string) *message.Message {
	m := map[string]string{}
	for i := 0; i+1 < len(props); i += 2 {
		m[props[i]] = props[i+1]
	}
	return &message.Message{
		Topic: topic, QueueID: qid, BornTimestamp: 1700000000000, BornHost: bornHost,
		Body: []byte(body), Properties: string(message.AppendProperties(nil, m)),
	}
}

func mustPut(t testing.TB, s *Store, m *message.Message) PutResult {
	t.Helper()
	r := s.Put(context.Background(), m)
	require.Equal(t, PutOK, r.Status, r.Remark)
	return r
}

// waitDispatched waits until the dispatcher has indexed the whole log.
func waitDispatched(t testing.TB, s *Store) {
	t.Helper()
	require.Eventually(t, func() bool { return s.DispatchLag() == 0 }, 10e9, 1e6)
}

// records splits a get body into decoded records.
func records(t testing.TB, body []byte) []message.Record {
	t.Helper()
	var out []message.Record
	for len(body) > 0 {
		r, err := message.Decode(body)
		require.NoError(t, err)
		out = append(out, r)
		body = body[r.TotalSize:]
	}
	return out
}

func bodies(t testing.TB, body []byte) []string {
	var out []string
	for _, r := range records(t, body) {
		out = append(out, string(r.Body))
	}
	return out
}

func get(t testing.TB, s *Store, topic string, qid int32, off int64, max int) GetResult {
	t.Helper()
	res, err := s.Get(context.Background(), GetRequest{Topic: topic, QueueID: qid, Offset: off, MaxMsgs: max})
	require.NoError(t, err)
	return res
}

func seqBodies(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}
