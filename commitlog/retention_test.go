package commitlog

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fiveSegments returns a log with records in five 4 KiB segments.
func fiveSegments(t *testing.T, opts Options) (*Log, []want) {
	t.Helper()
	opts.SegmentSize = 4096
	l := mustOpen(t, t.TempDir(), opts)
	ws := appendSizes(t, l, []int{3000, 3000, 3000, 3000, 3000}, 0)
	require.Equal(t, Offset(4*4096), ws[4].at)
	require.NoError(t, l.Sync(t.Context()))
	return l, ws
}

func setAge(t *testing.T, l *Log, base Offset, age time.Duration) {
	t.Helper()
	old := time.Now().Add(-age)
	require.NoError(t, os.Chtimes(segmentPath(l.Dir(), base), old, old))
}

func TestRetention_ByAge(t *testing.T) {
	opts := testOptions(4096)
	opts.Retention = RetentionOptions{MaxAge: time.Hour}
	l, ws := fiveSegments(t, opts)
	defer l.Close()
	setAge(t, l, 0, 2*time.Hour)
	setAge(t, l, 4096, 2*time.Hour)
	setAge(t, l, 8192, 30*time.Minute) // young: stops the pass
	setAge(t, l, 12288, 2*time.Hour)
	res, err := l.Retain(time.Now(), l.Next())
	require.NoError(t, err)
	require.Equal(t, []string{segmentName(0), segmentName(4096)}, res.Deleted)
	require.Equal(t, Offset(8192), l.Min())
	require.Equal(t, Offset(-1), res.PressureFrom, "expired, not pressed")
	_, err = os.Stat(segmentPath(l.Dir(), 0))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = l.ReadAt(make([]byte, 10), 100)
	require.ErrorIs(t, err, ErrOffsetRemoved)
	requireRecords(t, l, ws[2:])
}

func TestRetention_NeverDeletesLastOrUndurable(t *testing.T) {
	opts := testOptions(4096)
	opts.Retention = RetentionOptions{MaxAge: time.Hour}
	l, _ := fiveSegments(t, opts)
	defer l.Close()
	for _, b := range []Offset{0, 4096, 8192, 12288, 16384} {
		setAge(t, l, b, 2*time.Hour)
	}
	res, err := l.Retain(time.Now(), 4096)
	require.NoError(t, err)
	require.Equal(t, []string{segmentName(0)}, res.Deleted, "kept from 4096")
	res, err = l.Retain(time.Now(), 1<<40)
	require.NoError(t, err)
	require.Len(t, res.Deleted, 3, "the last segment stays")
	require.Equal(t, Offset(16384), l.Min())
}

func TestRetention_HighWatermarkDeletesEarly(t *testing.T) {
	opts := testOptions(4096)
	var dir atomic.Value
	opts.Retention = RetentionOptions{
		MaxAge:        72 * time.Hour,
		HighWatermark: 0.75,
		// Each segment file takes 3% of the disk: 5 files = 81%.
		DiskUsage: func(string) (float64, error) {
			d, _ := dir.Load().(string)
			if d == "" {
				return 0, nil
			}
			n := 0
			entries, err := os.ReadDir(d)
			for _, e := range entries {
				if _, ok := parseSegmentName(e.Name()); ok {
					n++
				}
			}
			return 0.66 + 0.03*float64(n), err
		},
	}
	l, ws := fiveSegments(t, opts)
	defer l.Close()
	dir.Store(l.Dir())
	res, err := l.Retain(time.Now(), l.Next())
	require.NoError(t, err)
	require.Equal(t, []string{segmentName(0), segmentName(4096)}, res.Deleted,
		"young segments go, oldest first, until use is back under the high watermark")
	require.InDelta(t, 0.75, res.DiskUsage, 1e-9)
	require.Equal(t, Offset(0), res.PressureFrom)
	requireRecords(t, l, ws[2:])
}
