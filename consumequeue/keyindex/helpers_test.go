package keyindex

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

const t0 = int64(1_700_000_000_000) // a store timestamp in ms

func openIdx(t testing.TB, dir string, slots, entries int32) *Index {
	t.Helper()
	x, err := Open(dir, Options{SlotsPerFile: slots, EntriesPerFile: entries})
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// put records one Put in a model: key → positions, oldest first.
type model map[string][]int64

func (m model) put(t testing.TB, x *Index, key string, pos, ts int64) {
	t.Helper()
	require.NoError(t, x.Put(key, pos, ts))
	m[key] = append(m[key], pos)
}

// want returns the model's positions for key, newest first, at most max.
func (m model) want(key string, max int) []int64 {
	ps := slices.Clone(m[key])
	slices.Reverse(ps)
	ps = slices.Compact(ps)
	if len(ps) > max {
		ps = ps[:max]
	}
	return ps
}

// below keeps only positions < pos.
func (m model) below(pos int64) model {
	out := model{}
	for k, ps := range m {
		for _, p := range ps {
			if p < pos {
				out[k] = append(out[k], p)
			}
		}
	}
	return out
}

func queryAll(t testing.TB, x *Index, key string) []int64 {
	t.Helper()
	got, err := x.Query(key, 0, 1<<62, 1000)
	require.NoError(t, err)
	return got
}

// fillKeys puts n records, each with key "K<i%keys>" at position i*100 and
// time t0 + i*1000 ms, and returns the model.
func fillKeys(t testing.TB, x *Index, n, keys int) model {
	t.Helper()
	m := model{}
	for i := range n {
		m.put(t, x, Key("T", fmt.Sprintf("K%d", i%keys)), int64(i)*100, t0+int64(i)*1000)
	}
	return m
}

func requireModel(t testing.TB, x *Index, m model, keys int) {
	t.Helper()
	for k := range keys {
		key := Key("T", fmt.Sprintf("K%d", k))
		require.Equal(t, m.want(key, 1000), queryAll(t, x, key), key)
	}
}

func indexFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o755))
	for _, name := range indexFiles(t, from) {
		b, err := os.ReadFile(filepath.Join(from, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, name), b, 0o644))
	}
}

func fileLen(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}
