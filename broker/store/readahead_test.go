package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenLogFile_Descriptor: the store's segment files (async flush) show
// the commitlog their descriptor, through which it reads from the page
// cache only and advises reads ahead (store.read_ahead); without it the
// read-ahead is silently off.
func TestOpenLogFile_Descriptor(t *testing.T) {
	f, err := openLogFile(filepath.Join(t.TempDir(), "00000000000000000000"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	sc, ok := f.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	require.True(t, ok, "the segment file hides its descriptor")
	rc, err := sc.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, rc.Control(func(fd uintptr) { require.Positive(t, int(fd)) }))
}
