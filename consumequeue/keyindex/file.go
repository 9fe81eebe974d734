package keyindex

import (
	"encoding/binary"
	"fmt"
	"math"
)

// On-disk layout (big-endian), spec §7.4.
const (
	headerSize = 40
	slotSize   = 4
	entrySize  = 20

	// Header fields.
	hBeginTs  = 0
	hEndTs    = 8
	hBeginPos = 16
	hEndPos   = 24
	hSlots    = 32
	hCount    = 36

	// Entry fields.
	eHash = 0
	ePos  = 4
	eDiff = 12
	ePrev = 16

	// maxSlots bounds the slot count read from a header (512 MiB table).
	maxSlots = 1 << 27
)

// header is the 40-byte file header.
type header struct {
	beginTs, endTs   int64 // store timestamps (ms) of the first and newest entry
	beginPos, endPos int64 // commitlog positions of the first and last entry
	slots            int32 // hash slot count
	count            int32 // indexCount: next entry number; entries are 1..count-1
}

func (h *header) encode(b []byte) {
	binary.BigEndian.PutUint64(b[hBeginTs:], uint64(h.beginTs))
	binary.BigEndian.PutUint64(b[hEndTs:], uint64(h.endTs))
	binary.BigEndian.PutUint64(b[hBeginPos:], uint64(h.beginPos))
	binary.BigEndian.PutUint64(b[hEndPos:], uint64(h.endPos))
	binary.BigEndian.PutUint32(b[hSlots:], uint32(h.slots))
	binary.BigEndian.PutUint32(b[hCount:], uint32(h.count))
}

func decodeHeader(b []byte) header {
	return header{
		beginTs:  int64(binary.BigEndian.Uint64(b[hBeginTs:])),
		endTs:    int64(binary.BigEndian.Uint64(b[hEndTs:])),
		beginPos: int64(binary.BigEndian.Uint64(b[hBeginPos:])),
		endPos:   int64(binary.BigEndian.Uint64(b[hEndPos:])),
		slots:    int32(binary.BigEndian.Uint32(b[hSlots:])),
		count:    int32(binary.BigEndian.Uint32(b[hCount:])),
	}
}

// entry is one 20-byte index entry.
type entry struct {
	hash int32 // keyHash of the key
	pos  int64 // commitlog position of the record
	diff int32 // seconds since the file's beginTs, clamped to [0, MaxInt32]
	prev int32 // previous entry number in the same slot, 0 = end of chain
}

func appendEntry(dst []byte, e entry) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.hash))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.pos))
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.diff))
	return binary.BigEndian.AppendUint32(dst, uint32(e.prev))
}

func decodeEntry(b []byte) entry {
	_ = b[entrySize-1]
	return entry{
		hash: int32(binary.BigEndian.Uint32(b[eHash:])),
		pos:  int64(binary.BigEndian.Uint64(b[ePos:])),
		diff: int32(binary.BigEndian.Uint32(b[eDiff:])),
		prev: int32(binary.BigEndian.Uint32(b[ePrev:])),
	}
}

// timeDiff is the entry's timeDiff for a store timestamp.
func timeDiff(ts, beginTs int64) int32 {
	d := (ts - beginTs) / 1000
	return int32(min(max(d, 0), math.MaxInt32))
}

// indexFile is one index file. A sealed file is immutable (queries read it
// without the Index lock); the active one has an open handle, the slot
// table in memory and a write buffer, all guarded by Index.mu.
type indexFile struct {
	seq  int64
	path string
	header

	// Active file only.
	f       File
	slotTab []int32 // newest entry number per slot
	buf     []byte  // encoded entries [flushed, count) not yet written
	flushed int32
	// fclosed is set when f was closed (guarded by Index.fsyncMu): Sync,
	// which fsyncs f without Index.mu, then leaves it alone (whoever closed
	// it fsynced it first).
	fclosed bool
}

func (x *indexFile) entriesStart() int64 { return headerSize + int64(x.slots)*slotSize }

func (x *indexFile) entryOff(k int32) int64 { return x.entriesStart() + int64(k)*entrySize }

// readEntry reads entry k of an open file (buffered entries included).
func (x *indexFile) readEntry(f File, k int32) (entry, error) {
	if x.buf != nil && k >= x.flushed {
		o := int(k-x.flushed) * entrySize
		return decodeEntry(x.buf[o : o+entrySize]), nil
	}
	var b [entrySize]byte
	if _, err := f.ReadAt(b[:], x.entryOff(k)); err != nil {
		return entry{}, fmt.Errorf("keyindex: read %s entry %d: %w", x.path, k, err)
	}
	return decodeEntry(b[:]), nil
}

// slot returns the head of the chain for hash.
func (x *indexFile) slot(f File, hash int32) (int32, error) {
	s := hash % x.slots
	if x.slotTab != nil {
		return x.slotTab[s], nil
	}
	var b [slotSize]byte
	if _, err := f.ReadAt(b[:], headerSize+int64(s)*slotSize); err != nil {
		return 0, fmt.Errorf("keyindex: read %s slot %d: %w", x.path, s, err)
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// query walks hash's chain in this file, newest first, appending to out the
// positions of entries whose time is within [begin, end], up to max
// results. A chain that points forward or out of range, or an entry of
// another slot or outside the file's position range, is corrupt and ends
// the walk instead of looping or misreporting.
func (x *indexFile) query(f File, hash int32, begin, end int64, max int, out []int64) ([]int64, error) {
	k, err := x.slot(f, hash)
	if err != nil {
		return out, err
	}
	for k > 0 && k < x.count && len(out) < max {
		e, err := x.readEntry(f, k)
		if err != nil {
			return out, err
		}
		if e.hash < 0 || e.hash%x.slots != hash%x.slots || e.pos < x.beginPos || e.pos > x.endPos {
			break
		}
		if t := x.beginTs + int64(e.diff)*1000; e.hash == hash && t >= begin && t <= end &&
			(len(out) == 0 || out[len(out)-1] != e.pos) {
			out = append(out, e.pos)
		}
		if e.prev >= k {
			break
		}
		k = e.prev
	}
	return out, nil
}
