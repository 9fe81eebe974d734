package store

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/stretchr/testify/require"
)

// fakeDisk is a DiskUsage whose use is set by the test, plus extra while the
// reserve file exists.
type fakeDisk struct {
	used    atomic.Uint64 // math.Float64bits
	reserve float64       // share the reserve file takes
	dir     string
}

func (d *fakeDisk) set(u float64) { d.used.Store(math.Float64bits(u)) }

func (d *fakeDisk) usage(string) (float64, error) {
	u := math.Float64frombits(d.used.Load())
	if _, err := os.Stat(filepath.Join(d.dir, reserveName)); err == nil {
		u += d.reserve
	}
	return u, nil
}

// diskStore opens a store on a fake disk whose checks the test runs itself
// (checkDisk, retain): no loop ticks during the test.
func diskStore(t *testing.T, policy string, used float64) (*Store, *fakeDisk, *logCount) {
	t.Helper()
	c := testConf(t.TempDir())
	c.SegmentSize = 64 << 10
	c.ConsumeQueueEntries = 32
	c.FileReservedTime = time.Hour
	c.OnDiskPressure = policy
	c.DiskReserve = 1 << 20
	d := &fakeDisk{dir: c.Dir}
	d.set(used)
	o := testOpts()
	o.DiskUsage = d.usage
	o.DiskCheckInterval = time.Hour
	logs := &logCount{}
	o.Logger = slog.New(logs)
	s := mustOpen(t, c, o)
	t.Cleanup(func() { s.Close() })
	return s, d, logs
}

func reserveExists(t *testing.T, s *Store) bool {
	t.Helper()
	fi, err := os.Stat(s.reservePath())
	if err != nil {
		require.True(t, os.IsNotExist(err), err)
		return false
	}
	require.Equal(t, s.cfg.DiskReserve, fi.Size())
	return true
}

// fillSegments puts n messages of about 1 KiB into topic/0 and returns
// their commitlog positions.
func fillSegments(t *testing.T, s *Store, topic string, n int) []int64 {
	t.Helper()
	var pos []int64
	for i := range n {
		pos = append(pos, mustPut(t, s, msg(topic, 0, fmt.Sprintf("%d-%s", i, strings.Repeat("x", 1000)))).Pos)
	}
	require.NoError(t, s.log.Sync(t.Context()))
	waitDispatched(t, s)
	return pos
}

// TestDisk_RefusePolicy: with on_disk_pressure "refuse", use above the high
// watermark deletes nothing and warns once per crossing; above the full
// watermark puts are refused with a remark saying why and what to do and the
// reserve file goes; back under it, the reserve returns and puts are
// accepted again.
func TestDisk_RefusePolicy(t *testing.T) {
	s, d, logs := diskStore(t, conf.DiskPressureRefuse, 0.5)
	require.True(t, reserveExists(t, s), "Open makes the reserve")
	fillSegments(t, s, "t", 300) // five segments

	d.set(0.8)
	for range 3 {
		s.checkDisk()
	}
	require.Equal(t, 1, logs.count("above the high watermark"), "one WARN per crossing, not per check")
	require.True(t, s.DiskStatus().AboveHigh)
	res, err := s.retain(time.Now())
	require.NoError(t, err)
	require.Empty(t, res.Deleted, "refuse deletes nothing early")
	require.Zero(t, s.log.Min())

	d.set(0.95)
	s.checkDisk()
	r := s.Put(t.Context(), msg("t", 0, "refused"))
	require.Equal(t, PutServiceNotAvailable, r.Status)
	for _, want := range []string{"disk full", "95.0% used, above the 90.0% full watermark", "free space",
		"store.disk_full_watermark", "store.on_disk_pressure: delete_oldest", "accepted again by themselves"} {
		require.Contains(t, r.Remark, want)
	}
	require.False(t, reserveExists(t, s), "the reserve goes when the disk is full")
	st := s.DiskStatus()
	require.True(t, st.Refusing)
	require.Equal(t, r.Remark, st.Refusal)
	require.InDelta(t, 0.95, st.Used, 1e-9)

	// Back under the full watermark, but not with the reserve in place:
	// still refused, no reserve.
	d.reserve = 0.02
	d.set(0.89)
	s.checkDisk()
	require.Equal(t, PutServiceNotAvailable, s.Put(t.Context(), msg("t", 0, "still refused")).Status)
	require.False(t, reserveExists(t, s))

	d.set(0.5)
	s.checkDisk()
	require.True(t, reserveExists(t, s), "the reserve is made again")
	r = mustPut(t, s, msg("t", 0, "accepted again"))
	require.Equal(t, int64(300), r.QueueOffset, "the refused puts took no queue offset")
	require.False(t, s.DiskStatus().Refusing)
	require.Equal(t, 1, logs.count("disk use back under the high watermark"))
	require.Equal(t, 1, logs.count("sends are accepted again"))
}

