package main

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// TestBinary_Controller runs mqnamesrv --controller as one node: the
// nameserver's address serves both the routes and the controller.
func TestBinary_Controller(t *testing.T) {
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	raftAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--controller", "--controller-id", "n0",
		"--controller-peers", "n0="+raftAddr, "--controller-dir", filepath.Join(t.TempDir(), "ctl"))
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	addrC := make(chan string, 1)
	addrRe := regexp.MustCompile(`msg="mqnamesrv: listening" addr=(\S+)`)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := addrRe.FindStringSubmatch(sc.Text()); m != nil {
				addrC <- m[1]
			}
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		require.NoError(t, cmd.Wait(), "exit status after SIGTERM")
	}()
	var addr string
	select {
	case addr = <-addrC:
	case <-done:
		t.Fatal("mqnamesrv exited before listening")
	case <-time.After(patience):
		t.Fatal("mqnamesrv did not log its address")
	}

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cl, err := controller.NewClient(controller.ClientConfig{Addrs: []string{addr}})
	require.NoError(t, err)
	defer cl.Close()
	role, err := cl.Register(ctx, controller.Registration{Cluster: "c", Name: "b", ID: controller.NoMaster, Addr: "127.0.0.1:10911"})
	require.NoError(t, err)
	require.True(t, role.IsMaster())
	md, err := cl.Metadata(ctx, addr)
	require.NoError(t, err)
	require.True(t, md.IsLeader)
	require.Equal(t, addr, md.ControllerLeaderAddress)

	rc := remoting.NewClient(remoting.DefaultClientOptions())
	defer rc.Close()
	resp, err := rc.Invoke(ctx, addr, remoting.NewRequest(protocol.GetRouteInfoByTopic,
		protocol.Ext(&protocol.GetRouteInfoRequestHeader{Topic: "NoSuchTopic"}), nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.TopicNotExist), resp.Code, "the nameserver still serves routes")
}

// TestBinary_ControllerACL: mqnamesrv --controller --acl refuses every
// unsigned controller request and one signed by an account that is not
// an admin (NO_PERMISSION), and serves an admin's.
func TestBinary_ControllerACL(t *testing.T) {
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	raftAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--controller", "--controller-id", "n0",
		"--controller-peers", "n0="+raftAddr, "--controller-dir", filepath.Join(t.TempDir(), "ctl"),
		"--acl", testutil.WriteACL(t, testutil.ACLRules))
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	addrC := make(chan string, 1)
	addrRe := regexp.MustCompile(`msg="mqnamesrv: listening" addr=(\S+)`)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := addrRe.FindStringSubmatch(sc.Text()); m != nil {
				addrC <- m[1]
			}
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		require.NoError(t, cmd.Wait(), "exit status after SIGTERM")
	}()
	var addr string
	select {
	case addr = <-addrC:
	case <-done:
		t.Fatal("mqnamesrv exited before listening")
	case <-time.After(patience):
		t.Fatal("mqnamesrv did not log its address")
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for _, sign := range []func(*remoting.Command){nil, sig.Signer("alice1", "alice-secret-1", "")} {
		rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Sign: sign})
		resp, err := rc.Invoke(ctx, addr, remoting.NewRequest(protocol.ControllerRegisterBroker,
			map[string]string{"clusterName": "c", "brokerName": "b", "brokerAddress": "127.0.0.1:10911"}, nil))
		rc.Close()
		require.NoError(t, err)
		require.Equal(t, int16(protocol.NoPermission), resp.Code, resp.Remark)
	}
	cl, err := controller.NewClient(controller.ClientConfig{Addrs: []string{addr}, Sign: sig.Signer("rootroot", "root-secret-1", "")})
	require.NoError(t, err)
	defer cl.Close()
	role, err := cl.Register(ctx, controller.Registration{Cluster: "c", Name: "b", ID: controller.NoMaster, Addr: "127.0.0.1:10911"})
	require.NoError(t, err)
	require.True(t, role.IsMaster())
}
