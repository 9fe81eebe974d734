package broker

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/internal/tlscert"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// startControllerWith runs a one-node controller, as startController, on
// a remoting server with opts (ACL, TLS).
func startControllerWith(t testing.TB, opts remoting.ServerOptions) *controller.Standalone {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	s, err := controller.StartStandalone("127.0.0.1:0", opts, controller.Config{
		ID: "n0", Peers: []controller.Peer{{ID: "n0", Addr: ln.Addr().String()}}, Dir: filepath.Join(t.TempDir(), "ctl"),
		MasterTimeout: 3 * time.Second, Listener: ln, HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// secureController runs a controller that checks file's ACL rules and
// serves TLS only (a self-signed certificate).
func secureController(t *testing.T, file string) *controller.Standalone {
	w, err := acl.NewWatcher(file, conf.LoadACL, quiet())
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	ts, err := tlscert.Server(conf.TLS{Mode: conf.TLSEnforcing}, "", quiet())
	require.NoError(t, err)
	return startControllerWith(t, remoting.ServerOptions{Authorize: w.Guard().Authorize, TLS: ts})
}

// TestControllerMode_ACLAndTLS: with ACL and enforcing TLS on the
// controller, brokers sign their controller requests with their own
// account (acl.access_key) and dial it with TLS (controller_tls), so a
// master is elected and the other broker follows it. Before, brokers could
// neither sign nor use TLS towards the controllers, and none was elected.
func TestControllerMode_ACLAndTLS(t *testing.T) {
	file := testutil.WriteACL(t, testutil.ACLRules)
	ns := startNamesrv(t, "127.0.0.1:0")
	ctl := secureController(t, file)
	var bs []*Broker
	for range 2 {
		c := ctlConfig(t.TempDir(), ns.Addr(), ctl.Addr())
		c.ACL = conf.BrokerACL{File: file, AccessKey: "rootroot", SecretKey: "root-secret-1"}
		c.ControllerTLS = conf.ClientTLS{Enabled: true, Insecure: true}
		bs = append(bs, startBroker(t, c, Options{}))
	}
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 2 }, 20*time.Second, 10*time.Millisecond)
}
