package nameserver

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/servermetrics"
)

// TestMetrics_RuntimeAndPeers: /metrics has Go's runtime and process
// series, and the remoting counters count what hostile peers did: a frame
// left half-sent is closed after remoting.frame_timeout (the nameserver's
// old read_timeout default, 0s, never closed it), and a connection over
// remoting.max_connections_per_address is closed at accept.
func TestMetrics_RuntimeAndPeers(t *testing.T) {
	s := startServer(t, func(n *conf.Nameserver) {
		n.MetricsListen = "127.0.0.1:0"
		n.Remoting.FrameTimeout = 200 * time.Millisecond
		n.Remoting.MaxConnsPerAddr = 2
	})
	get := func(v servermetrics.Values, name string) float64 {
		t.Helper()
		x, ok := v.Lookup(name, nil)
		require.True(t, ok, "series %s missing", name)
		return x
	}
	v, err := servermetrics.Scrape(s.MetricsAddr())
	require.NoError(t, err)
	require.Greater(t, get(v, "go_goroutines"), 0.0)
	require.Greater(t, get(v, "go_memstats_heap_alloc_bytes"), 0.0)
	require.Greater(t, get(v, "process_open_fds"), 0.0)
	require.Greater(t, get(v, "process_resident_memory_bytes"), 0.0)
	require.Equal(t, 0.0, get(v, "sluice_remoting_frame_timeouts_total"))
	require.Equal(t, 0.0, get(v, "sluice_remoting_connections_refused_total"))
	for _, reason := range remoting.BadFrameReasons {
		n, ok := v.Lookup("sluice_remoting_bad_frames_total", map[string]string{"reason": reason})
		require.True(t, ok, reason)
		require.Equal(t, 0.0, n, reason)
	}

	dialRaw := func() net.Conn {
		conn, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	closedByServer := func(conn net.Conn) {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := io.ReadAll(conn)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the nameserver kept the connection open")
	}
	stalled := dialRaw()
	_, err = stalled.Write(binary.BigEndian.AppendUint32(nil, 100)) // a length, and nothing more
	require.NoError(t, err)
	closedByServer(stalled)
	// NB: its address's count drops after the close the peer sees.
	require.Eventually(t, func() bool { return s.rs.Stats().Conns == 0 }, 5*time.Second, time.Millisecond)

	dialRaw()
	dialRaw()
	closedByServer(dialRaw())

	v, err = servermetrics.Scrape(s.MetricsAddr())
	require.NoError(t, err)
	require.Equal(t, 1.0, get(v, "sluice_remoting_frame_timeouts_total"))
	require.Equal(t, 1.0, get(v, "sluice_remoting_connections_refused_total"))
}
