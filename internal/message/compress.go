package message

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
)

// Producer compression defaults (spec §6.8): a single message whose body is
// at least CompressThreshold bytes is zlib-compressed at
// DefaultCompressLevel and sent with FlagCompressed.
const (
	CompressThreshold    = 4096
	DefaultCompressLevel = 5
)

// Compress returns body as a zlib (RFC 1950) stream at level, which is
// zlib.HuffmanOnly..zlib.BestCompression or zlib.DefaultCompression.
func Compress(body []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(body)/2 + 64)
	w, err := zlib.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, fmt.Errorf("message: compress: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return nil, fmt.Errorf("message: compress: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("message: compress: %w", err)
	}
	return buf.Bytes(), nil
}

// Decompress inflates a zlib body (any level; FlagCompressed with
// compression type 0 or CompressionZlib). It stops and returns an error
// wrapping ErrBodyTooLarge as soon as the output would exceed maxSize bytes
// (DefaultMaxBodySize when maxSize <= 0), so a hostile body cannot make it
// allocate more than about twice maxSize. A corrupt stream or checksum gives
// an error wrapping ErrDecompress. Bytes after the end of the stream are
// ignored.
func Decompress(body []byte, maxSize int) ([]byte, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxBodySize
	}
	r, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
	}
	defer r.Close()
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, int64(maxSize)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
	}
	if n > int64(maxSize) {
		return nil, fmt.Errorf("%w: inflated body exceeds %d bytes", ErrBodyTooLarge, maxSize)
	}
	return out.Bytes(), nil
}
