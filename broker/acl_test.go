package broker

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
)

type aclCluster struct {
	broker *Broker
	ns     *nameserver.Server
	file   string
	logs   *testutil.SyncBuffer
}

// startACLCluster starts a nameserver and a broker that share an ACL file;
// the broker registers as rootroot.
func startACLCluster(t *testing.T) *aclCluster {
	t.Helper()
	dir := t.TempDir()
	file := testutil.WriteACL(t, testutil.ACLRules)
	logs := &testutil.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	nc := conf.DefaultNameserver()
	nc.Listen = "127.0.0.1:0"
	nc.ACL.File = file
	ns, err := nameserver.New(nc, logger)
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	bc := testConfig(filepath.Join(dir, "store"))
	bc.NamesrvAddr = ns.Addr()
	bc.ACL = conf.BrokerACL{File: file, AccessKey: "rootroot", SecretKey: "root-secret-1"}
	b := startBroker(t, bc, Options{Logger: logger})
	return &aclCluster{broker: b, ns: ns, file: file, logs: logs}
}

func signedClient(t *testing.T, st remoting.SerializeType, key, secret string) *remoting.Client {
	t.Helper()
	opts := remoting.ClientOptions{SerializeType: st, Logger: quiet()}
	if key != "" {
		opts.Sign = sig.Signer(key, secret, "")
	}
	c := remoting.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func requireRefused(t *testing.T, resp *remoting.Command, remark string) {
	t.Helper()
	require.Equal(t, protocol.NoPermission, int(resp.Code), resp.Remark)
	require.Contains(t, resp.Remark, remark)
	require.NotContains(t, resp.Remark, "-secret-")
}

func createTopic(t *testing.T, c *remoting.Client, addr, topic string) *remoting.Command {
	t.Helper()
	return invoke(t, c, addr, protocol.UpdateAndCreateTopic, rawExt{"topic": topic, "defaultTopic": "TBW102",
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, nil)
}

// TestACL_Refusals: each refusal of the issue, by code and remark, for
// both header codecs; and the signed requests that pass.
func TestACL_Refusals(t *testing.T) {
	cl := startACLCluster(t)
	addr, nsAddr := cl.broker.Addr(), cl.ns.Addr()
	for _, st := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeMsgpack} {
		t.Run(st.String(), func(t *testing.T) {
			root := signedClient(t, st, "rootroot", "root-secret-1")
			require.Equal(t, protocol.Success, int(createTopic(t, root, addr, "orders").Code))
			require.Equal(t, protocol.Success, int(createTopic(t, root, addr, "vault").Code))

			alice := signedClient(t, st, "alice1", "alice-secret-1")
			mustSend(t, alice, addr, "orders", 0, "hello", nil)

			requireRefused(t, send(t, signedClient(t, st, "alice1", "wrong-secret"), addr, "orders", 0, "x", nil),
				`ACL: access key "alice1": the signature does not match`)
			requireRefused(t, send(t, signedClient(t, st, "mallory", "whatever"), addr, "orders", 0, "x", nil),
				`ACL: access key "mallory" is not an account of this server`)
			requireRefused(t, send(t, signedClient(t, st, "", ""), addr, "orders", 0, "x", nil),
				"ACL: SEND_MESSAGE (code 10) carries no AccessKey")
			requireRefused(t, invoke(t, alice, addr, protocol.PullMessage, pullHeader("billing", "orders", 0, 0, 0), nil),
				`ACL: access key "alice1" has no SUB permission on topic "orders" (needed by PULL_MESSAGE)`)
			requireRefused(t, createTopic(t, alice, addr, "orders2"),
				`ACL: access key "alice1" may not UPDATE_AND_CREATE_TOPIC (code 17): it needs an admin account`)
			requireRefused(t, invoke(t, alice, addr, protocol.DeleteTopicInBroker, rawExt{"topic": "orders"}, nil),
				`may not DELETE_TOPIC_IN_BROKER (code 215)`)
			requireRefused(t, invoke(t, alice, nsAddr, protocol.DeleteTopicInNamesrv, rawExt{"topic": "orders"}, nil),
				`ACL: access key "alice1" may not DELETE_TOPIC_IN_NAMESRV (code 216)`)
			requireRefused(t, invoke(t, alice, nsAddr, protocol.PutKVConfig, rawExt{"namespace": "ORDER_TOPIC_CONFIG", "key": "orders", "value": "x"}, nil),
				`may not PUT_KV_CONFIG (code 100)`)

			dave := signedClient(t, st, "davedave", "dave-secret-1")
			mustSend(t, dave, addr, "orders", 0, "from dave", nil)
			requireRefused(t, send(t, dave, addr, "vault", 0, "x", nil), `ACL: access key "davedave" has no PUB permission on topic "vault"`)

			// carol is an admin whose whitelist is 10.9.9.9: from 127.0.0.1
			// she is refused, signed or not.
			requireRefused(t, send(t, signedClient(t, st, "carol1", "carol-secret-1"), addr, "orders", 0, "x", nil),
				`ACL: access key "carol1": address 127.0.0.1 is not in the account's whiteRemoteAddress`)

			bob := signedClient(t, st, "bobbob", "bob-secret-1")
			heartbeat(t, bob, st, addr, "bob-client", "billing", map[string]string{"orders": "*"})
			resp := invoke(t, bob, addr, protocol.PullMessage, pullHeader("billing", "orders", 0, 0, 0), nil)
			require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
			require.Contains(t, recordBodies(t, resp.Body), "hello")

			// The route is there: the broker registered as rootroot.
			resp = invoke(t, alice, nsAddr, protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: "orders"}, nil)
			require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		})
	}
	// A whitelisted address without a signature: an AccessKey alone.
	c := newClient(t, remoting.SerializeJSON)
	requireRefused(t, invoke(t, c, addr, protocol.SendMessage, rawExt{"AccessKey": "alice1", "topic": "orders", "producerGroup": "p"}, []byte("x")),
		`ACL: access key "alice1": the request carries no Signature`)

	require.Contains(t, cl.logs.String(), "acl: request refused")
	requireNoSecrets(t, cl.logs.String())
}

