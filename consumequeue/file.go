package consumequeue

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// File is the store's seam to the file system: every queue file is opened
// through Options.OpenFile, and directories are fsynced through it too
// (opened read-only, then Sync), so that tests can fail writes and fsyncs
// (ENOSPC, EIO, short writes) and simulate a power loss (drop what was not
// fsynced). It is the same small interface as commitlog.File without
// Preallocate, so one opener serves the commitlog, the consume queues and
// the key index. *os.File implements it.
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

// FSSyncer is implemented by a File of a directory that can make the whole
// file system durable at once (syncfs(2)); Store.Sync uses it above
// syncFSQueues queues.
type FSSyncer interface{ SyncFS() error }

// syncDir fsyncs a directory so that file creations and removals in it are
// durable.
func syncDir(open OpenFileFunc, dir string) error {
	d, err := open(dir, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("consumequeue: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("consumequeue: fsync %s: %w", dir, err)
	}
	return nil
}

// syncFS makes every file of the file system holding dir durable, directory
// entries included: syncfs(2) on an *os.File, SyncFS on an FSSyncer.
func syncFS(open OpenFileFunc, dir string) error {
	d, err := open(dir, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("consumequeue: syncfs: %w", err)
	}
	defer d.Close()
	switch f := d.(type) {
	case FSSyncer:
		err = f.SyncFS()
	case interface{ Fd() uintptr }:
		err = unix.Syncfs(int(f.Fd()))
	default:
		err = fmt.Errorf("%T has no syncfs", d)
	}
	if err != nil {
		return fmt.Errorf("consumequeue: syncfs %s: %w", dir, err)
	}
	return nil
}
