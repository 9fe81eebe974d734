package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

// TestSave_DiskFullKeepsOldFile: a Save that meets ENOSPC on a real full
// file system fails, leaves the previous file intact and no temp file
// behind; once space is back, Save works again.
func TestSave_DiskFullKeepsOldFile(t *testing.T) {
	mnt := testutil.LoopFS(t, 8<<20)
	path := filepath.Join(mnt, "state")
	old := state{Pos: 1, Tables: map[string]int64{"a": 1}}
	require.NoError(t, Save(path, old))
	filler := filepath.Join(mnt, "filler")
	testutil.FillTo(t, filler, 0)

	big := state{Pos: 2, Tables: map[string]int64{}}
	for i := range 2000 { // ~20 KiB: more than a block
		big.Tables[strings.Repeat("k", 8)+string(rune('a'+i%26))+string(rune(i))] = int64(i)
	}
	err := Save(path, big)
	require.ErrorIs(t, err, syscall.ENOSPC)
	var got state
	require.NoError(t, Load(path, &got), "the old file is intact")
	require.Equal(t, old, got)
	entries, err := os.ReadDir(mnt)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.Contains(e.Name(), ".tmp"), "temp file %s left behind", e.Name())
	}

	require.NoError(t, os.Remove(filler))
	require.NoError(t, Save(path, big))
	require.NoError(t, Load(path, &got))
	require.Equal(t, big.Pos, got.Pos)
}
