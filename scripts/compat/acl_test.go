package compat

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"
)

// TestACLAccounts: the official client signs with WithCredentials; an
// account with SUB only consumes what the admin account published, and
// its own send is refused with NO_PERMISSION (16) naming the key, the
// topic and PUB; with a wrong secret nothing works.
func TestACLAccounts(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	p := newProducer(t, "p")
	want := map[string]sent{}
	for _, id := range []string{"a1", "a2", "a3"} {
		want[id] = sendSync(t, p, id, newMessage(topic, id, "TagA"))
	}
	in := newInbox()
	startPushConsumer(t, topic, "*", in, "sub", consumerOptions(name(t, "group"), name(t, "sub"), consumerSecurity(subCreds)...))
	in.waitIDs(t, ids(want))

	refused := func(creds primitive.Credentials, role, remark string) {
		t.Helper()
		sub := newProducer(t, role, append(producerSecurity(creds), producer.WithRetry(0))...)
		_, err := sub.SendSync(context.Background(), newMessage(topic, "x-"+role, "TagA"))
		require.Error(t, err)
		require.Contains(t, err.Error(), "16")
		require.Contains(t, err.Error(), remark)
		require.NotContains(t, err.Error(), creds.SecretKey)
	}
	refused(subCreds, "sub-producer", `ACL: access key "compat-sub" has no PUB permission on topic "`+topic+`"`)

	// A wrong secret: the nameserver already refuses the route query, which
	// the client reports as a missing route.
	bad := newProducer(t, "bad-secret", append(producerSecurity(primitive.Credentials{AccessKey: "compat-admin",
		SecretKey: "not-the-secret"}), producer.WithRetry(0))...)
	_, err := bad.SendSync(context.Background(), newMessage(topic, "x-bad", "TagA"))
	require.ErrorContains(t, err, "route info not found")
}
