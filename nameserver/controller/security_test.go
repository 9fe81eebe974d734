package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Test accounts of the controllers' ACL.
const (
	adminKey, adminSecret = "admin01", "admin-secret"
	userKey, userSecret   = "user001", "user-secret"
	otherKey, otherSecret = "admin02", "admin2-secret"
)

// testRules are an admin account and one that is not.
func testRules(t testing.TB) *acl.Rules {
	r, err := acl.Compile(acl.File{Accounts: []acl.Account{
		{AccessKey: adminKey, SecretKey: adminSecret, Admin: true},
		{AccessKey: otherKey, SecretKey: otherSecret, Admin: true},
		{AccessKey: userKey, SecretKey: userSecret, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}})
	require.NoError(t, err)
	return r
}

// startSecured runs one standalone controller whose remoting port checks
// ACL with testRules; tune, if set, changes its options first.
func startSecured(t *testing.T, tune func(*remoting.ServerOptions)) *Standalone {
	t.Helper()
	c, lns := newPeers(t, 1, nil)
	cfg := c.config(0, lns[0])
	cfg.Advertise = ""
	rules := testRules(t)
	opts := remoting.ServerOptions{Logger: quietLogger(),
		Authorize: acl.NewGuard(func() *acl.Rules { return rules }, quietLogger()).Authorize}
	if tune != nil {
		tune(&opts)
	}
	s, err := StartStandalone("127.0.0.1:0", opts, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.Eventually(t, s.Node().IsLeader, waitFor, 10*time.Millisecond)
	return s
}

// controllerCodes are every request code a controller serves.
var controllerCodes = []int16{protocol.BrokerHeartbeat, protocol.ControllerAlterSyncStateSet, protocol.ControllerElectMaster,
	protocol.ControllerRegisterBroker, protocol.ControllerGetReplicaInfo, protocol.ControllerGetMetadataInfo,
	protocol.ControllerGetSyncStateData, protocol.ControllerGetNextBrokerID, protocol.ControllerApplyBrokerID}

// TestSecurity_ControllerCodesNeedAdmin: with ACL on, every controller
// code is refused NO_PERMISSION unsigned and signed by an account that is
// not an admin (before, an account that was not an admin could register
// a member, elect it and so make every real broker cut its log); an admin
// account is served.
func TestSecurity_ControllerCodesNeedAdmin(t *testing.T) {
	s := startSecured(t, nil)
	for _, tc := range []struct {
		name string
		sign func(*remoting.Command)
		in   string
	}{
		{"unsigned", nil, "carries no AccessKey"},
		{"not an admin", sig.Signer(userKey, userSecret, ""), "needs an admin account"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quietLogger(), Sign: tc.sign})
			defer rc.Close()
			for _, code := range controllerCodes {
				ext := map[string]string{"clusterName": "c", "brokerName": "b", "brokerId": "1", "brokerAddress": "127.0.0.1:1",
					"brokerAddr": "127.0.0.1:1", "appliedBrokerId": "1", "registerCheckCode": "127.0.0.1:1;1"}
				resp, err := rc.Invoke(ctxFor(t), s.Addr(), remoting.NewRequest(code, ext, nil))
				require.NoError(t, err)
				require.Equal(t, int16(protocol.NoPermission), resp.Code, "%s: %s", protocol.CodeName(code), resp.Remark)
				require.Contains(t, resp.Remark, tc.in)
			}
			require.Nil(t, s.Node().Group("b"), "a refused registration left a member")
		})
	}
	cl, err := NewClient(ClientConfig{Addrs: []string{s.Addr()}, Logger: quietLogger(), Sign: sig.Signer(adminKey, adminSecret, "")})
	require.NoError(t, err)
	defer cl.Close()
	role, err := cl.Register(ctxFor(t), Registration{Cluster: "c", Name: "b", ID: NoMaster, Addr: "127.0.0.1:10911"})
	require.NoError(t, err)
	require.True(t, role.IsMaster())
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	ack, err := cl.Heartbeat(ctx, Heartbeat{Cluster: "c", Name: "b", ID: role.BrokerID, Addr: "127.0.0.1:10911"})
	require.NoError(t, err)
	require.True(t, ack.LeaderAck)
}

// TestSecurity_RegisterCannotTakeAMembersID: a registration naming the id
// of a member at another address is refused while that member is alive,
// and, once it is gone, unless it comes from the account the member
// registered with. Before, it moved the member to the stranger's address.
func TestSecurity_RegisterCannotTakeAMembersID(t *testing.T) {
	c := newCluster(t, 1, nil)
	reg := func(id int64, addr, account string) (Role, error) {
		var role Role
		var err error
		c.eventually(func(n *Node) error {
			role, err = n.Register(Registration{Cluster: "c", Name: "b", ID: id, Addr: addr, Account: account}, nil, 0)
			if errors.Is(err, ErrNotLeader) {
				return err
			}
			return nil
		})
		return role, err
	}
	role, err := reg(NoMaster, "127.0.0.1:10911", adminKey)
	require.NoError(t, err)
	id := role.BrokerID
	b := c.beat("b", id, 0)
	var ce *Error
	_, err = reg(id, "10.6.6.6:10911", adminKey)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerBrokerIDInvalid), ce.Code)
	require.Contains(t, ce.Remark, "is alive at 127.0.0.1:10911")
	require.Equal(t, "127.0.0.1:10911", c.nodes[c.leader()].Group("b").Members[id].Addr)

	b.halt()
	require.Eventually(t, func() bool { return !c.nodes[c.leader()].alive("b", id) }, waitFor, 10*time.Millisecond)
	_, err = reg(id, "10.6.6.6:10911", "intruder")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerBrokerIDInvalid), ce.Code)
	require.Contains(t, ce.Remark, `registered with access key "admin01"`)
	require.Equal(t, "127.0.0.1:10911", c.nodes[c.leader()].Group("b").Members[id].Addr)

	// The broker itself, moved while it was down, takes its id back.
	_, err = reg(id, "127.0.0.2:10911", adminKey)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.2:10911", c.nodes[c.leader()].Group("b").Members[id].Addr)
}

// TestSecurity_HeartbeatFromTheMembersAccount: a heartbeat for a member
// that registered with an account is refused from another (admin)
// account: the member's liveness and notice connection are its own.
// Before, any caller could keep a member alive and take its notices.
func TestSecurity_HeartbeatFromTheMembersAccount(t *testing.T) {
	s := startSecured(t, nil)
	client := func(key, secret string) *Client {
		cl, err := NewClient(ClientConfig{Addrs: []string{s.Addr()}, Logger: quietLogger(), Sign: sig.Signer(key, secret, "")})
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	own, other := client(adminKey, adminSecret), client(otherKey, otherSecret)
	role, err := own.Register(ctxFor(t), Registration{Cluster: "c", Name: "b", ID: NoMaster, Addr: "127.0.0.1:10911"})
	require.NoError(t, err)
	hb := Heartbeat{Cluster: "c", Name: "b", ID: role.BrokerID, Addr: "127.0.0.1:10911"}
	_, err = other.Heartbeat(ctxFor(t), hb)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.NoPermission), ce.Code)
	require.Contains(t, ce.Remark, `registered with access key "admin01"`)
	_, err = own.Heartbeat(ctxFor(t), hb)
	require.NoError(t, err)
}