func requireNoSecrets(t *testing.T, logs string) {
	t.Helper()
	for _, line := range strings.Split(testutil.ACLRules, "\n") {
		if _, secret, ok := strings.Cut(line, "secretKey: "); ok {
			require.NotContains(t, logs, secret, "a secret key in the log")
		}
	}
}

// TestACL_RevokeWhileSending: a key removed from the file while its client
// sends is refused on a following send, without a restart; a broken edit
// keeps the last good rules.
func TestACL_RevokeWhileSending(t *testing.T) {
	cl := startACLCluster(t)
	addr := cl.broker.Addr()
	root := signedClient(t, remoting.SerializeMsgpack, "rootroot", "root-secret-1")
	require.Equal(t, protocol.Success, int(createTopic(t, root, addr, "orders").Code))
	alice := signedClient(t, remoting.SerializeMsgpack, "alice1", "alice-secret-1")
	mustSend(t, alice, addr, "orders", 0, "before", nil)

	revoked := strings.Replace(testutil.ACLRules, "accessKey: alice1", "accessKey: alice2", 1)
	require.NoError(t, os.WriteFile(cl.file, []byte(revoked), 0o600))
	deadline := time.Now().Add(10 * time.Second)
	var resp *remoting.Command
	for {
		resp = send(t, alice, addr, "orders", 0, "during", nil)
		if resp.Code != protocol.Success || time.Now().After(deadline) {
			break
		}
	}
	requireRefused(t, resp, `ACL: access key "alice1" is not an account of this server`)

	require.NoError(t, os.WriteFile(cl.file, []byte("accounts: [\n"), 0o600))
	require.Eventually(t, func() bool { return strings.Contains(cl.logs.String(), "keeping the last good rules") }, 10*time.Second, 10*time.Millisecond)
	mustSend(t, signedClient(t, remoting.SerializeMsgpack, "alice2", "alice-secret-1"), addr, "orders", 0, "after", nil)
	requireRefused(t, send(t, alice, addr, "orders", 0, "x", nil), `"alice1" is not an account`)
	requireNoSecrets(t, cl.logs.String())
}

