package store

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// TestStore_OneOpenerForEveryFile: Options.OpenFile sees the files (and the
// directory fsyncs) of the commitlog, the consume queues and the key index.
func TestStore_OneOpenerForEveryFile(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	seen := map[string]bool{}
	o := testOpts()
	o.OpenFile = func(path string, flag int, perm os.FileMode) (commitlog.File, error) {
		rel, _ := filepath.Rel(dir, path)
		mu.Lock()
		seen[strings.SplitN(rel, string(filepath.Separator), 2)[0]] = true
		mu.Unlock()
		return commitlog.OSOpenFile(path, flag, perm)
	}
	s := mustOpen(t, testConf(dir), o)
	mustPut(t, s, msg("t", 0, "a", message.PropKeys, "k"))
	waitDispatched(t, s)
	require.NoError(t, s.Close())
	mu.Lock()
	defer mu.Unlock()
	for _, sub := range []string{"commitlog", "consumequeue", "index"} {
		require.True(t, seen[sub], "a file under %s/ went through the opener (saw %v)", sub, seen)
	}
}
