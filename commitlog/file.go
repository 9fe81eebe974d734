package commitlog

import (
	"errors"
	"os"
	"syscall"
)

// File is the log's seam to the file system: the operations a segment needs.
// The default is backed by *os.File; tests inject faults (write and fsync
// errors, ENOSPC) through Options.OpenFile. consumequeue.File and
// keyindex.File are this interface without Preallocate, so one opener
// serves all three.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	// Sync makes the file's data durable (fdatasync).
	Sync() error
	Truncate(size int64) error
	// Preallocate reserves size bytes of disk for the file, which then reads
	// as zeros up to size. It returns errors.ErrUnsupported when the file
	// system cannot do it.
	Preallocate(size int64) error
	Close() error
	Name() string
	Stat() (os.FileInfo, error)
}

// OpenFileFunc opens or creates a segment file.
type OpenFileFunc func(path string, flag int, perm os.FileMode) (File, error)

// OSOpenFile is the default OpenFileFunc.
func OSOpenFile(path string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

type osFile struct{ *os.File }

func (f osFile) Sync() error {
	// NB: fdatasync skips the inode timestamps that fsync also writes; the
	// file size is still made durable when it changed, so it is enough for
	// both preallocated and growing segments.
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

func (f osFile) Preallocate(size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		switch {
		case err == nil:
			return nil
		case err == syscall.EINTR:
			continue
		case err == syscall.EOPNOTSUPP || err == syscall.ENOSYS:
			return errors.ErrUnsupported
		default:
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
	}
}

// syncDir fsyncs the log's directory (by Options.SyncFile), so that file
// creations, renames and removals in it are durable.
func (l *Log) syncDir() error {
	d, err := os.Open(l.dir)
	if err != nil {
		return err
	}
	err = l.opts.SyncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