// TestACL_UnsignedRegistration: a broker without credentials is refused by
// an ACL nameserver, so its topics get no route there; refused by every
// nameserver for that, it does not start, and says what to set (it served,
// unfindable, after a warning).
func TestACL_UnsignedRegistration(t *testing.T) {
	cl := startACLCluster(t)
	bc := testConfig(t.TempDir())
	bc.NamesrvAddr = cl.ns.Addr()
	bc.BrokerName = "broker-unsigned"
	b, err := New(bc, Options{Logger: quiet()})
	require.NoError(t, err)
	err = b.Start()
	require.ErrorContains(t, err, "every nameserver refused the registration")
	require.ErrorContains(t, err, "carries no AccessKey")
	require.ErrorContains(t, err, "--access-key/--secret-key")
	require.NoError(t, b.Close())
	root := signedClient(t, remoting.SerializeJSON, "rootroot", "root-secret-1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := root.Invoke(ctx, cl.ns.Addr(), remoting.NewRequest(protocol.GetBrokerClusterInfo, nil, nil))
	require.NoError(t, err)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.Contains(t, string(resp.Body), "broker-a")
	require.NotContains(t, string(resp.Body), "broker-unsigned")
	require.Contains(t, cl.logs.String(), "REGISTER_BROKER (code 103) carries no AccessKey")
}

// TestACL_MetricsNeedAnAccount: with ACL on the metrics endpoint takes
// basic auth with an account's keys, counts refusals by key and reason,
// and serves no profiler without Pprof.
func TestACL_MetricsNeedAnAccount(t *testing.T) {
	dir := t.TempDir()
	file := testutil.WriteACL(t, testutil.ACLRules)
	bc := testConfig(filepath.Join(dir, "store"))
	bc.ACL.File = file
	bc.MetricsListen = "127.0.0.1:0"
	b := startBroker(t, bc, Options{})
	requireRefused(t, send(t, signedClient(t, remoting.SerializeJSON, "alice1", "nope"), b.Addr(), "orders", 0, "x", nil), "signature does not match")

	get := func(path, key, secret string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+b.MetricsAddr()+path, nil)
		require.NoError(t, err)
		if key != "" {
			req.SetBasicAuth(key, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("/metrics", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, "basic auth")
	code, _ = get("/metrics", "alice1", "wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = get("/metrics", "alice1", "alice-secret-1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `sluice_acl_refusals_total{access_key="alice1",reason="bad_signature"} 1`)
	code, _ = get("/debug/pprof/", "alice1", "alice-secret-1")
	require.Equal(t, http.StatusNotFound, code)
}

// TestACL_HeartbeatBodyFlood: with ACL on, the guard decodes a heartbeat
// to learn its groups and topics, on the connection's reader and before
// the handler: it bounds the body's values as the handler does. A signed
// 1 MiB heartbeat of a million empty consumer entries decoded there into
// hundreds of MiB.
func TestACL_HeartbeatBodyFlood(t *testing.T) {
	cl := startACLCluster(t)
	const n = 1 << 20
	key := "consumerDataSet"
	bodies := map[remoting.SerializeType][]byte{
		remoting.SerializeMsgpack: append(append(append([]byte{0x81, 0xa0 | byte(len(key))}, key...), 0xdd, 0x00, 0x10, 0x00, 0x00),
			bytes.Repeat([]byte{0x80}, n)...),
		remoting.SerializeJSON: append(append([]byte(`{"`+key+`":[`), bytes.Repeat([]byte(`{},`), n-1)...), `{}]}`...),
	}
	for st, body := range bodies {
		c := signedClient(t, st, "bobbob", "bob-secret-1")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		resp := invoke(t, c, cl.broker.Addr(), protocol.HeartBeat, nil, body)
		runtime.ReadMemStats(&ms)
		require.Equal(t, protocol.SystemError, int(resp.Code), "%s: %s", st, resp.Remark)
		require.Contains(t, resp.Remark, "values", st)
		// NB: the broker runs in this process; the client's copies of the
		// body and signing take a few MiB.
		require.Less(t, ms.TotalAlloc-before, uint64(64<<20), "%s: allocated for the body", st)
	}
}
