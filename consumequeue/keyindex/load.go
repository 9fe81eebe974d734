package keyindex

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// scanChunk is how many entries recovery reads per ReadAt (80 KiB).
const scanChunk = 4096

// load opens the files in x.dir: every file but the newest is sealed and
// only its header is read; the newest is rebuilt from its entries (see
// loadActive). Files that cannot be used are removed: the index is derived
// data, so an unusable file loses nothing that a re-dispatch could not
// rebuild. REQUIRES: not shared yet.
func (x *Index) load() error {
	dents, err := os.ReadDir(x.dir)
	if err != nil {
		return fmt.Errorf("keyindex: %w", err)
	}
	var seqs []int64
	for _, d := range dents {
		seq, err := strconv.ParseInt(d.Name(), 10, 64)
		if err != nil || len(d.Name()) != 20 || seq < 0 || !d.Type().IsRegular() {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	removed := false
	for i, seq := range seqs {
		x.nextSeq = seq + 1
		path := filepath.Join(x.dir, fmt.Sprintf("%020d", seq))
		var f *indexFile
		var reason string
		if i < len(seqs)-1 {
			f, reason, err = x.loadSealed(path, seq)
		} else {
			f, reason, err = x.loadActive(path, seq)
		}
		if err != nil {
			return err
		}
		if f == nil {
			x.opts.Logger.Warn("keyindex: removing unusable index file", "file", path, "reason", reason)
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("keyindex: %w", err)
			}
			removed = true
			continue
		}
		x.files = append(x.files, f)
		if f.f != nil {
			x.active = f
		}
	}
	if removed {
		if err := syncDir(x.opts.OpenFile, x.dir); err != nil {
			return err
		}
	}
	if a := x.active; a != nil {
		if err := x.sealIfDone(a); err != nil {
			return err
		}
	}
	if n := len(x.files); n > 0 {
		x.maxPos.Store(x.files[n-1].endPos)
	}
	return nil
}

// readHeader reads and sanity-checks a file's header; reason is non-empty
// if the file is unusable.
func readHeader(f File) (h header, size int64, reason string, err error) {
	info, err := f.Stat()
	if err != nil {
		return h, 0, "", fmt.Errorf("keyindex: %w", err)
	}
	size = info.Size()
	if size < headerSize {
		return h, size, "shorter than a header", nil
	}
	var b [headerSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return h, size, "", fmt.Errorf("keyindex: read %s: %w", f.Name(), err)
	}
	h = decodeHeader(b[:])
	switch {
	case h.slots <= 0 || h.slots > maxSlots:
		return h, size, "bad slot count", nil
	case h.beginPos < 0:
		return h, size, "bad begin position", nil
	}
	return h, size, "", nil
}

// loadSealed reads a sealed file's header. Its entries and slots were
// fsynced before the next file was created, so they are trusted; the count
// is only clamped to the entries the file really holds.
func (x *Index) loadSealed(path string, seq int64) (*indexFile, string, error) {
	f, err := x.opts.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, "", fmt.Errorf("keyindex: %w", err)
	}
	defer f.Close()
	h, size, reason, err := readHeader(f)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	s := &indexFile{seq: seq, path: path, header: h}
	avail := (size - s.entriesStart()) / entrySize // includes unused entry 0
	s.count = int32(min(int64(s.count), avail))
	if s.count <= 1 || s.endPos < s.beginPos {
		return nil, "no entries", nil
	}
	return s, "", nil
}

// loadActive rebuilds the newest file from its entries: its header
// counters and slot table may not be durable, but its begin timestamp and
// position are (create fsyncs the header before the first entry). Entries
// are taken in order while they are consistent: non-negative hash, time
// and position, positions not decreasing, not all zero, and prevIndex equal
// to the slot's head rebuilt so far. The first inconsistent entry ends the
// file, which is truncated there. The file stays open as the active one.
func (x *Index) loadActive(path string, seq int64) (*indexFile, string, error) {
	f, err := x.opts.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("keyindex: %w", err)
	}
	a, reason, err := rebuild(f, path, seq)
	if a == nil {
		_ = f.Close() // read only so far, or truncated and fsynced
	}
	return a, reason, err
}

func rebuild(f File, path string, seq int64) (*indexFile, string, error) {
	h, size, reason, err := readHeader(f)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	x := &indexFile{seq: seq, path: path, header: h, f: f}
	x.slotTab = make([]int32, x.slots)
	avail := (size - x.entriesStart()) / entrySize
	buf := make([]byte, scanChunk*entrySize)
	prevPos, maxDiff := x.beginPos, int32(0)
	k := int64(1)
scan:
	for k < avail {
		n := min(avail-k, scanChunk)
		b := buf[:n*entrySize]
		if _, err := f.ReadAt(b, x.entryOff(int32(k))); err != nil {
			return nil, "", fmt.Errorf("keyindex: read %s: %w", path, err)
		}
		for j := int64(0); j < n; j++ {
			e := decodeEntry(b[j*entrySize:])
			if e == (entry{}) || e.hash < 0 || e.diff < 0 || e.pos < prevPos ||
				e.prev != x.slotTab[e.hash%x.slots] {
				break scan
			}
			x.slotTab[e.hash%x.slots] = int32(k)
			prevPos, maxDiff = e.pos, max(maxDiff, e.diff)
			k++
		}
	}
	if k == 1 {
		return nil, "no entries", nil
	}
	x.count, x.flushed = int32(k), int32(k)
	x.endPos = prevPos
	x.endTs = x.beginTs + int64(maxDiff)*1000 + 999 // upper bound of the real times
	x.buf = make([]byte, 0, writeBufEntries*entrySize)
	if want := x.entryOff(x.count); size != want {
		if err := f.Truncate(want); err != nil {
			return nil, "", fmt.Errorf("keyindex: truncate %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, "", fmt.Errorf("keyindex: fsync %s: %w", path, err)
		}
	}
	return x, "", nil
}
