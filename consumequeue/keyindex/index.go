package keyindex

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// Defaults: a smaller geometry than RocketMQ's 5,000,000 slots and
// 20,000,000 entries, so a file is about 42 MB and the active slot table
// 2 MB.
const (
	DefaultSlotsPerFile   = 500_000
	DefaultEntriesPerFile = 2_000_000

	// writeBufEntries is the active file's write buffer (5 KiB).
	writeBufEntries = 256
)

// Options configures an Index. The zero value gives the defaults.
type Options struct {
	// SlotsPerFile is the hash slot count of new files; 0 means
	// DefaultSlotsPerFile. Existing files keep their own.
	SlotsPerFile int32
	// EntriesPerFile is RocketMQ's maxIndexNum: a file rolls when its
	// indexCount (which starts at 1) reaches it, so it holds
	// EntriesPerFile-1 entries. Values below 2 mean DefaultEntriesPerFile.
	EntriesPerFile int32
	// Logger receives recovery repairs; nil discards them.
	Logger *slog.Logger
	// OpenFile opens every index file, and the directory to fsync it; nil
	// means OSOpenFile. Tests inject faults and power loss through it.
	OpenFile OpenFileFunc
}

func (o Options) withDefaults() Options {
	if o.SlotsPerFile <= 0 || o.SlotsPerFile > maxSlots {
		o.SlotsPerFile = DefaultSlotsPerFile
	}
	if o.EntriesPerFile < 2 {
		o.EntriesPerFile = DefaultEntriesPerFile
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OpenFile == nil {
		o.OpenFile = OSOpenFile
	}
	return o
}

// Index maps keys to commitlog positions (RocketMQ IndexFile). See the
// package documentation for the format, recovery and concurrency contract.
type Index struct {
	dir    string
	opts   Options
	maxPos atomic.Int64 // highest position indexed, -1 if none

	mu sync.Mutex
	// Guarded by mu.
	files   []*indexFile // ascending seq; the last one may be active
	active  *indexFile   // nil until the next Put creates a file
	nextSeq int64
	spare   []int32 // slot table of the last sealed file, reused
	werr    error   // sticky fsync error
	closed  bool

	syncFile func(File) error // File.Sync; tests slow it down

	// fsyncMu serializes the fsyncs of the active file: Sync's, which runs
	// without mu, and the others, which hold mu (mu comes first). They
	// share a descriptor, and Linux reports a writeback error to the first
	// fsync that looks only; lostSync (guarded by fsyncMu) carries the one
	// Sync saw, so that no file is sealed or closed as if it were durable.
	fsyncMu  sync.Mutex
	lostSync error
}

// Open opens or creates the index in dir and recovers it.
func Open(dir string, opts Options) (*Index, error) {
	x := &Index{dir: dir, opts: opts.withDefaults(), syncFile: File.Sync}
	x.maxPos.Store(-1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("keyindex: %w", err)
	}
	if err := x.load(); err != nil {
		x.closeFiles()
		return nil, err
	}
	return x, nil
}

// Put indexes key (built by Key) for the record at pos stored at
// storeTimestamp (ms). Keys of one record must be put together, and records
// in commitlog order: a pos below MaxPos() is taken as already indexed (a
// re-dispatch after restart) and ignored. REQUIRES: one caller at a time
// (the dispatcher); Query may run concurrently.
func (x *Index) Put(key string, pos, storeTimestamp int64) error {
	return x.PutHash(keyHash(key), pos, storeTimestamp)
}

// PutHash is Put of the key whose KeyHash is h.
func (x *Index) PutHash(h int32, pos, storeTimestamp int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if x.werr != nil {
		return x.werr
	}
	if pos < 0 {
		return fmt.Errorf("%w: %d", ErrInvalidPos, pos)
	}
	if pos < x.maxPos.Load() {
		return nil
	}
	a := x.active
	if a != nil && a.count >= x.opts.EntriesPerFile { // a seal that failed to write
		if err := x.seal(a); err != nil {
			return err
		}
		a = nil
	}
	if a == nil {
		var err error
		if a, err = x.create(pos, storeTimestamp); err != nil {
			return err
		}
	}
	s := h % a.slots
	a.buf = appendEntry(a.buf, entry{hash: h, pos: pos, diff: timeDiff(storeTimestamp, a.beginTs), prev: a.slotTab[s]})
	a.slotTab[s] = a.count
	a.count++
	a.endPos = pos
	a.endTs = max(a.endTs, storeTimestamp)
	x.maxPos.Store(pos)
	if a.count >= x.opts.EntriesPerFile {
		return x.seal(a)
	}
	if len(a.buf) >= writeBufEntries*entrySize {
		return x.flush(a)
	}
	return nil
}

// create starts a new active file whose header (with the begin timestamp
// every timeDiff is relative to) is durable before any entry is written. A
// file that could not be started is removed and the index left as it was.
// REQUIRES: mu held.
func (x *Index) create(pos, ts int64) (*indexFile, error) {
	path := filepath.Join(x.dir, fmt.Sprintf("%020d", x.nextSeq))
	f, err := x.opts.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("keyindex: create: %w", err)
	}
	a := &indexFile{seq: x.nextSeq, path: path, f: f, header: header{
		beginTs: ts, endTs: ts, beginPos: pos, endPos: pos, slots: x.opts.SlotsPerFile, count: 1,
	}}
	err = x.writeHeader(a)
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("keyindex: fsync %s: %w", path, err)
		}
	}
	if err == nil {
		err = syncDir(x.opts.OpenFile, x.dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path) // never used; the next create truncates it anyway
		return nil, err
	}
	x.nextSeq++
	x.files = append(x.files, a)
	if len(x.spare) == int(a.slots) {
		a.slotTab, x.spare = x.spare, nil
		clear(a.slotTab)
	} else {
		a.slotTab = make([]int32, a.slots)
	}
	a.buf, a.flushed = make([]byte, 0, writeBufEntries*entrySize), 1
	x.active = a
	return a, nil
}

