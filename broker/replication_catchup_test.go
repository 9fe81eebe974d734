package broker

import (
	"context"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
)

// catchUpBytes is how much the catch-up test stores on the master:
// SLUICE_HA_CATCHUP_BYTES, default 1 GiB.
func catchUpBytes(t testing.TB) int64 {
	if v := os.Getenv("SLUICE_HA_CATCHUP_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "SLUICE_HA_CATCHUP_BYTES")
		return n
	}
	return 1 << 30
}

// fillMaster stores about n bytes in batches of 64 KiB messages over 4
// queues, straight into the master's store.
func fillMaster(t testing.TB, b *Broker, topic string, n int64) {
	t.Helper()
	body := make([]byte, 64<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	items := make([]message.BatchItem, 8)
	for i := range items {
		items[i] = message.BatchItem{Body: body}
	}
	for stored, i := int64(0), 0; stored < n; i++ {
		res := b.Store().PutBatch(context.Background(), &store.Batch{
			Template: message.Message{Topic: topic, QueueID: int32(i % 4), BornTimestamp: time.Now().UnixMilli(),
				BornHost: netip.MustParseAddrPort("127.0.0.1:1")},
			Items: items})
		require.Equal(t, store.PutOK, res.Status, res.Remark)
		stored += int64(res.Size)
	}
}

// TestReplication_EmptySlaveCatchesUp: an empty slave joins a master
// holding over 1 GiB in several segments whose oldest retention deleted: it
// copies what is retained, its consume queues end equal to the master's,
// and its heap stays bounded while it copies.
func TestReplication_EmptySlaveCatchesUp(t *testing.T) {
	size := catchUpBytes(t)
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleAsyncMaster)
	seg := max(size/8, 1<<20)
	mc.Store.SegmentSize, sc.Store.SegmentSize = seg, seg
	mc.Store.Preallocate, sc.Store.Preallocate = false, false
	mc.Store.FileReservedTime = time.Hour
	master := startBroker(t, mc, Options{})
	fillMaster(t, master, "big", size/4)
	// Retention takes the first segment(s) as if they had aged.
	require.NoError(t, master.Store().Log().Sync(context.Background()))
	waitIndexed(t, master)
	_, err := master.Store().Log().Retain(time.Now().Add(2*time.Hour), master.Store().Log().Next())
	require.NoError(t, err)
	fillMaster(t, master, "big", size)
	require.Greater(t, int64(master.Store().Log().Min()), int64(0), "retention deleted the oldest segments")
	require.Greater(t, int64(master.Store().Log().Next())-int64(master.Store().Log().Min()), size)
	waitIndexed(t, master)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapInuse
	slave := startBroker(t, sc, Options{})
	var peak uint64
	start := time.Now()
	require.Eventually(t, func() bool {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		return slave.Store().Log().Next() == master.Store().Log().Next()
	}, 5*time.Minute, 20*time.Millisecond)
	took := time.Since(start)
	copied := int64(master.Store().Log().Next() - master.Store().Log().Min())
	t.Logf("copied %d MiB in %v (%.0f MiB/s); heap in use %d MiB before, peak %d MiB",
		copied>>20, took.Round(time.Millisecond), float64(copied>>20)/took.Seconds(), heapBefore>>20, peak>>20)
	require.Less(t, peak, heapBefore+256<<20, "heap grew by more than 256 MiB while copying %d MiB", copied>>20)
	require.Equal(t, master.Store().Log().Min(), slave.Store().Log().Min())
	waitIndexed(t, master)
	waitIndexed(t, slave)
	for q := range int32(4) {
		require.Equal(t, master.Store().MaxOffset("big", q), slave.Store().MaxOffset("big", q), "queue %d max", q)
		require.Equal(t, master.Store().MinOffset("big", q), slave.Store().MinOffset("big", q), "queue %d min", q)
	}
}
