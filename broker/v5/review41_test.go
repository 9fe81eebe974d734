package v5_test

import (
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker"
	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestTransaction_CheckBackNeedsPub: with ACL on, a Telemetry stream's
// settings make it a producer only of the topics its account may publish
// to: an account that may not publish to a topic never gets that topic's
// transaction checks (whole messages, bodies included), while it gets
// those of a topic it may publish to.
func TestTransaction_CheckBackNeedsPub(t *testing.T) {
	aclFile := testutil.WriteACL(t, testACL)
	b := startBrokerEdit(t, func(c *conf.Broker) { c.ACL.File = aclFile },
		broker.Options{Logger: quiet(), TransactionCheckInterval: checkEvery, TransactionTimeout: checkEvery})
	createTopic(t, b, "allowed", 1, adminKey, adminSecret, false)
	createTopic(t, b, "denied", 1, adminKey, adminSecret, false)
	c := dial(t, b.GRPCAddr(), false)

	// v5user1 may publish to "allowed" only; its settings name both.
	ts, err := c.Telemetry(callCtx(t, "u1", userKey, userSecret))
	require.NoError(t, err)
	pt := v2.ClientType_PRODUCER
	require.NoError(t, ts.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &pt, PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{
			Topics: []*v2.Resource{{Name: "denied"}, {Name: "allowed"}}}}}}}))
	got, err := ts.Recv()
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, got.GetStatus().GetCode(), got.GetStatus().GetMessage())

	// The admin's transactions, left open: "denied" first in the half
	// queue, so each check round asks about it first.
	send := func(topic, id string) {
		t.Helper()
		sr, err := c.SendMessage(callCtx(t, "adm", adminKey, adminSecret),
			&v2.SendMessageRequest{Messages: []*v2.Message{txMsg(topic, id, "secret of "+topic)}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
	}
	send("denied", "TXD1")
	send("allowed", "TXA1")
	for range 3 {
		got, err := ts.Recv()
		require.NoError(t, err)
		rc := got.GetRecoverOrphanedTransactionCommand()
		require.NotNil(t, rc, "got %v", got)
		require.Equal(t, "allowed", rc.GetMessage().GetTopic().GetName(),
			"a check of a topic the account may not publish to: %s", rc.GetMessage().GetBody())
	}
}

// TestEndTransaction_DecidedBadOffset: an EndTransaction naming a decided
// half message's queue offset with a commit-log offset the log holds but
// where no half message starts (inside a record, past the log's end) is
// INVALID_TRANSACTION_ID, as it is while the transaction is open, not OK.
func TestEndTransaction_DecidedBadOffset(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b, "v5txd", 1, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	e := sendTx(t, c, "p1", txMsg("v5txd", "TXD1", "x"))
	pos, half, ok := v5.ParseTransactionID(e.TransactionId)
	require.True(t, ok)
	commit := v2.TransactionResolution_COMMIT
	st := endTx(t, c, "p1", "v5txd", "TXD1", e.TransactionId, commit)
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	for name, txID := range map[string]string{
		"inside a record": v5.TransactionID(pos+3, half),
		"past the log":    v5.TransactionID(1<<50, half),
	} {
		st := endTx(t, c, "p1", "v5txd", "TXD1", txID, commit)
		require.Equal(t, v2.Code_INVALID_TRANSACTION_ID, st.GetCode(), "%s: %s", name, st.GetMessage())
	}
	st = endTx(t, c, "p1", "v5txd", "TXD1", e.TransactionId, commit)
	require.Equal(t, v2.Code_OK, st.GetCode(), "the right id: decided already: %s", st.GetMessage())
	require.Len(t, readAll(t, b.Store(), "v5txd", 0), 1, "committed once")
}
