package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Test records: the envelope, then the record's own offset, a CRC of the
// payload, and a payload derived from a seed:
//
//	TOTALSIZE int32 | RecordMagic int32 | at int64 | crc uint32 | payload
//
// testValidate checks the offset and the CRC, as internal/message does for
// real records (PHYSICALOFFSET, BODYCRC).
const testHeader = 20

func fillTest(seed uint64) func(at Offset, dst []byte) error {
	return func(at Offset, dst []byte) error {
		binary.BigEndian.PutUint32(dst[0:4], uint32(len(dst)))
		binary.BigEndian.PutUint32(dst[4:8], recordMagicBits)
		binary.BigEndian.PutUint64(dst[8:16], uint64(at))
		payload(dst[testHeader:], seed)
		binary.BigEndian.PutUint32(dst[16:20], crc32.ChecksumIEEE(dst[testHeader:]))
		return nil
	}
}

func payload(dst []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range dst {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst[i] = byte(x)
	}
}

var errTestInvalid = errors.New("test record invalid")

func testValidate(rec []byte, at Offset, _ bool) error {
	if len(rec) < testHeader {
		return fmt.Errorf("%w: %d bytes", errTestInvalid, len(rec))
	}
	if got := Offset(binary.BigEndian.Uint64(rec[8:16])); got != at {
		return fmt.Errorf("%w: offset %d, stored at %d", errTestInvalid, got, at)
	}
	if crc32.ChecksumIEEE(rec[testHeader:]) != binary.BigEndian.Uint32(rec[16:20]) {
		return fmt.Errorf("%w: crc mismatch", errTestInvalid)
	}
	return nil
}

// want describes one appended record.
type want struct {
	at   Offset
	size int
	seed uint64
}

func (w want) end() Offset { return w.at + Offset(w.size) }

func (w want) bytes() []byte {
	b := make([]byte, w.size)
	_ = fillTest(w.seed)(w.at, b)
	return b
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testOptions(segSize int64) Options {
	return Options{
		SegmentSize: segSize,
		MinRecord:   testHeader,
		Validate:    testValidate,
		Logger:      quietLogger(),
	}
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	require.NoError(t, err)
	return l
}

func appendOne(t testing.TB, l *Log, size int, seed uint64) want {
	t.Helper()
	at, err := l.Append(size, fillTest(seed))
	require.NoError(t, err)
	return want{at: at, size: size, seed: seed}
}

// appendSizes appends one record per size, seeds counting from seed0.
func appendSizes(t testing.TB, l *Log, sizes []int, seed0 uint64) []want {
	t.Helper()
	var ws []want
	for i, sz := range sizes {
		ws = append(ws, appendOne(t, l, sz, seed0+uint64(i)))
	}
	return ws
}

func randomSizes(r *rand.Rand, n, lo, hi int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = lo + r.IntN(hi-lo+1)
	}
	return s
}

// scanAll returns every record from Min() to the end, failing on errors.
func scanAll(t testing.TB, l *Log) []want {
	t.Helper()
	var got []want
	s := l.NewScanner(l.Min(), false)
	for s.Scan() {
		at, rec := s.Record()
		got = append(got, want{at: at, size: len(rec)})
	}
	require.NoError(t, s.Err())
	return got
}

// requireRecords checks that the log holds exactly ws, by scanning and by
// ReadAt, bytes included.
func requireRecords(t testing.TB, l *Log, ws []want) {
	t.Helper()
	got := scanAll(t, l)
	require.Len(t, got, len(ws))
	for i, w := range ws {
		require.Equal(t, w.at, got[i].at, "record %d offset", i)
		require.Equal(t, w.size, got[i].size, "record %d size", i)
		buf := make([]byte, w.size)
		n, err := l.ReadAt(buf, w.at)
		require.NoError(t, err)
		require.Equal(t, w.size, n)
		require.True(t, bytes.Equal(w.bytes(), buf), "record %d bytes", i)
	}
}

// copyDir copies the regular files of src into a new temp dir: a snapshot of
// a log that was not closed, as a crash leaves it.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

func segmentPath(dir string, base Offset) string { return filepath.Join(dir, segmentName(base)) }

// faultFS injects errors into segment files opened through it.
type faultFS struct {
	mu          sync.Mutex
	writes      int   // WriteAt calls so far
	syncs       int   // Sync calls so far
	failWriteAt int   // fail the n-th WriteAt (1-based); 0 never
	failSyncAt  int   // fail the n-th Sync; 0 never
	writeErr    error // error for failing writes
	syncErr     error
	preallocErr error // returned by every Preallocate while set
	partial     bool  // failing writes write half their bytes first
}

func (fs *faultFS) open(path string, flag int, perm os.FileMode) (File, error) {
	f, err := OSOpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs}, nil
}

func (fs *faultFS) set(fn func(fs *faultFS)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fn(fs)
}

func (fs *faultFS) syncCount() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.syncs
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.fs.writes++
	fail := f.fs.failWriteAt != 0 && f.fs.writes == f.fs.failWriteAt
	err, partial := f.fs.writeErr, f.fs.partial
	f.fs.mu.Unlock()
	if fail {
		if partial {
			n, _ := f.File.WriteAt(p[:len(p)/2], off)
			return n, err
		}
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.syncs++
	fail := f.fs.failSyncAt != 0 && f.fs.syncs == f.fs.failSyncAt
	err := f.fs.syncErr
	f.fs.mu.Unlock()
	if fail {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Preallocate(size int64) error {
	f.fs.mu.Lock()
	err := f.fs.preallocErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Preallocate(size)
}

var errENOSPC = &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
