package compat

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/stretchr/testify/require"
)

// TestV5Node_Transaction: the Node producer's transactions on a broker of
// their own that checks undecided half messages every 500 ms (the suite's
// broker asks after a minute): a committed message is received, a
// rolled-back one never; one left open is checked back on the producer's
// Telemetry stream, and the SDK's checker's COMMIT delivers it, its
// ROLLBACK drops it.
func TestV5Node_Transaction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// NB: SLUICE_AUTO_CREATE_TOPIC=false: it registers with the shared
	// nameserver while other tests run, and must not serve TBW102 (a
	// parallel test's auto-created topic would land on it).
	env := append([]string{"SLUICE_STORE_SEGMENT_SIZE=67108864", "SLUICE_TRANSACTION_CHECK_INTERVAL=500ms",
		"SLUICE_TRANSACTION_TIMEOUT=1s", "SLUICE_AUTO_CREATE_TOPIC=false"}, securityEnv...)
	args := append([]string{"-n", nameserverAddr, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
		"--store-dir", filepath.Join(dir, "store"), "--flush", "async", "--broker-name", "broker-node-tx",
		"--cluster", "DefaultCluster"}, securityArgs...)
	br, err := start("mqbroker-tx", filepath.Join(filepath.Dir(mqadmin), "mqbroker"), filepath.Join(dir, "mqbroker.log"),
		regexp.MustCompile(`serving on (\S+) \(nameserver`), env, args...)
	if err != nil {
		br.dumpLog(&testWriter{t})
		_ = br.stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			br.dumpLog(&testWriter{t})
		}
		require.NoError(t, br.stop())
	})
	logBytes, err := os.ReadFile(br.logPath)
	require.NoError(t, err)
	m := regexp.MustCompile(`serving RocketMQ 5 clients \(gRPC\)" grpc=(\S+)`).FindSubmatch(logBytes)
	require.NotNil(t, m, "the broker logs its gRPC address")
	nodeEnv := []string{"SLUICE_V5_ENDPOINT=" + string(m[1])}
	if overTLS {
		nodeEnv = append(nodeEnv, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH="+filepath.Join(dir, "store", "tls", "self-signed.crt"))
	}

	topic := name(t, "topic")
	ctx := waitContext(t, patience)
	require.NoError(t, topicAdmin.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(br.addr),
		admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2)))
	mqs, err := topicAdmin.FetchPublishMessageQueues(ctx, topic)
	require.NoError(t, err)
	require.Len(t, mqs, 2)

	d := startNode(t, nodeEnv...)
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}, "checker": true}, nil)
	d.must("simpleConsumer", map[string]any{"name": "c", "group": name(t, "group"),
		"subscriptions": map[string]string{topic: "*"}, "awaitMs": 1000}, nil)
	ids := map[string]string{} // compat id → message id
	for _, tx := range []struct{ id, end, check string }{
		{"commit", "commit", ""},
		{"rollback", "rollback", ""},
		{"check-commit", "none", "commit"},
		{"check-rollback", "none", "rollback"},
	} {
		props := map[string]string{idProperty: tx.id}
		if tx.check != "" {
			props["check"] = tx.check
		}
		var r nodeReceipt
		d.must("sendTx", map[string]any{"client": "p", "topic": topic, "body": "body of " + tx.id, "end": tx.end,
			"properties": props}, &r)
		require.NotEmpty(t, r.TransactionID, tx.id)
		ids[tx.id] = r.MessageID
	}

	got := d.receiveUntil("c", 30*time.Second, "the committed messages", func(got []nodeMessage) bool { return len(got) >= 2 })
	var gotIDs []string
	for _, m := range got {
		gotIDs = append(gotIDs, m.id())
		require.Equal(t, ids[m.id()], m.MessageID, m.id())
		require.Equal(t, "body of "+m.id(), m.Body)
		d.must("ack", map[string]any{"client": "c", "ref": m.Ref}, nil)
	}
	require.ElementsMatch(t, []string{"commit", "check-commit"}, gotIDs)

	// Both open ones were checked (the rolled-back one too, by now).
	var checks []struct{ MessageID, Check string }
	deadline := time.Now().Add(patience)
	for {
		d.must("checks", nil, &checks)
		seen := map[string]bool{}
		for _, c := range checks {
			seen[c.MessageID] = true
		}
		if seen[ids["check-commit"]] && seen[ids["check-rollback"]] {
			break
		}
		require.True(t, time.Now().Before(deadline), "waiting for the check-backs; got %v", checks)
		time.Sleep(100 * time.Millisecond) // NB: polling the driver for a condition, with a deadline
	}
	for _, c := range checks {
		require.True(t, slices.Contains([]string{ids["check-commit"], ids["check-rollback"]}, c.MessageID),
			"only open transactions are checked: %v", c)
	}
	var left []nodeMessage
	d.must("receive", map[string]any{"client": "c", "max": 32, "invisibleMs": 10000}, &left)
	require.Empty(t, left, "the rolled-back ones never come")
	d.requireQuiet()
}
