package keyindex

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// flakyDisk fails the next `fail` WriteAt calls of the files it opens with
// ENOSPC, after writing half of the bytes.
type flakyDisk struct {
	mu   sync.Mutex
	fail int
}

func (d *flakyDisk) open(path string, flag int, perm os.FileMode) (File, error) {
	f, err := OSOpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return flakyFile{f, d}, nil
}

type flakyFile struct {
	File
	d *flakyDisk
}

func (f flakyFile) WriteAt(p []byte, off int64) (int, error) {
	f.d.mu.Lock()
	fail := f.d.fail > 0
	if fail {
		f.d.fail--
	}
	f.d.mu.Unlock()
	if fail {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

// TestIndex_WriteErrorRetried: failed writes (of entries, headers of new
// files and seals) are not sticky: the caller puts the same record again
// and, once writes succeed, every key is found, before and after a reopen.
func TestIndex_WriteErrorRetried(t *testing.T) {
	for _, every := range []int{1, 2, 5} {
		t.Run(fmt.Sprint("every ", every), func(t *testing.T) {
			dir := t.TempDir()
			d := &flakyDisk{}
			x, err := Open(dir, Options{SlotsPerFile: 7, EntriesPerFile: 6, OpenFile: d.open})
			require.NoError(t, err)
			m := model{}
			failed := 0
			for i := range 300 {
				key, pos := Key("T", fmt.Sprintf("K%d", i%13)), int64(i)*100
				if i%every == 0 {
					d.mu.Lock()
					d.fail = 1 + i%3
					d.mu.Unlock()
				}
				for try := 0; ; try++ {
					err := x.Put(key, pos, t0+int64(i)*1000)
					if err == nil {
						break
					}
					require.ErrorIs(t, err, syscall.ENOSPC)
					require.Less(t, try, 10, "a write error is not sticky")
					failed++
				}
				m[key] = append(m[key], pos)
			}
			require.Positive(t, failed)
			requireModel(t, x, m, 13)
			d.mu.Lock()
			d.fail = 0 // the disk has room again
			d.mu.Unlock()
			require.NoError(t, x.Close())

			x = openIdx(t, dir, 7, 6)
			requireModel(t, x, m, 13)
		})
	}
}
