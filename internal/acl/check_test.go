package acl

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

func mustCompile(t *testing.T, f File) *Rules {
	t.Helper()
	r, err := Compile(f)
	require.NoError(t, err)
	return r
}

// testRules: alice publishes to orders only; bob consumes orders in group
// billing; root is an admin with no lists; carol is denied topic secret and
// may connect from 10.0.0.1-9 only.
func testRules(t *testing.T) *Rules {
	return mustCompile(t, File{
		Accounts: []Account{
			{AccessKey: "alice1", SecretKey: "alice-secret", TopicPerms: []string{"orders=PUB"}},
			{AccessKey: "bobbob", SecretKey: "bob-secret", TopicPerms: []string{"orders=SUB"}, GroupPerms: []string{"billing=SUB"}},
			{AccessKey: "rootroot", SecretKey: "root-secret", Admin: true},
			{AccessKey: "carol1", SecretKey: "carol-secret", DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB",
				TopicPerms: []string{"secret=DENY"}, WhiteRemoteAddress: "10.0.0.1-9"},
		},
	})
}

func signed(code int16, key, secret string, ext map[string]string, body []byte, from string) Request {
	sig.SignExt(ext, body, key, secret, "")
	return Request{Code: code, Remote: netip.MustParseAddr(from), Ext: ext, Body: body}
}

func TestCheck(t *testing.T) {
	r := testRules(t)
	hb, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.HeartbeatData{ClientID: "c", ConsumerDataSet: []protocol.ConsumerData{
		{GroupName: "billing", SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "orders"}, {Topic: "payments"}}}}})
	require.NoError(t, err)
	decodeHB := func(req Request) Request {
		req.DecodeBody = func(v any) error { return remoting.DecodeBody(remoting.SerializeJSON, req.Body, v) }
		return req
	}
	for _, tc := range []struct {
		name   string
		req    Request
		reason string // "" allowed
		remark string
	}{
		{"pub allowed", signed(protocol.SendMessage, "alice1", "alice-secret", map[string]string{"topic": "orders"}, []byte("m"), "127.0.0.1"), "", ""},
		{"v2 send allowed", signed(protocol.SendMessageV2, "alice1", "alice-secret", map[string]string{"b": "orders", "a": "g"}, []byte("m"), "127.0.0.1"), "", ""},
		{"wrong secret", signed(protocol.SendMessage, "alice1", "wrong-secret", map[string]string{"topic": "orders"}, []byte("m"), "127.0.0.1"),
			ReasonSignature, `ACL: access key "alice1": the signature does not match`},
		{"long unknown key", signed(protocol.SendMessage, strings.Repeat("k", 5000), "x", map[string]string{"topic": "orders"}, nil, "127.0.0.1"),
			ReasonUnknownKey, `ACL: access key "` + strings.Repeat("k", 64) + `..." is not an account`},
		{"unknown key", signed(protocol.SendMessage, "mallory", "x", map[string]string{"topic": "orders"}, nil, "127.0.0.1"),
			ReasonUnknownKey, `ACL: access key "mallory" is not an account`},
		{"no credentials", Request{Code: protocol.SendMessage, Remote: localhost, Ext: map[string]string{"topic": "orders"}},
			ReasonNoCredentials, "SEND_MESSAGE (code 10) carries no AccessKey"},
		{"pub-only pulls", signed(protocol.PullMessage, "alice1", "alice-secret", map[string]string{"topic": "orders", "consumerGroup": "g"}, nil, "127.0.0.1"),
			ReasonPermission, `ACL: access key "alice1" has no SUB permission on topic "orders" (needed by PULL_MESSAGE)`},
		{"pub elsewhere", signed(protocol.SendBatchMessage, "alice1", "alice-secret", map[string]string{"b": "payments"}, nil, "127.0.0.1"),
			ReasonPermission, `has no PUB permission on topic "payments"`},
		{"pull allowed", signed(protocol.PullMessage, "bobbob", "bob-secret", map[string]string{"topic": "orders", "consumerGroup": "billing"}, nil, "127.0.0.1"), "", ""},
		{"pull other group", signed(protocol.PullMessage, "bobbob", "bob-secret", map[string]string{"topic": "orders", "consumerGroup": "audit"}, nil, "127.0.0.1"),
			ReasonPermission, `has no SUB permission on group "audit"`},
		{"retry send needs group sub", signed(protocol.SendMessage, "bobbob", "bob-secret", map[string]string{"topic": "%RETRY%billing"}, nil, "127.0.0.1"), "", ""},
		{"trace topic always", signed(protocol.SendMessage, "bobbob", "bob-secret", map[string]string{"topic": "RMQ_SYS_TRACE_TOPIC"}, nil, "127.0.0.1"), "", ""},
		{"heartbeat topic denied", decodeHB(signed(protocol.HeartBeat, "bobbob", "bob-secret", map[string]string{}, hb, "127.0.0.1")),
			ReasonPermission, `has no SUB permission on topic "payments" (needed by HEART_BEAT)`},
		{"non-admin creates topic", signed(protocol.UpdateAndCreateTopic, "alice1", "alice-secret", map[string]string{"topic": "x"}, nil, "127.0.0.1"),
			ReasonAdmin, `ACL: access key "alice1" may not UPDATE_AND_CREATE_TOPIC (code 17): it needs an admin account`},
		{"non-admin deletes topic", signed(protocol.DeleteTopicInNamesrv, "bobbob", "bob-secret", map[string]string{"topic": "x"}, nil, "127.0.0.1"),
			ReasonAdmin, "may not DELETE_TOPIC_IN_NAMESRV (code 216)"},
		{"admin does everything", decodeHB(signed(protocol.HeartBeat, "rootroot", "root-secret", map[string]string{}, hb, "127.0.0.1")), "", ""},
		{"admin creates topic", signed(protocol.UpdateAndCreateTopic, "rootroot", "root-secret", map[string]string{"topic": "x"}, nil, "::1"), "", ""},
		{"deny on one topic", signed(protocol.SendMessage, "carol1", "carol-secret", map[string]string{"topic": "secret"}, nil, "10.0.0.3"),
			ReasonPermission, `ACL: access key "carol1" has no PUB permission on topic "secret"`},
		{"default perm", signed(protocol.SendMessage, "carol1", "carol-secret", map[string]string{"topic": "other"}, nil, "10.0.0.3"), "", ""},
		{"outside the account's whitelist", signed(protocol.SendMessage, "carol1", "carol-secret", map[string]string{"topic": "other"}, nil, "10.0.0.10"),
			ReasonAddress, `ACL: access key "carol1": address 10.0.0.10 is not in the account's whiteRemoteAddress`},
		{"whitelisted without signature", Request{Code: protocol.SendMessage, Remote: netip.MustParseAddr("10.0.0.3"),
			Ext: map[string]string{"topic": "other", sig.FieldAccessKey: "carol1"}}, ReasonSignature, `ACL: access key "carol1": the request carries no Signature`},
		{"signature only code", signed(protocol.GetRouteInfoByTopic, "alice1", "alice-secret", map[string]string{"topic": "zzz"}, nil, "127.0.0.1"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := r.Check(tc.req)
			if tc.reason == "" {
				require.Nil(t, ref)
				return
			}
			require.NotNil(t, ref)
			require.Equal(t, tc.reason, ref.Reason)
			require.Contains(t, ref.Remark, tc.remark)
			require.NotContains(t, ref.Remark, "-secret", "no secret in a remark")
		})
	}
}

