package ha

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEpochFile_AppendReopenTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "epoch")
	f, err := OpenEpochFile(path)
	require.NoError(t, err)
	require.Equal(t, EpochEntry{}, f.Last())
	require.NoError(t, f.Append(1, 0))
	require.NoError(t, f.Append(2, 500))
	require.NoError(t, f.Append(2, 500), "the same epoch again is a no-op")
	require.Error(t, f.Append(2, 900), "an epoch is not restarted")
	require.Error(t, f.Append(1, 900), "a stale epoch is refused")
	require.Error(t, f.Append(3, 100), "an epoch does not start before the last")
	require.NoError(t, f.Append(4, 900))
	g, err := OpenEpochFile(path)
	require.NoError(t, err)
	require.Equal(t, []EpochEntry{{1, 0}, {2, 500}, {4, 900}}, g.Entries())
	require.NoError(t, g.TruncateAfter(700))
	require.Equal(t, []EpochEntry{{1, 0}, {2, 500}}, g.Entries())
	h, err := OpenEpochFile(path)
	require.NoError(t, err)
	require.Equal(t, EpochEntry{2, 500}, h.Last())
}

func TestConsistentPoint(t *testing.T) {
	for _, tc := range []struct {
		name            string
		local           []EpochEntry
		localEnd        int64
		master          []EpochEntry
		masterEnd, want int64
	}{
		{"same history, replica behind", []EpochEntry{{1, 0}}, 300, []EpochEntry{{1, 0}}, 900, 300},
		{"same history, replica ahead (old master's unacked tail)", []EpochEntry{{1, 0}}, 900, []EpochEntry{{1, 0}, {2, 600}}, 1000, 600},
		{"replica was master of a later, lost epoch", []EpochEntry{{1, 0}, {2, 600}}, 800, []EpochEntry{{1, 0}, {3, 650}}, 1000, 600},
		{"replica's epoch 2 ends before the master's", []EpochEntry{{1, 0}, {2, 600}}, 700, []EpochEntry{{1, 0}, {2, 600}, {3, 900}}, 1200, 700},
		{"nothing shared", []EpochEntry{{5, 0}}, 100, []EpochEntry{{6, 0}}, 200, 0},
		{"an epoch number with two starts", []EpochEntry{{1, 0}, {2, 100}}, 400, []EpochEntry{{1, 0}, {2, 300}}, 500, 100},
		{"empty replica", nil, 0, []EpochEntry{{1, 0}}, 500, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ConsistentPoint(tc.local, tc.localEnd, tc.master, tc.masterEnd))
		})
	}
}
