package message

import (
	"bytes"
	"compress/zlib"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompress_RoundTrip(t *testing.T) {
	body := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 140))
	for _, level := range []int{zlib.DefaultCompression, zlib.HuffmanOnly, zlib.NoCompression, 1, DefaultCompressLevel, zlib.BestCompression} {
		c, err := Compress(body, level)
		require.NoError(t, err)
		out, err := Decompress(c, len(body))
		require.NoError(t, err, "level %d", level)
		require.Equal(t, body, out)
	}
	c, err := Compress(nil, DefaultCompressLevel)
	require.NoError(t, err)
	out, err := Decompress(c, 0)
	require.NoError(t, err)
	require.Empty(t, out)

	_, err = Compress(body, 10)
	require.Error(t, err)
}

func TestDecompress_GoldenCompressedSend(t *testing.T) {
	f := readFrame(t, "03-send-message-compressed.bin")
	require.Equal(t, "1", f.ExtFields["sysFlag"])
	require.Equal(t, []byte{0x78, 0x5e}, f.Body[:2])
	out, err := Decompress(f.Body, 0)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("The quick brown fox jumps over the lazy dog. ", 140), string(out))
}

func TestDecompress_Hostile(t *testing.T) {
	// 16 MiB of zeros deflates to ~16 KiB: the cap must stop it early.
	bomb, err := Compress(make([]byte, 16<<20), zlib.BestCompression)
	require.NoError(t, err)
	require.Less(t, len(bomb), 64<<10)
	_, err = Decompress(bomb, 0)
	require.ErrorIs(t, err, ErrBodyTooLarge)
	require.Contains(t, err.Error(), "4194304")

	small, err := Compress(make([]byte, 1000), DefaultCompressLevel)
	require.NoError(t, err)
	out, err := Decompress(small, 1000)
	require.NoError(t, err, "exactly at the limit")
	require.Len(t, out, 1000)
	_, err = Decompress(small, 999)
	require.ErrorIs(t, err, ErrBodyTooLarge)

	for name, in := range map[string][]byte{
		"empty":      nil,
		"garbage":    []byte("not zlib at all"),
		"truncated":  small[:len(small)-5],
		"bad-adler":  append(bytes.Clone(small[:len(small)-1]), small[len(small)-1]^1),
		"raw-header": {0x78},
	} {
		_, err := Decompress(in, 0)
		require.ErrorIs(t, err, ErrDecompress, name)
	}
}
