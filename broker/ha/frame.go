package ha

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// headerSize is a master frame's header: offset (8) and size (4).
const headerSize = 12

// MaxChunk bounds the bytes of one frame a slave accepts (Java's master
// sends at most 32 KiB; a larger size is a broken or hostile peer).
const MaxChunk = 8 << 20

// putHeader writes a frame header into b[:headerSize].
func putHeader(b []byte, offset int64, size int) {
	binary.BigEndian.PutUint64(b[0:8], uint64(offset))
	binary.BigEndian.PutUint32(b[8:12], uint32(size))
}

// parseHeader reads a frame header and checks it.
func parseHeader(b []byte) (offset int64, size int, err error) {
	offset = int64(binary.BigEndian.Uint64(b[0:8]))
	n := binary.BigEndian.Uint32(b[8:12])
	switch {
	case offset < 0:
		return 0, 0, fmt.Errorf("ha: frame at negative offset %d", offset)
	case n > MaxChunk:
		return 0, 0, fmt.Errorf("ha: frame of %d bytes at %d, more than %d", n, offset, MaxChunk)
	}
	return offset, int(n), nil
}

// readFrame reads one master frame into buf (grown up to MaxChunk) and
// returns its offset and bytes.
func readFrame(r io.Reader, hdr []byte, buf *[]byte) (int64, []byte, error) {
	if _, err := io.ReadFull(r, hdr[:headerSize]); err != nil {
		return 0, nil, err
	}
	off, n, err := parseHeader(hdr)
	if err != nil {
		return 0, nil, err
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	data := (*buf)[:n]
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, err
	}
	return off, data, nil
}

// wholeFrameBuffered reports whether br holds a whole frame, which
// readFrame would read without waiting.
func wholeFrameBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n < headerSize {
		return false
	}
	h, err := br.Peek(headerSize)
	return err == nil && int64(n) >= headerSize+int64(binary.BigEndian.Uint32(h[8:12]))
}

// readReport reads a slave's 8-byte offset report.
func readReport(r io.Reader, b []byte) (int64, error) {
	if _, err := io.ReadFull(r, b[:8]); err != nil {
		return 0, err
	}
	off := int64(binary.BigEndian.Uint64(b[:8]))
	if off < 0 {
		return 0, fmt.Errorf("ha: slave reported negative offset %d", off)
	}
	return off, nil
}
