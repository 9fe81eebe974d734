package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestNotify_ConsumerIDsChanged: the broker tells a group's members to
// rebalance (NOTIFY_CONSUMER_IDS_CHANGED naming the group) when another
// member joins, when one leaves (UNREGISTER_CLIENT), and when one's
// connection closes; each time the member list it then answers is the new
// one.
func TestNotify_ConsumerIDsChanged(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	notified := make(chan string, 16)
	opts := remoting.DefaultClientOptions()
	opts.SerializeType = remoting.SerializeJSON
	opts.Logger = quiet()
	opts.OnRequest = func(_ context.Context, _ remoting.ResponseWriter, req *remoting.Command) {
		var h protocol.NotifyConsumerIDsChangedRequestHeader
		if int(req.Code) == protocol.NotifyConsumerIDsChanged && h.FromExt(req.ExtFields) == nil {
			notified <- h.ConsumerGroup
		}
	}
	stay := remoting.NewClient(opts)
	defer stay.Close()
	subs := map[string]string{"orders": "*"}
	expect := func(event string, members ...string) {
		t.Helper()
		select {
		case g := <-notified:
			require.Equal(t, "g", g, event)
		case <-time.After(10 * time.Second):
			t.Fatalf("no NOTIFY_CONSUMER_IDS_CHANGED after %s", event)
		}
		resp := invoke(t, stay, b.Addr(), protocol.GetConsumerListByGroup, &protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "g"}, nil)
		var l protocol.ConsumerList
		require.NoError(t, remoting.DecodeBody(resp.SerializeType, resp.Body, &l))
		require.ElementsMatch(t, members, l.ConsumerIDList, event)
	}
	heartbeat(t, stay, remoting.SerializeJSON, b.Addr(), "stay", "g", subs)
	expect("the first member joined", "stay")

	leaving := newClient(t, remoting.SerializeJSON)
	heartbeat(t, leaving, remoting.SerializeJSON, b.Addr(), "leaving", "g", subs)
	expect("a second member joined", "stay", "leaving")
	resp := invoke(t, leaving, b.Addr(), protocol.UnregisterClient, &protocol.UnregisterClientRequestHeader{ClientID: "leaving", ConsumerGroup: "g"}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	expect("a member unregistered", "stay")

	closing := newClient(t, remoting.SerializeJSON)
	heartbeat(t, closing, remoting.SerializeJSON, b.Addr(), "closing", "g", subs)
	expect("a third member joined", "stay", "closing")
	require.NoError(t, closing.Close())
	expect("a member's connection closed", "stay")
}

// TestRegister_TwoNameservers: a broker given two nameservers registers
// with both, its topics included.
func TestRegister_TwoNameservers(t *testing.T) {
	ns1, ns2 := startNamesrv(t, "127.0.0.1:0"), startNamesrv(t, "127.0.0.1:0")
	cfg := testConfig(t.TempDir())
	cfg.NamesrvAddr = ns1.Addr() + ";" + ns2.Addr()
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	invoke(t, c, b.Addr(), protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: "both",
		ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}, nil)
	for _, ns := range []string{ns1.Addr(), ns2.Addr()} {
		require.Eventually(t, func() bool {
			r := route(t, c, ns, "both")
			return r != nil && len(r.BrokerDatas) == 1 && r.BrokerDatas[0].BrokerAddrs[0] == b.Addr()
		}, 10*time.Second, 10*time.Millisecond, "registered with %s", ns)
	}
}