// fail records err as the sticky error and returns it: for fsync errors
// (the page cache can no longer be trusted) and failed repairs. A failed
// write is not sticky: nothing moved, and the next call writes again.
// REQUIRES: mu held.
func (x *Index) fail(err error) error {
	if x.werr == nil {
		x.werr = err
	}
	return x.werr
}

// flush writes the active file's buffered entries. REQUIRES: mu held.
func (x *Index) flush(a *indexFile) error {
	if len(a.buf) == 0 {
		return nil
	}
	if _, err := a.f.WriteAt(a.buf, a.entryOff(a.flushed)); err != nil {
		return fmt.Errorf("keyindex: write %s: %w", a.path, err)
	}
	a.flushed += int32(len(a.buf) / entrySize)
	a.buf = a.buf[:0]
	return nil
}

// writeHeader writes a's header. REQUIRES: mu held.
func (x *Index) writeHeader(a *indexFile) error {
	var b [headerSize]byte
	a.header.encode(b[:])
	if _, err := a.f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("keyindex: write %s: %w", a.path, err)
	}
	return nil
}

// seal completes the active file: entries, slot table and header are
// written and fsynced, then the handle is closed. From then on the file is
// immutable and trusted by recovery. REQUIRES: mu held.
func (x *Index) seal(a *indexFile) error {
	if err := x.flush(a); err != nil {
		return err
	}
	chunk := make([]byte, 0, 64<<10)
	for i := 0; i < len(a.slotTab); {
		chunk = chunk[:0]
		start := i
		for ; i < len(a.slotTab) && len(chunk) < cap(chunk); i++ {
			chunk = appendUint32(chunk, uint32(a.slotTab[i]))
		}
		if _, err := a.f.WriteAt(chunk, headerSize+int64(start)*slotSize); err != nil {
			return fmt.Errorf("keyindex: write %s: %w", a.path, err)
		}
	}
	if err := x.writeHeader(a); err != nil {
		return err
	}
	if err := x.fsyncLocked(a); err != nil {
		return err
	}
	x.closeFile(a) // fsynced above
	x.spare = a.slotTab
	a.f, a.slotTab, a.buf = nil, nil, nil
	x.active = nil
	return nil
}

