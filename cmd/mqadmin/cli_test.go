package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCLI_UsageErrorsExit2WithUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "no command given"},
		{"unknown command", []string{"-n", "127.0.0.1:9876", "frobnicate"}, `unknown command "frobnicate"`},
		{"unknown command with flags", []string{"-n", "127.0.0.1:9876", "--timeout", "1s", "updateTopc", "-t", "x", "-c", "C"},
			`unknown command "updateTopc" for "mqadmin"`},
		{"unknown flag", []string{"-n", "127.0.0.1:9876", "topicList", "--nope"}, "unknown flag: --nope"},
		{"unknown root flag", []string{"--json", "-x", "topicList"}, "unknown shorthand flag: 'x' in -x"},
		{"missing flag", []string{"-n", "127.0.0.1:9876", "topicRoute"}, "missing flag -t (--topic)"},
		{"stray argument", []string{"-n", "127.0.0.1:9876", "topicRoute", "-t", "a", "b"}, `unexpected argument "b"`},
		{"bad nameserver", []string{"-n", "localhost:9876", "topicList"}, `nameserver "localhost:9876" is not ip:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NAMESRV_ADDR", "")
			r := mqRaw(t, tc.args...)
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
			require.Contains(t, r.stderr, "Usage:")
			require.Empty(t, r.stdout)
		})
	}
	t.Run("no nameserver", func(t *testing.T) {
		t.Setenv("NAMESRV_ADDR", "")
		r := mqRaw(t, "topicList")
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "no nameserver: give -n ip:port or set NAMESRV_ADDR")
		r = mqRaw(t, "-n", " ; ", "topicList")
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, `no nameserver in " ; ": give -n ip:port or set NAMESRV_ADDR`)
	})
}

func TestCLI_Help(t *testing.T) {
	r := mqRaw(t, "-h")
	require.Equal(t, exitOK, r.code)
	for _, name := range []string{"updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "clusterList",
		"brokerStatus", "updateSubGroup", "deleteSubGroup", "consumerProgress", "consumerConnection", "consumerStatus", "getConsumerStatus", "queryMsgById",
		"queryMsgByKey", "queryMsgByOffset", "resetOffsetByTime", "sendMessage", "consumeMessage", "printMsg", "resendDLQ", "updateKvConfig", "deleteKvConfig"} {
		require.Contains(t, r.stdout, name)
	}
	r = mqRaw(t, "updateTopic", "-h")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "-t, --topic")
	require.Contains(t, r.stdout, "-n, --namesrvAddr")
}

func TestCLI_NameserverFromEnvAndUnreachable(t *testing.T) {
	c := startCluster(t)
	t.Setenv("NAMESRV_ADDR", c.ns)
	r := mqRaw(t, "topicList")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "TBW102")

	r = mqRaw(t, "-n", "127.0.0.1:1", "topicList")
	require.Equal(t, exitError, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	require.Contains(t, r.stderr, "mqadmin: topicList: ")
	require.Contains(t, r.stderr, "127.0.0.1:1", "names the nameserver asked")
	require.Contains(t, r.stderr, "dial tcp 127.0.0.1:1: connect: connection refused", "says why, as Go's dialer does")

	r = mqRaw(t, "-n", "127.0.0.1:1;"+c.ns, "topicList")
	require.Equal(t, exitOK, r.code, "the next nameserver answers: %s", r.stderr)
}