func TestCheck_GlobalWhitelist(t *testing.T) {
	r := mustCompile(t, File{GlobalWhiteRemoteAddresses: []string{"192.168.*.*"},
		Accounts: []Account{{AccessKey: "rootroot", SecretKey: "root-secret", Admin: true}}})
	require.Nil(t, r.Check(signed(protocol.SendMessage, "rootroot", "root-secret", map[string]string{"topic": "t"}, nil, "192.168.3.4")))
	ref := r.Check(signed(protocol.SendMessage, "rootroot", "root-secret", map[string]string{"topic": "t"}, nil, "127.0.0.1"))
	require.NotNil(t, ref)
	require.Equal(t, ReasonAddress, ref.Reason)
	require.Contains(t, ref.Remark, "address 127.0.0.1 is not in globalWhiteRemoteAddresses")
}

func TestCompile_Errors(t *testing.T) {
	_, err := Compile(File{
		GlobalWhiteRemoteAddresses: []string{"10.1.1.300"},
		Accounts: []Account{
			{AccessKey: "short", SecretKey: "topsecret-value"},
			{AccessKey: "goodkey", SecretKey: "s3", DefaultTopicPerm: "WRITE", TopicPerms: []string{"orders"}, GroupPerms: []string{"g=PUSH"}},
			{AccessKey: "goodkey", SecretKey: "another-secret", WhiteRemoteAddress: "1.2.3"},
		},
	})
	require.ErrorIs(t, err, ErrInvalid)
	for _, want := range []string{
		"globalWhiteRemoteAddresses[0]: address pattern \"10.1.1.300\"",
		`accounts[0].accessKey: "short": want at least 6 characters`,
		"accounts[1].secretKey: want at least 6 characters (it has 2)",
		`accounts[1].defaultTopicPerm: permission "WRITE"`,
		`accounts[1].topicPerms[0]: "orders": want name=PERM`,
		`accounts[1].groupPerms[0]: permission "PUSH"`,
		`accounts[2].accessKey: "goodkey" is already an account's key`,
		`accounts[2].whiteRemoteAddress: address pattern "1.2.3"`,
	} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), "topsecret-value")
	var fe *FieldError
	require.True(t, errors.As(err, &fe))
}

func TestPerm(t *testing.T) {
	for s, p := range map[string]Perm{"DENY": Deny, "PUB": Pub, "SUB": Sub, "PUB|SUB": Pub | Sub, "SUB | PUB": Pub | Sub} {
		got, err := ParsePerm(s)
		require.NoError(t, err)
		require.Equal(t, p, got, s)
	}
	require.True(t, (Pub | Sub).allows(Any))
	require.True(t, Sub.allows(Any))
	require.False(t, (Deny | Pub).allows(Pub))
	require.False(t, Pub.allows(Sub))
}
