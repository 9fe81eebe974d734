package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// startController runs one controller node with brokers 1 (master) and 2
// of group "b" registered and in sync, and returns its address.
func startController(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := controller.StartStandalone("127.0.0.1:0", remoting.ServerOptions{Logger: quiet()}, controller.Config{
		ID: "n0", Peers: []controller.Peer{{ID: "n0", Addr: ln.Addr().String()}}, Listener: ln,
		Dir: filepath.Join(t.TempDir(), "ctl"), MasterTimeout: time.Minute, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	cl, err := controller.NewClient(controller.ClientConfig{Addrs: []string{s.Addr()}, Logger: quiet()})
	require.NoError(t, err)
	// NB: the brokers live while their connection does: closing it would
	// mark them dead at once.
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, addr := range []string{"127.0.0.1:10911", "127.0.0.1:10921"} {
		_, err := cl.Register(ctx, controller.Registration{Cluster: "c", Name: "b", ID: controller.NoMaster, Addr: addr})
		require.NoError(t, err)
	}
	_, err = cl.AlterSyncStateSet(ctx, "b", 1, 1, []int64{1, 2}, 1)
	require.NoError(t, err)
	return s.Addr()
}

func TestController_Commands(t *testing.T) {
	addr := startController(t)
	c := &cluster{ns: "127.0.0.1:1"} // -n is not used when -a is given

	out := c.ok(t, "getControllerMetaData", "-a", addr)
	row := findRow(t, out, addr)
	require.Equal(t, []string{addr, "true", "n0", addr}, row[:4])

	out = c.ok(t, "getSyncStateSet", "-a", addr, "-b", "b")
	require.Equal(t, []string{"b", "1", "127.0.0.1:10911", "MASTER", "true", "true", "1", "2"}, findRow(t, out, "b", "1"))
	require.Equal(t, []string{"b", "2", "127.0.0.1:10921", "SLAVE", "true", "true", "1", "2"}, findRow(t, out, "b", "2"))

	out = c.ok(t, "electMaster", "-a", addr, "-b", "b", "-i", "2")
	require.Contains(t, out, "b: broker 2 (127.0.0.1:10921) is master, epoch 2")

	var info protocol.BrokerReplicasInfo
	c.okJSON(t, &info, "getSyncStateSet", "-a", addr, "-b", "b")
	require.Equal(t, int64(2), info.ReplicasInfoTable["b"].MasterBrokerID)
	require.Equal(t, int32(2), info.ReplicasInfoTable["b"].MasterEpoch)

	// Refusals: the controller's code name and remark, on one line.
	require.Contains(t, c.fails(t, exitError, "electMaster", "-a", addr, "-b", "b", "-i", "9"),
		"CONTROLLER_BROKER_METADATA_NOT_EXIST")
	require.Contains(t, c.fails(t, exitError, "electMaster", "-a", addr, "-b", "b", "-i", "1"),
		"CONTROLLER_ELECT_MASTER_FAILED")
	require.Contains(t, c.fails(t, exitError, "getSyncStateSet", "-a", addr, "-b", "nope"), `"nope"`)
	require.Contains(t, c.fails(t, exitUsage, "getSyncStateSet", "-a", addr), "missing flag -b")
	require.Contains(t, c.fails(t, exitUsage, "getSyncStateSet", "-a", addr, "-b", ""), "-b (--brokerName) names no broker")
	require.Contains(t, c.fails(t, exitUsage, "electMaster", "-a", addr, "-b", "b"), "missing flag -i")
	require.Contains(t, c.fails(t, exitUsage, "electMaster", "-a", "nowhere", "-b", "b", "-i", "1"), "not ip:port")
}

// TestController_NoneAnswers: the commands that go to the controllers'
// leader end with "no controller answered" once --timeout has passed for
// each controller, instead of asking again for ever.
func TestController_NoneAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := &cluster{ns: "127.0.0.1:1"}
	for _, args := range [][]string{
		{"electMaster", "-b", "b", "-i", "1"},
		{"getSyncStateSet", "-b", "b"},
	} {
		done := make(chan result, 1)
		go func() {
			var out, errb bytes.Buffer
			code := run(append([]string{"-n", c.ns, "--timeout", "300ms", "-a", gone + ";" + gone}, args...), &out, &errb)
			done <- result{code: code, stdout: out.String(), stderr: errb.String()}
		}()
		select {
		case r := <-done:
			require.Equal(t, exitError, r.code, "mqadmin %v: %s", args, r.stderr)
			require.Contains(t, r.stderr, "no controller answered")
		case <-time.After(time.Minute): // NB: a hang's bound, not a measure: it asked for ever
			t.Fatalf("mqadmin %v did not end", args)
		}
	}
}

// TestController_AllowLogCut: allowLogCut sends ALLOW_LOG_CUT to the
// broker, with -o as "offset" when given, and prints its answer.
func TestController_AllowLogCut(t *testing.T) {
	got := make(chan map[string]string, 2)
	srv := remoting.NewServer("127.0.0.1:0", remoting.ServerOptions{Logger: quiet()})
	srv.Handle(protocol.AllowLogCut, func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		got <- req.ExtMap()
		_ = w.Write(remoting.NewResponse(req, protocol.Success, "broker x may cut its log down to 7"))
	})
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr := srv.Addr().String()
	c := &cluster{ns: "127.0.0.1:1"}

	require.Contains(t, c.ok(t, "allowLogCut", "-b", addr), "may cut its log down to 7")
	require.NotContains(t, <-got, "offset")
	c.ok(t, "allowLogCut", "-b", addr, "-o", "7")
	require.Equal(t, "7", (<-got)["offset"])

	require.Contains(t, c.fails(t, exitUsage, "allowLogCut"), "missing flag -b")
	require.Contains(t, c.fails(t, exitUsage, "allowLogCut", "-b", "nowhere"), "not ip:port")
	require.Contains(t, c.fails(t, exitUsage, "allowLogCut", "-b", addr, "-o", "-1"), "negative")
}
