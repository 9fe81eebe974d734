package keyindex

import (
	"fmt"
	"os"
)

// File is the index's seam to the file system: every index file is opened
// through Options.OpenFile, and the directory is fsynced through it too
// (opened read-only, then Sync), so that tests can fail writes and fsyncs
// (ENOSPC, EIO, short writes) and simulate a power loss. It is the same
// small interface as consumequeue.File (and commitlog.File without
// Preallocate), so one opener serves all three. *os.File implements it.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
	Name() string
	Stat() (os.FileInfo, error)
}

// OpenFileFunc opens or creates a file, or opens a directory to fsync it.
type OpenFileFunc func(path string, flag int, perm os.FileMode) (File, error)

// OSOpenFile is the default OpenFileFunc: os.OpenFile.
func OSOpenFile(path string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err // NB: not a typed nil in the interface
	}
	return f, nil
}

// syncDir fsyncs a directory so that file creations and removals in it are
// durable.
func syncDir(open OpenFileFunc, dir string) error {
	d, err := open(dir, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("keyindex: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("keyindex: fsync %s: %w", dir, err)
	}
	return nil
}
