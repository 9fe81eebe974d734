package client

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
)

// newACLCluster starts a nameserver and a broker sharing testutil.ACLRules;
// the cluster's own clients (admin, route waits) sign as rootroot. With
// tlsMode enforcing, both servers take TLS only and every client of the
// cluster dials TLS (self-signed certificates: not verified).
func newACLCluster(t *testing.T, tlsMode string) *cluster {
	t.Helper()
	file := testutil.WriteACL(t, testutil.ACLRules)
	nc := conf.DefaultNameserver()
	nc.Listen = "127.0.0.1:0"
	nc.ACL.File = file
	nc.TLS.Mode = tlsMode
	ns, err := nameserver.New(nc, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	c := &cluster{t: t, ns: ns, auth: []Option{WithCredentials("rootroot", "root-secret-1")}}
	cfg := brokerConfig(t, ns.Addr(), "broker-a", t.TempDir())
	cfg.ACL = conf.BrokerACL{File: file, AccessKey: "rootroot", SecretKey: "root-secret-1"}
	if tlsMode == conf.TLSEnforcing {
		cfg.TLS.Mode = tlsMode
		cfg.NamesrvTLS = conf.ClientTLS{Enabled: true, Insecure: true}
		c.auth = append(c.auth, WithTLS(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // self-signed test servers
	}
	c.brokers = append(c.brokers, startBrokerCfg(t, cfg))
	c.cfgs = append(c.cfgs, cfg)
	c.waitRoute("TBW102", 1)
	return c
}

// TestCredentials: producers and consumers sign with their accounts and
// work; a producer without credentials, or with a consumer's, is refused
// with the broker's NO_PERMISSION remark; in plaintext, and over TLS
// (client.WithTLS) against servers that enforce it.
func TestCredentials(t *testing.T) {
	for _, mode := range []string{conf.TLSDisabled, conf.TLSEnforcing} {
		t.Run("tls="+mode, func(t *testing.T) { testCredentials(t, mode) })
	}
}

func testCredentials(t *testing.T, tlsMode string) {
	c := newACLCluster(t, tlsMode)
	c.createTopic("orders", 2)
	ctx := ctxT(t, 30*time.Second)

	alice := c.producer(WithCredentials("alice1", "alice-secret-1"), WithRetries(0))
	sendN(t, alice, "orders", "m", 10, nil)

	rec := newRecorder()
	c.pushConsumer("billing", "orders", rec.handler("bob"), WithCredentials("bobbob", "bob-secret-1"),
		WithConsumeFrom(ConsumeFromFirst))
	rec.waitDistinct(t, 10, 20*time.Second)

	bobSends := c.producer(WithCredentials("bobbob", "bob-secret-1"), WithRetries(0))
	_, err := bobSends.Send(ctx, &Message{Topic: "orders", Body: []byte("x")})
	require.Error(t, err)
	require.Contains(t, err.Error(), `ACL: access key "bobbob" has no PUB permission on topic "orders"`)
	var be *BrokerError
	require.True(t, errors.As(err, &be), "%v", err)
	require.EqualValues(t, 16, be.Code)

	anon, err := NewProducer(append(c.opts(), WithCredentials("", ""), WithRetries(0))...)
	require.NoError(t, err)
	defer anon.Close()
	require.NoError(t, anon.Start())
	_, err = anon.Send(ctx, &Message{Topic: "orders", Body: []byte("x")})
	require.Error(t, err)
	require.Contains(t, err.Error(), "carries no AccessKey")
}
