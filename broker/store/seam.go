package store

import (
	"os"
	"syscall"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/fsync"
)

// shareOpenFile gives the consume queues and the key index the commitlog's
// opener (Options.OpenFile), unless a test set theirs: every file of the
// store goes through one seam. Without one (production), each package's
// files are opened as by its own OSOpenFile, with their fsyncs made through
// internal/fsync: they wait in the netpoller, holding no scheduler slot.
//
// In sync flush mode the segments keep the plain fdatasync: every answer
// waits for it, and under load AIO's kernel worker, eventfd and netpoller
// took longer to report it (128 senders with a connection each: the
// flusher's fsync 0.78-0.89 ms against 0.25-0.48 ms, the send 1.37-1.50 ms
// against 1.11-1.35 ms on average, 4 pairs; the same throughput).
func (o *Options) shareOpenFile(syncFlush bool) {
	if o.OpenFile == nil {
		o.OpenFile = openLogFile
		if syncFlush {
			o.OpenFile = commitlog.OSOpenFile
		}
		if o.ConsumeQueue.OpenFile == nil {
			o.ConsumeQueue.OpenFile = openIndexFile[consumequeue.File]
		}
		if o.KeyIndex.OpenFile == nil {
			o.KeyIndex.OpenFile = openIndexFile[keyindex.File]
		}
		return
	}
	if o.ConsumeQueue.OpenFile == nil {
		o.ConsumeQueue.OpenFile = narrowOpen[consumequeue.File](o.OpenFile)
	}
	if o.KeyIndex.OpenFile == nil {
		o.KeyIndex.OpenFile = narrowOpen[keyindex.File](o.OpenFile)
	}
}

// narrowOpen turns a commitlog opener into one returning F, an interface
// with a subset of commitlog.File's methods (the type assertion cannot fail).
func narrowOpen[F any](open commitlog.OpenFileFunc) func(string, int, os.FileMode) (F, error) {
	return func(path string, flag int, perm os.FileMode) (F, error) {
		f, err := open(path, flag, perm)
		if err != nil {
			var none F
			return none, err
		}
		return any(f).(F), nil
	}
}

// openLogFile is commitlog.OSOpenFile with fdatasync through internal/fsync.
func openLogFile(path string, flag int, perm os.FileMode) (commitlog.File, error) {
	f, err := commitlog.OSOpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	c, ok := f.(fsync.File)
	if !ok {
		return f, nil // NB: OSOpenFile's files are *os.File underneath
	}
	return logFile{File: f, c: c}, nil
}

type logFile struct {
	commitlog.File
	c fsync.File
}

func (f logFile) Sync() error { return fsync.Datasync(f.c) }

// SyscallConn lets the commitlog read the file from the page cache only and
// advise the kernel of reads ahead (commitlog.Options.ReadAhead).
func (f logFile) SyscallConn() (syscall.RawConn, error) { return f.c.SyscallConn() }

// openIndexFile is consumequeue's and keyindex's OSOpenFile (os.OpenFile)
// with fsync through internal/fsync. F is consumequeue.File or keyindex.File,
// which indexFile implements (the type assertion cannot fail).
func openIndexFile[F any](path string, flag int, perm os.FileMode) (F, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		var none F
		return none, err
	}
	return any(indexFile{f}).(F), nil
}

// indexFile keeps *os.File's methods (Fd for syncfs) and fsyncs through
// internal/fsync.
type indexFile struct{ *os.File }

func (f indexFile) Sync() error { return fsync.Sync(f.File) }

// syncFile is the commitlog's SyncFile (its checkpoint and directory).
func syncFile(f *os.File) error { return fsync.Sync(f) }
