package topic

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"orders", "%RETRY%cg", "a|b", "A_b-9", strings.Repeat("x", 127)} {
		require.NoError(t, ValidateName(ok), ok)
	}
	for _, bad := range []string{"", "a b", "a/b", "ü", strings.Repeat("x", 128), "a.b"} {
		require.ErrorIs(t, ValidateName(bad), ErrInvalidName, bad)
	}
}

func TestTable_PersistAndVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics")
	tb, err := Open(path)
	require.NoError(t, err)
	v0 := tb.Version()
	changed, err := tb.Put(Config{TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	require.NoError(t, err)
	require.True(t, changed)
	require.Greater(t, tb.Version().Counter, v0.Counter)
	changed, err = tb.Put(Config{TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	require.NoError(t, err)
	require.False(t, changed, "same config: no new version")
	c, created, err := tb.PutIfAbsent(Config{TopicName: "orders", ReadQueueNums: 1})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, int32(4), c.ReadQueueNums)
	_, err = tb.Put(Config{TopicName: "bad name"})
	require.ErrorIs(t, err, ErrInvalidName)

	tb2, err := Open(path)
	require.NoError(t, err)
	c, ok := tb2.Get("orders")
	require.True(t, ok)
	require.Equal(t, "SINGLE_TAG", c.TopicFilterType)
	require.Equal(t, tb.Version(), tb2.Version())
	deleted, err := tb2.Delete("orders")
	require.NoError(t, err)
	require.True(t, deleted)
	all, _ := tb2.All()
	require.Empty(t, all)
}
