package offset

import (
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestTable_CommitQueryPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	tb, err := Open(path, nil)
	require.NoError(t, err)
	_, ok := tb.Query("g", "t", 0)
	require.False(t, ok)
	tb.Commit("g", "t", 0, 0)
	tb.Commit("g", "t", 1, 42)
	tb.Commit("g2", "t", 1, 7)
	off, ok := tb.Query("g", "t", 0)
	require.True(t, ok, "an offset committed as 0 is stored")
	require.Equal(t, int64(0), off)
	require.NoError(t, tb.Close())
	require.NoError(t, tb.Close())

	tb, err = Open(path, nil)
	require.NoError(t, err)
	defer tb.Close()
	off, ok = tb.Query("g", "t", 1)
	require.True(t, ok)
	require.Equal(t, int64(42), off)
	require.Equal(t, map[int32]int64{1: 7}, tb.Queues("g2", "t"))
	require.Equal(t, []Key{{"t", "g"}, {"t", "g2"}}, tb.Keys())
	tb.DeleteGroup("g2")
	require.Len(t, tb.Keys(), 1)
}