// TestDisk_OpenWhileFull: a store opened on a disk above the full watermark
// deletes its reserve before recovery writes anything and refuses the
// first put.
func TestDisk_OpenWhileFull(t *testing.T) {
	s, d, _ := diskStore(t, conf.DiskPressureRefuse, 0.5)
	fillSegments(t, s, "t", 100)
	require.NoError(t, s.Close())
	require.True(t, reserveExists(t, s))

	d.set(0.97)
	o := s.opts
	s2 := mustOpen(t, s.cfg, o)
	defer s2.Close()
	require.False(t, reserveExists(t, s2))
	r := s2.Put(t.Context(), msg("t", 0, "refused"))
	require.Equal(t, PutServiceNotAvailable, r.Status)
	require.Contains(t, r.Remark, "97.0% used")
	require.Equal(t, int64(100), s2.MaxOffset("t", 0), "every message is there")
	require.NoError(t, s2.Close())

	// Under the full watermark without the reserve, above it with it: full.
	d.reserve = 0.02
	d.set(0.89)
	s3 := mustOpen(t, s.cfg, o)
	defer s3.Close()
	require.False(t, reserveExists(t, s3))
	r = s3.Put(t.Context(), msg("t", 0, "refused"))
	require.Equal(t, PutServiceNotAvailable, r.Status)
	require.Contains(t, r.Remark, "91.0% used")
}

// TestDisk_DeleteOldestReportsLosses: with on_disk_pressure "delete_oldest"
// retention deletes the oldest segments above the high watermark, and
// counts, per group and topic, the messages the groups had not consumed
// (the broker's callback says, through Unconsumed), in one ERROR line.
func TestDisk_DeleteOldestReportsLosses(t *testing.T) {
	s, d, logs := diskStore(t, conf.DiskPressureDeleteOldest, 0.5)
	var tPos, uPos []int64
	for range 3 { // interleaved, so both topics lose messages
		tPos = append(tPos, fillSegments(t, s, "t", 60)...)
		uPos = append(uPos, fillSegments(t, s, "u", 40)...)
	}
	committed := map[LossKey]int64{{"g1", "t"}: 10, {"g2", "t"}: int64(len(tPos)), {"g3", "u"}: 0}
	s.SetUnconsumedCounter(func(lo, hi int64) []Loss {
		var out []Loss
		for k, off := range committed {
			n, err := s.Unconsumed(k.Topic, 0, off, lo, hi)
			require.NoError(t, err)
			if n > 0 {
				out = append(out, Loss{LossKey: k, Messages: n})
			}
		}
		return out
	})
	d.set(0.8)
	res, err := s.retain(time.Now()) // NB: the fake stays above: all but the last segments go
	require.NoError(t, err)
	require.NotEmpty(t, res.Deleted)
	min := int64(s.log.Min())
	below := func(pos []int64, from int) int64 {
		n := int64(0)
		for _, p := range pos[from:] {
			if p < min {
				n++
			}
		}
		return n
	}
	want := map[LossKey]int64{{"g1", "t"}: below(tPos, 10), {"g3", "u"}: below(uPos, 0)}
	require.Positive(t, want[LossKey{"g1", "t"}])
	require.Positive(t, want[LossKey{"g3", "u"}])
	require.Equal(t, want, s.Losses())
	require.Equal(t, 1, logs.count("had not consumed"), "one ERROR line for the pass")
	require.Equal(t, s.MinOffset("t", 0), below(tPos, 0), "the queues were trimmed after the count")
}

// TestDisk_Unconsumed: the messages of a queue at or above a committed
// offset whose records lie in a commitlog range.
func TestDisk_Unconsumed(t *testing.T) {
	s, _, _ := diskStore(t, conf.DiskPressureRefuse, 0.5)
	pos := fillSegments(t, s, "t", 10)
	for _, tc := range []struct {
		from   int64
		lo, hi int64
		want   int64
	}{
		{0, 0, pos[5], 5},
		{3, 0, pos[5], 2},
		{7, 0, pos[5], 0},
		{0, pos[2], pos[5], 3},
		{4, pos[2], pos[5], 1},
		{0, pos[2] + 1, pos[9] + 1, 7},
		{0, 0, 1 << 40, 10},
	} {
		n, err := s.Unconsumed("t", 0, tc.from, tc.lo, tc.hi)
		require.NoError(t, err)
		require.Equal(t, tc.want, n, "from %d, range [%d, %d)", tc.from, tc.lo, tc.hi)
	}
	n, err := s.Unconsumed("none", 0, 0, 0, 1<<40)
	require.NoError(t, err)
	require.Zero(t, n)
}
