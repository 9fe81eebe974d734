package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The checkpoint file records how far the log is known to be durable, so that
// recovery scans only what it does not cover. Layout (big-endian, 36 bytes):
//
//	magic "SLCK" | version uint32 (1) | next int64 | tail int64 | savedAt int64 (unix ms) | crc32 IEEE of the preceding 32 bytes
//
// next is an fsynced end of the log; tail is the offset of the record (or
// blank) that ends at next, or -1 if none, so that recovery can check that the
// data the checkpoint vouches for is really there.
const (
	checkpointName    = "checkpoint"
	abortName         = "abort"
	checkpointVersion = 1
	checkpointSize    = 36
)

var checkpointMagic = [4]byte{'S', 'L', 'C', 'K'}

type checkpoint struct {
	Next    Offset
	Tail    Offset
	SavedAt time.Time
}

func encodeCheckpoint(c checkpoint) []byte {
	b := make([]byte, checkpointSize)
	copy(b[0:4], checkpointMagic[:])
	binary.BigEndian.PutUint32(b[4:8], checkpointVersion)
	binary.BigEndian.PutUint64(b[8:16], uint64(c.Next))
	binary.BigEndian.PutUint64(b[16:24], uint64(c.Tail))
	binary.BigEndian.PutUint64(b[24:32], uint64(c.SavedAt.UnixMilli()))
	binary.BigEndian.PutUint32(b[32:36], crc32.ChecksumIEEE(b[:32]))
	return b
}

var errBadCheckpoint = errors.New("commitlog: bad checkpoint")

func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) != checkpointSize {
		return checkpoint{}, fmt.Errorf("%w: %d bytes, want %d", errBadCheckpoint, len(b), checkpointSize)
	}
	if [4]byte(b[0:4]) != checkpointMagic || binary.BigEndian.Uint32(b[4:8]) != checkpointVersion {
		return checkpoint{}, fmt.Errorf("%w: unknown magic or version", errBadCheckpoint)
	}
	if crc32.ChecksumIEEE(b[:32]) != binary.BigEndian.Uint32(b[32:36]) {
		return checkpoint{}, fmt.Errorf("%w: checksum mismatch", errBadCheckpoint)
	}
	c := checkpoint{
		Next:    Offset(binary.BigEndian.Uint64(b[8:16])),
		Tail:    Offset(binary.BigEndian.Uint64(b[16:24])),
		SavedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(b[24:32]))),
	}
	if c.Next < 0 || c.Tail < -1 || c.Tail >= c.Next {
		return checkpoint{}, fmt.Errorf("%w: offsets next=%d tail=%d", errBadCheckpoint, c.Next, c.Tail)
	}
	return c, nil
}

// readCheckpoint returns the saved checkpoint; ok is false when there is none.
func readCheckpoint(dir string) (c checkpoint, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, err
	}
	c, err = decodeCheckpoint(b)
	return c, err == nil, err
}

// writeFileAtomic replaces name in the log's directory with data: temp file,
// fsync, rename, fsync of the directory (each fsync by Options.SyncFile).
func (l *Log) writeFileAtomic(name string, data []byte) error {
	tmp := filepath.Join(l.dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = l.opts.SyncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(l.dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return l.syncDir()
}

// saveCheckpoint records the last fsynced end of the log.
// REQUIRES: called by the flusher, or by Close after the flusher stopped.
func (l *Log) saveCheckpoint() error {
	l.tailMu.Lock()
	c := checkpoint{Next: l.cpNext, Tail: l.cpTail, SavedAt: time.Now()}
	l.tailMu.Unlock()
	if err := l.writeFileAtomic(checkpointName, encodeCheckpoint(c)); err != nil {
		return fmt.Errorf("commitlog: save checkpoint: %w", err)
	}
	return nil
}

func (l *Log) createAbort() error {
	f, err := os.OpenFile(filepath.Join(l.dir, abortName), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: create abort file: %w", err)
	}
	f.Close()
	return l.syncDir()
}

func (l *Log) removeAbort() error {
	if err := os.Remove(filepath.Join(l.dir, abortName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("commitlog: remove abort file: %w", err)
	}
	return l.syncDir()
}
