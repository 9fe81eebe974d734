package v5_test

import (
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker"
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
