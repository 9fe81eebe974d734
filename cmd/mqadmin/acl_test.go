package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/cli"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
)

// TestMQAdmin_Credentials: against an ACL nameserver, mqadmin signs with
// --access-key/--secret-key or SLUICE_ACCESS_KEY/SLUICE_SECRET_KEY; without
// them, or with a non-admin account, an admin command fails with the
// server's remark.
func TestMQAdmin_Credentials(t *testing.T) {
	file := testutil.WriteACL(t, testutil.ACLRules)
	ncfg := conf.DefaultNameserver()
	ncfg.Listen = "127.0.0.1:0"
	ncfg.ACL.File = file
	ns, err := nameserver.New(ncfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })

	r := mqRaw(t, "-n", ns.Addr(), "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "orders")
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stderr, "carries no AccessKey")

	r = mqRaw(t, "-n", ns.Addr(), "--access-key", "alice1", "--secret-key", "alice-secret-1",
		"deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "orders")
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stderr, `ACL: access key "alice1" may not DELETE_KV_CONFIG`)
	require.NotContains(t, r.stderr, "alice-secret-1")

	t.Setenv(cli.EnvAccessKey, "rootroot")
	t.Setenv(cli.EnvSecretKey, "root-secret-1")
	r = mqRaw(t, "-n", ns.Addr(), "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "orders")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = mqRaw(t, "-n", ns.Addr(), "clusterList")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = mqRaw(t, "-n", ns.Addr(), "--access-key", "rootroot", "--secret-key", "", "clusterList")
	require.Equal(t, exitOK, r.code, "the secret from the environment: %s", r.stderr)
	t.Setenv(cli.EnvSecretKey, "")
	r = mqRaw(t, "-n", ns.Addr(), "--access-key", "rootroot", "clusterList")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "give --access-key and --secret-key together")
}

// TestMQAdmin_TLS: against a nameserver that enforces TLS with a
// self-signed certificate, mqadmin needs --tls; --tls alone verifies and
// refuses the certificate; --tls-insecure works.
func TestMQAdmin_TLS(t *testing.T) {
	ncfg := conf.DefaultNameserver()
	ncfg.Listen = "127.0.0.1:0"
	ncfg.TLS.Mode = conf.TLSEnforcing
	ns, err := nameserver.New(ncfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })

	r := mqRaw(t, "-n", ns.Addr(), "--timeout", "2s", "clusterList")
	require.Equal(t, exitError, r.code, "plaintext: %s", r.stderr)
	require.Contains(t, r.stderr, "this port enforces TLS", "the nameserver says why it refuses")
	r = mqRaw(t, "-n", ns.Addr(), "--tls", "clusterList")
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stderr, "certificate")
	r = mqRaw(t, "-n", ns.Addr(), "--tls-insecure", "clusterList")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = mqRaw(t, "-n", ns.Addr(), "--tls-ca", "/nonexistent/ca.pem", "clusterList")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--tls-ca")
}
