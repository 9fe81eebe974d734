package controller

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/tlscert"
)

// raftCA makes a CA and a certificate for 127.0.0.1 it signed, as files,
// and returns the Raft TLS settings of a node holding them.
func raftCA(t *testing.T) conf.RaftTLS {
	t.Helper()
	dir := t.TempDir()
	caPEM, _, ca, err := tlscert.Issue([]string{"sluice-test-ca"}, nil, true)
	require.NoError(t, err)
	certPEM, keyPEM, _, err := tlscert.Issue([]string{"127.0.0.1"}, ca, false)
	require.NoError(t, err)
	k := conf.RaftTLS{Cert: filepath.Join(dir, "node.crt"), Key: filepath.Join(dir, "node.key"), CA: filepath.Join(dir, "ca.crt")}
	require.NoError(t, os.WriteFile(k.Cert, certPEM, 0o600))
	require.NoError(t, os.WriteFile(k.Key, keyPEM, 0o600))
	require.NoError(t, os.WriteFile(k.CA, caPEM, 0o600))
	return k
}

func raftTLS(t *testing.T, k conf.RaftTLS) *tls.Config {
	t.Helper()
	tc, err := RaftTLS(k)
	require.NoError(t, err)
	return tc
}

// TestStream_TLS: with raft_tls, the transport takes only peers whose
// certificate its CA signed: a node of another CA cannot dial in, and a
// plaintext connection (a stranger speaking Raft's RPCs) is refused at its
// first bytes. Before, the transport was plain TCP: anyone reaching the
// port could append entries to the controllers' log.
func TestStream_TLS(t *testing.T) {
	good, other := raftCA(t), raftCA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newStream(ln, raftTLS(t, good))
	defer srv.Close()
	addr := ln.Addr().String()
	type accepted struct {
		data []byte
		err  error
	}
	got := make(chan accepted, 1)
	accept := func() {
		c, err := srv.Accept()
		if err != nil {
			got <- accepted{err: err}
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(waitFor))
		b := make([]byte, 5)
		_, err = io.ReadFull(c, b)
		got <- accepted{b, err}
	}

	// A peer of the same CA: its bytes arrive.
	go accept()
	peer := newStream(nil, raftTLS(t, good))
	c, err := peer.Dial(raft.ServerAddress(addr), waitFor)
	require.NoError(t, err)
	_, err = c.Write([]byte("hello"))
	require.NoError(t, err)
	a := <-got
	require.NoError(t, a.err)
	require.Equal(t, "hello", string(a.data))
	c.Close()

	// A node of another CA: refused both ways.
	go accept()
	stranger := newStream(nil, raftTLS(t, other))
	_, err = stranger.Dial(raft.ServerAddress(addr), waitFor)
	require.Error(t, err)
	require.Error(t, (<-got).err)

	// Plaintext: the server never reads it as Raft.
	go accept()
	pc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer pc.Close()
	_, err = pc.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	require.NoError(t, err)
	require.Error(t, (<-got).err)
}

// TestCluster_RaftTLS: three nodes whose transport is mutually verified
// TLS elect a leader and replicate a registration to every FSM.
func TestCluster_RaftTLS(t *testing.T) {
	tc := raftTLS(t, raftCA(t))
	c := newCluster(t, 3, func(cfg *Config) { cfg.RaftTLS = tc })
	c.register("b", "127.0.0.1:10911")
	for i := range c.nodes {
		require.Eventually(t, func() bool {
			g := c.nodes[i].Group("b")
			return g != nil && reflect.DeepEqual(g, c.nodes[c.leader()].Group("b"))
		}, waitFor, 5*time.Millisecond, "node %d", i)
	}
}
