package store

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/stretchr/testify/require"
)

// crashFS is an opener that remembers, per file, what was fsynced, so that a
// test can take the image a power loss would leave: every write not yet
// fsynced dropped (or, in the torn variant, a random prefix of them kept,
// the last one possibly cut), and every file created since its directory
// was last fsynced gone (or, torn, gone at random). kill -9 keeps the page
// cache, so only this shows a missing fsync.
//
// Modelled: writes, truncations and preallocation of files opened through
// the seam; creations of files and fsyncs of directories through the seam.
// Not modelled: directories made with MkdirAll, removals and renames
// (outside the seam), and files written outside it (the statefile
// checkpoints and the commitlog's checkpoint, which fsync before their
// rename, are taken as they are). The commitlog fsyncs its directory outside
// the seam, so trusted names a directory whose creations count as durable.
type crashFS struct {
	root    string
	trusted string

	// ops holds every operation (shared) against the crash (exclusive), so
	// that the image is one instant.
	ops sync.RWMutex

	mu      sync.Mutex
	seq     int64
	files   map[string]*fileImage
	dirSync map[string]int64 // directory → seq of its last fsync
}

// fileImage is what one file holds on disk (durable) and in the page cache
// only (pending, in order).
type fileImage struct {
	durable []byte
	pending []fileOp
	created int64 // seq at creation through the seam; 0: existed before
}

type fileOp struct {
	off  int64
	data []byte // nil: resize to off (truncate, or grow with zeros)
	grow bool   // resize only if larger (preallocate)
}

func (op fileOp) apply(b []byte) []byte {
	if op.data == nil {
		switch {
		case int64(len(b)) < op.off:
			return append(b, make([]byte, op.off-int64(len(b)))...)
		case !op.grow:
			return b[:op.off]
		}
		return b
	}
	if end := op.off + int64(len(op.data)); int64(len(b)) < end {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	copy(b[op.off:], op.data)
	return b
}

func newCrashFS(root, trusted string) *crashFS {
	return &crashFS{root: root, trusted: trusted, files: map[string]*fileImage{}, dirSync: map[string]int64{}}
}

func (c *crashFS) open(path string, flag int, perm os.FileMode) (commitlog.File, error) {
	c.ops.RLock()
	defer c.ops.RUnlock()
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		f, err := commitlog.OSOpenFile(path, flag, perm)
		if err != nil {
			return nil, err
		}
		return &crashDir{File: f, c: c, path: path}, nil
	}
	old, statErr := os.ReadFile(path)
	f, err := commitlog.OSOpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	img := c.files[path]
	if img == nil || errors.Is(statErr, fs.ErrNotExist) {
		img = &fileImage{durable: old}
		if errors.Is(statErr, fs.ErrNotExist) {
			c.seq++
			img.durable, img.created = nil, c.seq
		}
		c.files[path] = img
	}
	if flag&os.O_TRUNC != 0 {
		img.pending = append(img.pending, fileOp{off: 0})
	}
	return &crashFile{File: f, c: c, img: img}, nil
}

type crashFile struct {
	commitlog.File
	c   *crashFS
	img *fileImage
}

func (f *crashFile) record(op fileOp) {
	f.c.mu.Lock()
	f.img.pending = append(f.img.pending, op)
	f.c.mu.Unlock()
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.c.ops.RLock()
	defer f.c.ops.RUnlock()
	n, err := f.File.WriteAt(p, off)
	if n > 0 {
		f.record(fileOp{off: off, data: append([]byte(nil), p[:n]...)})
	}
	return n, err
}

func (f *crashFile) Truncate(size int64) error {
	f.c.ops.RLock()
	defer f.c.ops.RUnlock()
	err := f.File.Truncate(size)
	if err == nil {
		f.record(fileOp{off: size})
	}
	return err
}

func (f *crashFile) Preallocate(size int64) error {
	f.c.ops.RLock()
	defer f.c.ops.RUnlock()
	err := f.File.Preallocate(size)
	if err == nil {
		f.record(fileOp{off: size, grow: true})
	}
	return err
}

func (f *crashFile) Sync() error {
	f.c.ops.RLock()
	defer f.c.ops.RUnlock()
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.c.mu.Lock()
	for _, op := range f.img.pending {
		f.img.durable = op.apply(f.img.durable)
	}
	f.img.pending = nil
	f.c.mu.Unlock()
	return nil
}

type crashDir struct {
	commitlog.File
	c    *crashFS
	path string
}

func (d *crashDir) Sync() error {
	d.c.ops.RLock()
	defer d.c.ops.RUnlock()
	if err := d.File.Sync(); err != nil {
		return err
	}
	d.c.mu.Lock()
	d.c.seq++
	d.c.dirSync[d.path] = d.c.seq
	d.c.mu.Unlock()
	return nil
}

// SyncFS makes everything durable (consumequeue's syncfs above 256 queues).
func (d *crashDir) SyncFS() error {
	d.c.ops.RLock()
	defer d.c.ops.RUnlock()
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	for path, img := range d.c.files {
		for _, op := range img.pending {
			img.durable = op.apply(img.durable)
		}
		img.pending = nil
		d.c.seq++
		d.c.dirSync[filepath.Dir(path)] = d.c.seq
	}
	return nil
}

// crash returns the image a power loss at this instant would leave, copied
// into a new directory; the store keeps running on the real one. torn keeps
// a random prefix of each file's unsynced writes (the last one possibly
// cut) and drops undurable creations at random, instead of dropping all.
func (c *crashFS) crash(t *testing.T, r *rand.Rand, torn bool) string {
	t.Helper()
	c.ops.Lock()
	defer c.ops.Unlock()
	img := t.TempDir()
	require.NoError(t, filepath.WalkDir(c.root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (outside the seam)
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.root, path)
		dst := filepath.Join(img, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		fi := c.files[path]
		c.mu.Unlock()
		if fi != nil {
			if b, err = c.image(path, fi, r, torn); err != nil || b == nil {
				return err
			}
		}
		return os.WriteFile(dst, b, 0o644)
	}))
	return img
}

// image is the content a file has after the power loss, nil if it is gone.
func (c *crashFS) image(path string, fi *fileImage, r *rand.Rand, torn bool) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := filepath.Dir(path)
	if fi.created > 0 && dir != c.trusted && c.dirSync[dir] < fi.created && (!torn || r.IntN(2) == 0) {
		return nil, nil
	}
	b := append([]byte{}, fi.durable...)
	if !torn {
		return b, nil
	}
	keep := r.IntN(len(fi.pending) + 1)
	for i, op := range fi.pending[:keep] {
		if i == keep-1 && op.data != nil && r.IntN(2) == 0 {
			op.data = op.data[:r.IntN(len(op.data)+1)] // torn write
		}
		b = op.apply(b)
	}
	return b, nil
}
