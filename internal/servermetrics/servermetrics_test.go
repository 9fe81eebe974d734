package servermetrics

import (
	"net/http/httptest"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/remoting"
)

// TestRegistry: the text output, read back with the Prometheus parser,
// holds the Go runtime and process series and the remoting counters with
// the values Stats gives, every bad-frame reason present.
func TestRegistry(t *testing.T) {
	reg := NewRegistry()
	reg.MustRegister(Remoting{func() remoting.ServerStats {
		return remoting.ServerStats{Rejected: 3, FrameTimeouts: 2, BacklogClosed: 7, BadFrames: map[string]uint64{remoting.ReasonBadHeader: 5}}
	}})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	scraped, err := Scrape(srv.Listener.Addr().String())
	require.NoError(t, err)
	v := func(name string, labels map[string]string) float64 {
		t.Helper()
		x, ok := scraped.Lookup(name, labels)
		require.True(t, ok, "series %s%v missing", name, labels)
		return x
	}

	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes",
		"process_open_fds", "process_resident_memory_bytes"} {
		require.Greater(t, v(name, nil), 0.0, name)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	require.InDelta(t, float64(len(fds)), v("process_open_fds", nil), 5)
	require.Equal(t, 3.0, v("sluice_remoting_connections_refused_total", nil))
	require.Equal(t, 2.0, v("sluice_remoting_frame_timeouts_total", nil))
	require.Equal(t, 7.0, v("sluice_remoting_input_backlog_closed_total", nil))
	for _, reason := range remoting.BadFrameReasons {
		want := 0.0
		if reason == remoting.ReasonBadHeader {
			want = 5
		}
		require.Equal(t, want, v("sluice_remoting_bad_frames_total", map[string]string{"reason": reason}), reason)
	}
}
