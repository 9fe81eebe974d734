package store

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/commitlog"
)

// copyLog applies the master's log from the replica's offset to the
// master's end, in 1000-byte pieces (not aligned to records).
func copyLog(t *testing.T, master, replica *Store) {
	t.Helper()
	buf := make([]byte, 1000)
	for at := replica.ReplicaOffset(); at < int64(master.Log().Next()); at = replica.ReplicaOffset() {
		n, _ := master.Log().ReadAt(buf, commitlog.Offset(at))
		require.Positive(t, n)
		require.NoError(t, replica.ApplyReplica(at, buf[:n]))
		replica.IndexReplica()
	}
}

// applyRest applies the master's log from the replica's offset to the
// master's end in one piece, without IndexReplica, and returns its length.
func applyRest(t *testing.T, master, replica *Store) int64 {
	t.Helper()
	from := replica.ReplicaOffset()
	buf := make([]byte, int64(master.Log().Next())-from)
	_, err := master.Log().ReadAt(buf, commitlog.Offset(from))
	require.NoError(t, err)
	require.NoError(t, replica.ApplyReplica(from, buf))
	return int64(len(buf))
}

// TestReplica_PromoteAndCut: a replica refuses puts, indexes what it is
// given, and once promoted continues each queue's offsets; reopened with a
// cut, its log, consume queues and queue offsets go back to the cut.
func TestReplica_PromoteAndCut(t *testing.T) {
	master := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer master.Close()
	rc := testConf(t.TempDir())
	replica := mustOpen(t, rc, testOpts())
	require.NoError(t, replica.SetReplica(true))
	require.ErrorIs(t, master.ApplyReplica(0, []byte{1}), ErrNotReplica)

	var cutAt int64
	for i, body := range seqBodies("m", 0, 40) {
		r := mustPut(t, master, msg("t", int32(i%2), body))
		if i == 30 {
			cutAt = r.Pos // NB: m-30 and after go
		}
	}
	refused := replica.Put(t.Context(), msg("t", 0, "x"))
	require.Equal(t, PutServiceNotAvailable, refused.Status)
	require.Contains(t, refused.Remark, "slave")
	copyLog(t, master, replica)
	waitDispatched(t, replica)
	require.Equal(t, int64(20), replica.MaxOffset("t", 0))

	require.NoError(t, replica.SetReplica(false))
	r := mustPut(t, replica, msg("t", 0, "after-promotion"))
	require.Equal(t, int64(20), r.QueueOffset, "queue offsets continue from the replicated ones")
	waitDispatched(t, replica)
	require.Equal(t, append(bodiesEven(seqBodies("m", 0, 40)), "after-promotion"), bodies(t, get(t, replica, "t", 0, 0, 100).Body))
	require.NoError(t, replica.Close())

	o := testOpts()
	o.Cut, o.CutAt = true, cutAt
	cut := mustOpen(t, rc, o)
	defer cut.Close()
	require.Equal(t, cutAt, int64(cut.Log().Next()))
	require.Equal(t, int64(15), cut.MaxOffset("t", 0), "m-0, m-2, ... m-28")
	require.Equal(t, int64(15), cut.MaxOffset("t", 1), "m-1, ... m-29")
	r = mustPut(t, cut, msg("t", 0, "after-cut"))
	require.Equal(t, int64(15), r.QueueOffset)
}

func bodiesEven(all []string) []string {
	var out []string
	for i := 0; i < len(all); i += 2 {
		out = append(out, all[i])
	}
	return out
}

// TestReplica_IndexReplica: what ApplyReplica wrote is indexed by
// IndexReplica, on the caller's goroutine while little waits (the slave's,
// which no dispatcher wake-up then costs), and by the dispatcher past
// replicaInlineMax.
func TestReplica_IndexReplica(t *testing.T) {
	master := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer master.Close()
	replica := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer replica.Close()
	require.NoError(t, replica.SetReplica(true))
	// NB: the dispatcher idles: nothing else dispatches below. An empty
	// log has no lag from the start, so waitDispatched alone could return
	// before the loop's first pass, which then held dispMu when
	// IndexReplica tried it (12 failures in 300 runs with -race). A pass is
	// counted once it released dispMu: counted before, a pass preempted
	// between its count and its unlock still held it (CI, 2026-12-06; a
	// 50 ms pause put there failed 3 runs of 3).
	require.Eventually(t, func() bool { return replica.loopPasses.Load() > 0 }, 10*time.Second, time.Millisecond)
	waitDispatched(t, replica)

	for i, body := range seqBodies("small", 0, 5) {
		mustPut(t, master, msg("t", int32(i%2), body))
	}
	n := applyRest(t, master, replica)
	require.Equal(t, n, replica.DispatchLag(), "ApplyReplica writes, and indexes nothing")
	replica.IndexReplica()
	require.Zero(t, replica.DispatchLag(), "indexed before IndexReplica returned")
	require.Equal(t, int64(3), replica.MaxOffset("t", 0))
	require.Equal(t, int64(2), replica.MaxOffset("t", 1))

	big := strings.Repeat("b", 1<<10)
	for range 2 * replicaInlineMax / len(big) {
		mustPut(t, master, msg("t", 0, big))
	}
	applyRest(t, master, replica)
	require.Greater(t, replica.DispatchLag(), int64(replicaInlineMax))
	replica.IndexReplica() // NB: past the bound: wakes the dispatcher, which nothing else would
	waitDispatched(t, replica)
	require.Equal(t, master.MaxOffset("t", 0), replica.MaxOffset("t", 0))
}
