package statefile

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

type state struct {
	Pos    int64            `msgpack:"pos"`
	Tables map[string]int64 `msgpack:"tables"`
}

func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	var got state
	require.ErrorIs(t, Load(path, &got), fs.ErrNotExist)
	want := state{Pos: 42, Tables: map[string]int64{"a": 1}}
	require.NoError(t, Save(path, want))
	require.NoError(t, Load(path, &got))
	require.Equal(t, want, got)
	want.Pos = 43
	require.NoError(t, Save(path, want), "overwrite")
	require.NoError(t, Load(path, &got))
	require.Equal(t, int64(43), got.Pos)
	entries, _ := os.ReadDir(filepath.Dir(path))
	require.Len(t, entries, 1, "no temp file left behind")
}

func TestLoadCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	require.NoError(t, Save(path, state{Pos: 7}))
	b, _ := os.ReadFile(path)
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		require.NoError(t, os.WriteFile(path, c, 0o644))
		require.ErrorIs(t, Load(path, &state{}), ErrCorrupt, "flip at %d", i)
	}
	for n := range len(b) {
		require.NoError(t, os.WriteFile(path, b[:n], 0o644))
		require.ErrorIs(t, Load(path, &state{}), ErrCorrupt, "cut at %d", n)
	}
}
