package consumequeue

import (
	"encoding/binary"
	"fmt"
	"math"
)

// On-disk entry layout (big-endian), spec §7.3.
const (
	posOffset  = 0  // int64 commitlog physical offset
	sizeOffset = 8  // int32 record size
	tagsOffset = 12 // int64 tags hash code (or delivery time for delay topics)

	// EntrySize is the size of one encoded entry.
	EntrySize = 20

	// DefaultEntriesPerFile is RocketMQ's 300,000 entries (6,000,000 bytes)
	// per file.
	DefaultEntriesPerFile = 300_000

	// fileNameLen is the length of a file name: %020d of its byte offset.
	fileNameLen = 20
)

// Entry is one consume-queue unit: where a record lives in the commitlog and
// its tags hash code.
type Entry struct {
	Pos      int64 // commitlog physical offset of the record
	Size     int32 // record size in bytes
	TagsCode int64 // Java String.hashCode of TAGS, 0 without tags
}

// End returns Pos+Size: the commitlog position just past the record.
func (e Entry) End() int64 { return e.Pos + int64(e.Size) }

// blankEntry is what RocketMQ writes before the first real entry of a queue
// whose first file starts at a non-zero offset. Sluice never writes it but
// recovery skips a leading run of them.
var blankEntry = Entry{Pos: 0, Size: math.MaxInt32, TagsCode: 0}

// putEntry encodes e into b[:EntrySize].
func putEntry(b []byte, e Entry) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint64(b[posOffset:], uint64(e.Pos))
	binary.BigEndian.PutUint32(b[sizeOffset:], uint32(e.Size))
	binary.BigEndian.PutUint64(b[tagsOffset:], uint64(e.TagsCode))
}

// appendEntry appends the encoding of e to dst.
func appendEntry(dst []byte, e Entry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Pos))
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Size))
	return binary.BigEndian.AppendUint64(dst, uint64(e.TagsCode))
}

// getEntry decodes b[:EntrySize]. It never fails: validity is a separate
// question (validEntry).
func getEntry(b []byte) Entry {
	_ = b[EntrySize-1]
	return Entry{
		Pos:      int64(binary.BigEndian.Uint64(b[posOffset:])),
		Size:     int32(binary.BigEndian.Uint32(b[sizeOffset:])),
		TagsCode: int64(binary.BigEndian.Uint64(b[tagsOffset:])),
	}
}

// validEntry reports whether e can follow an entry ending at prevEnd. An
// all-zero entry (preallocated or torn tail) is invalid because its Size is 0.
func validEntry(e Entry, prevEnd int64) bool {
	return e.Pos >= 0 && e.Size > 0 && e.Pos >= prevEnd && e.End() >= e.Pos
}

// fileName returns the name of the file whose first byte is at byteOff in
// the queue's logical space.
func fileName(byteOff int64) string { return fmt.Sprintf("%0*d", fileNameLen, byteOff) }

// parseFileName is the inverse of fileName; ok is false for any other name.
func parseFileName(name string) (byteOff int64, ok bool) {
	if len(name) != fileNameLen {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if byteOff > (math.MaxInt64-d)/10 {
			return 0, false
		}
		byteOff = byteOff*10 + d
	}
	return byteOff, true
}