func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// Query returns the commitlog positions of records indexed under key (built
// by Key) whose store time, at one-second resolution (the file's begin
// timestamp plus the entry's timeDiff), is within [begin, end] ms: newest
// first, without repeats, at most max. Hashes collide, so the caller must
// check the real key on each record. Query may run concurrently with Put.
func (x *Index) Query(key string, begin, end int64, max int) ([]int64, error) {
	if max <= 0 || begin > end {
		return nil, nil
	}
	h := keyHash(key)
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil, ErrClosed
	}
	var out []int64
	var err error
	if a := x.active; a != nil && a.overlaps(begin, end) {
		out, err = a.query(a.f, h, begin, end, max, out)
	}
	sealed := slices.Clone(x.files)
	if x.active != nil {
		sealed = sealed[:len(sealed)-1]
	}
	x.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// NB: sealed files are immutable; a file deleted by retention meanwhile
	// is skipped (an open one stays readable until closed).
	for i := len(sealed) - 1; i >= 0 && len(out) < max; i-- {
		s := sealed[i]
		if !s.overlaps(begin, end) {
			continue
		}
		f, err := x.opts.OpenFile(s.path, os.O_RDONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("keyindex: %w", err)
		}
		out, err = s.query(f, h, begin, end, max, out)
		_ = f.Close() // read-only
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (h *header) overlaps(begin, end int64) bool { return h.beginTs <= end && h.endTs >= begin }

// MaxPos returns the highest commitlog position indexed, or -1 if the index
// is empty. After Open it covers only what survived recovery.
func (x *Index) MaxPos() int64 { return x.maxPos.Load() }

// Sync writes buffered entries and the header of the active file and
// fsyncs it.
//
// The fsync runs without mu, so that the dispatcher's Puts do not wait for
// the disk (they did, once a checkpoint, for the length of an fsync); only
// a Put that seals the file waits for it (see fsyncMu). A file sealed or
// closed meanwhile was fsynced by whoever closed it, or the index failed.
func (x *Index) Sync() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	a := x.active
	if x.werr != nil || a == nil {
		err := x.werr
		x.mu.Unlock()
		return err
	}
	err := x.flush(a)
	if err == nil {
		err = x.writeHeader(a)
	}
	f := a.f
	x.mu.Unlock()
	if err != nil {
		return err
	}
	x.fsyncMu.Lock()
	if !a.fclosed {
		if err := x.syncFile(f); err != nil && x.lostSync == nil {
			x.lostSync = fmt.Errorf("keyindex: fsync %s: %w", a.path, err)
		}
	}
	x.fsyncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.fsyncMu.Lock()
	lost := x.lostSync
	x.fsyncMu.Unlock()
	if lost != nil {
		return x.fail(lost)
	}
	return x.werr
}

// REQUIRES: mu held.
func (x *Index) syncLocked() error {
	if x.werr != nil {
		return x.werr
	}
	a := x.active
	if a == nil {
		return nil
	}
	if err := x.flush(a); err != nil {
		return err
	}
	if err := x.writeHeader(a); err != nil {
		return err
	}
	return x.fsyncLocked(a)
}

// fsyncLocked fsyncs a's file, after any fsync Sync is running, and fails
// the index if either saw an error. REQUIRES: mu held.
func (x *Index) fsyncLocked(a *indexFile) error {
	x.fsyncMu.Lock()
	err := a.f.Sync()
	lost := x.lostSync
	x.fsyncMu.Unlock()
	if lost != nil {
		return x.fail(lost)
	}
	if err != nil {
		return x.fail(fmt.Errorf("keyindex: fsync %s: %w", a.path, err))
	}
	return nil
}

// Close syncs and closes the index. It is idempotent.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	err := x.syncLocked()
	x.closeFiles()
	return err
}

// closeFiles closes the active handle. REQUIRES: mu held or not shared.
func (x *Index) closeFiles() {
	if a := x.active; a != nil && a.f != nil {
		x.closeFile(a)
		a.f = nil
	}
}

// closeFile closes a's handle between fsyncs: Sync's unlocked fsync runs
// before it or skips the file (a race on the descriptor otherwise: os.File
// Fd against Close). REQUIRES: mu held or not shared.
func (x *Index) closeFile(a *indexFile) {
	x.fsyncMu.Lock()
	_ = a.f.Close()
	a.fclosed = true
	x.fsyncMu.Unlock()
}
