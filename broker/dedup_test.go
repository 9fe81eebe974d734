package broker

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// TestBroker_DedupSendsNotRePuts: with the duplicate window on, a resent
// delayed message and a resent half message are answered from the window
// (duplicates in the answer, the first ids) and not stored again, while the
// broker's re-puts of the same keys (the delayed message reaching its
// topic, the commit, two send-backs) are all stored.
func TestBroker_DedupSendsNotRePuts(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	plain := mustSend(t, c, b.Addr(), "t", 0, "plain", map[string]string{message.PropUniqKey: "P"})
	require.Zero(t, plain.Duplicates)
	again := mustSend(t, c, b.Addr(), "t", 0, "plain", map[string]string{message.PropUniqKey: "P"})
	require.Equal(t, int32(1), again.Duplicates)
	require.Equal(t, plain.MsgID, again.MsgID)

	// Delayed: the resend is a duplicate; the delivery to t is stored.
	delayed := map[string]string{message.PropUniqKey: "D", message.PropDelay: "1"}
	d1 := mustSend(t, c, b.Addr(), "t", 0, "later", delayed)
	d2 := mustSend(t, c, b.Addr(), "t", 0, "later", delayed)
	require.Equal(t, int32(1), d2.Duplicates)
	require.Equal(t, d1.MsgID, d2.MsgID)

	// Half message: the resend is a duplicate with the first ids; the
	// commit is stored.
	registerProducer(t, c, b)
	h1, p1 := sendHalf(t, c, b, "tx")
	h2, p2 := sendHalf(t, c, b, "tx")
	require.Equal(t, [2]int64{h1, p1}, [2]int64{h2, p2}, "the resent half message is the first")
	endTx(t, c, b, h1, p1, message.TxCommit)

	// Two send-backs of the plain message (its key P) both reach the
	// retry topic.
	_, pos, err := message.ParseOffsetMsgID(plain.MsgID)
	require.NoError(t, err)
	maxRe := int32(16)
	for range 2 {
		back := &protocol.ConsumerSendMsgBackRequestHeader{Offset: pos, Group: "cg", DelayLevel: 1, OriginMsgID: plain.MsgID,
			OriginTopic: "t", MaxReconsumeTimes: &maxRe}
		resp := invoke(t, c, b.Addr(), protocol.ConsumerSendMsgBack, back, nil)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	}
	require.Eventually(t, func() bool { return len(pullAll(t, c, b, "%RETRY%cg", 0)) == 2 }, 10*time.Second, 20*time.Millisecond,
		"both send-backs stored")
	require.Eventually(t, func() bool { return len(pullAll(t, c, b, "t", 0)) == 2 }, 10*time.Second, 20*time.Millisecond,
		"the delayed message delivered")
	require.Equal(t, []string{"plain", "later"}, recordBodiesOf(pullAll(t, c, b, "t", 0)))
	require.Eventually(t, func() bool { return len(pullAll(t, c, b, "orders", 1)) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"tx"}, recordBodiesOf(pullAll(t, c, b, "orders", 1)), "committed once")
	st := b.store.DedupStatus()
	require.Equal(t, int64(3), st.Hits)
}

// TestMetrics_Dedup: the duplicate window's series, and the brokerStatus
// rows, after a key sent twice and stored once (one put counted).
func TestMetrics_Dedup(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MetricsListen = "127.0.0.1:0"
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	for range 2 {
		mustSend(t, c, b.Addr(), "t", 0, "x", map[string]string{message.PropUniqKey: "K"})
	}
	value := scrape(t, b.MetricsAddr())
	for name, want := range map[string]float64{"sluice_dedup_keys": 1, "sluice_dedup_hits_total": 1,
		"sluice_dedup_misses_total": 1, "sluice_dedup_expired_total": 0, "sluice_dedup_cut_total": 0} {
		v, ok := value(name, nil)
		require.True(t, ok, name)
		require.Equal(t, want, v, name)
	}
	puts, ok := value("sluice_put_messages_total", map[string]string{"topic": "t"})
	require.True(t, ok)
	require.Equal(t, 1.0, puts, "a duplicate is not a put")
	span, ok := value("sluice_dedup_window_covered_seconds", nil)
	require.True(t, ok)
	require.GreaterOrEqual(t, span, 0.0)
	kv := map[string]string{}
	b.dedupRuntime(kv)
	require.Equal(t, "2m0s", kv["dedupWindow"])
	require.Equal(t, "1", kv["dedupKeys"])
	require.Equal(t, "1", kv["dedupHits"])
}
