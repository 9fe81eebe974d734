package remoting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cloudwego/netpoll"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

func sampleCommand(st SerializeType, body []byte) *Command {
	c := NewRequest(protocol.SendMessage, map[string]string{"topic": "T", "queueId": "1"}, body)
	c.SerializeType = st
	c.Opaque = 42
	return c
}

func TestFrame_RoundTrip(t *testing.T) {
	for _, st := range serializeTypes {
		for _, size := range []int{0, 1, 4096, 70000} {
			c := sampleCommand(st, bytes.Repeat([]byte{0xAB}, size))
			if size == 0 {
				c.Body = nil
			}
			frame, err := EncodeFrame(c)
			require.NoError(t, err)
			require.Equal(t, len(frame)-4, int(binary.BigEndian.Uint32(frame)))
			require.Equal(t, byte(st), frame[4])
			got, n, err := DecodeFrame(frame, 0)
			require.NoError(t, err)
			require.Equal(t, len(frame), n)
			require.Equal(t, c, got)
		}
	}
}

func TestFrame_Concatenated(t *testing.T) {
	var stream []byte
	var want []*Command
	for i, st := range serializeTypes {
		c := sampleCommand(st, []byte(strings.Repeat("x", i)))
		if i == 0 {
			c.Body = nil
		}
		var err error
		stream, err = AppendFrame(stream, c)
		require.NoError(t, err)
		want = append(want, c)
	}
	for _, w := range want {
		got, n, err := DecodeFrame(stream, 0)
		require.NoError(t, err)
		require.Equal(t, w, got)
		stream = stream[n:]
	}
	require.Empty(t, stream)
}

// frame builds a raw frame: length, header word, header, body.
func rawFrame(length int32, st byte, headerLen int, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(length))
	b = binary.BigEndian.AppendUint32(b, uint32(st)<<24|uint32(headerLen))
	return append(b, rest...)
}

func TestDecodeFrame_Errors(t *testing.T) {
	good, err := EncodeFrame(sampleCommand(SerializeJSON, []byte("body")))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"empty", nil, 0, ErrShortFrame},
		{"3 bytes", good[:3], 0, ErrShortFrame},
		{"length only", good[:4], 0, ErrShortFrame},
		{"cut in header", good[:20], 0, ErrShortFrame},
		{"cut in body", good[:len(good)-1], 0, ErrShortFrame},
		{"length 0", rawFrame(0, 0, 0, nil), 0, ErrBadFrame},
		{"length 3", rawFrame(3, 0, 0, nil), 0, ErrBadFrame},
		{"negative length", rawFrame(-1, 0, 0, nil), 0, ErrBadFrame},
		{"16 MiB + 1", rawFrame(16<<20+1, 0, 10, nil), 0, ErrFrameTooLarge},
		{"over a small max", good, len(good) - 1, ErrFrameTooLarge},
		{"exactly the max", good, len(good), nil},
		{"unknown serialize type", rawFrame(20, 7, 4, nil), 0, ErrUnknownSerializeType},
		{"header past frame", rawFrame(20, 0, 17, nil), 0, ErrBadFrame},
		{"empty header", rawFrame(4, 0, 0, nil), 0, ErrBadFrame},
		{"bad JSON header", rawFrame(8, 0, 4, []byte("{x:1")), 0, ErrBadHeader},
		{"JSON null header", rawFrame(8, 0, 4, []byte("null")), 0, ErrBadHeader},
		{"bad binary header", rawFrame(8, 1, 4, []byte("abcd")), 0, ErrBadHeader},
		{"bad msgpack header", rawFrame(5, 2, 1, []byte{0xc1}), 0, ErrBadHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeFrame(tc.in, tc.max)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestDecodeFrame_TextHint: a too large length field that is printable
// text (an HTTP answer) says so; a large binary length does not.
func TestDecodeFrame_TextHint(t *testing.T) {
	_, _, err := DecodeFrame([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"), 0)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.Contains(t, err.Error(), `its first bytes read "HTTP": is the peer speaking another protocol?`)
	_, _, err = DecodeFrame(rawFrame(16<<20+1, 0, 10, nil), 0)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.NotContains(t, err.Error(), "first bytes")
}

func TestAppendFrame_Errors(t *testing.T) {
	c := sampleCommand(5, nil)
	_, err := EncodeFrame(c)
	require.ErrorIs(t, err, ErrUnknownSerializeType)

	c = sampleCommand(SerializeMsgpack, nil)
	c.Remark = strings.Repeat("r", maxHeaderLen)
	prefix := []byte("keep")
	out, err := AppendFrame(prefix, c)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.Equal(t, "keep", string(out), "dst unchanged on error")
}

// TestDecodeFrame_NoAllocBeyondCaps: a prefix claiming a 16 MiB frame, or a
// header past the frame, costs nothing near the claim.
func TestDecodeFrame_NoAllocBeyondCaps(t *testing.T) {
	for name, in := range map[string][]byte{
		"claims 16 MiB":       rawFrame(16<<20-4, 0, 100, []byte("{")),
		"claims too much":     rawFrame(1<<30, 0, 100, nil),
		"header claims 16MiB": rawFrame(16<<20-4, 2, 1<<24-1, nil),
	} {
		n := bytesAllocated(func() { _, _, _ = DecodeFrame(in, 0) })
		require.Less(t, n, uint64(64<<10), name)
		lb := netpoll.NewLinkBuffer()
		_, _ = lb.WriteBinary(in)
		require.NoError(t, lb.Flush())
		src := &splitSource{lb: lb}
		n = bytesAllocated(func() { _, _, _ = readFrame(src, DefaultMaxFrameSize, false) })
		require.Less(t, n, uint64(64<<10), name)
		require.NoError(t, lb.Release())
	}
}

// splitSource is a frameSource over a netpoll LinkBuffer that receives the
// input in two pieces: when the reader needs more than the buffer holds,
// the second piece "arrives" (as netpoll's blocking reads would see it);
// after that, a short read is EOF.
type splitSource struct {
	lb   *netpoll.LinkBuffer
	rest []byte
}

func (s *splitSource) ensure(n int) error {
	if s.lb.Len() >= n {
		return nil
	}
	if s.rest != nil {
		_, _ = s.lb.WriteBinary(s.rest)
		if err := s.lb.Flush(); err != nil {
			return err
		}
		s.rest = nil
	}
	if s.lb.Len() >= n {
		return nil
	}
	return ErrShortFrame
}

func (s *splitSource) Peek(n int) ([]byte, error) {
	if err := s.ensure(n); err != nil {
		return nil, err
	}
	return s.lb.Peek(n)
}

func (s *splitSource) Skip(n int) error {
	if err := s.ensure(n); err != nil {
		return err
	}
	return s.lb.Skip(n)
}

func (s *splitSource) Next(n int) ([]byte, error) {
	if err := s.ensure(n); err != nil {
		return nil, err
	}
	return s.lb.Next(n)
}

func (s *splitSource) ReadBinary(n int) ([]byte, error) {
	if err := s.ensure(n); err != nil {
		return nil, err
	}
	return s.lb.ReadBinary(n)
}

// pieceSource is a frameSource over plain bytes that receive their second
// piece when the reader first needs more than the first holds. Unlike a
// LinkBuffer it has no pools, so fuzz coverage stays deterministic.
type pieceSource struct {
	buf  []byte
	rest []byte
}

func (s *pieceSource) ensure(n int) error {
	if n > len(s.buf) && s.rest != nil {
		s.buf = append(s.buf, s.rest...)
		s.rest = nil
	}
	if n > len(s.buf) {
		return ErrShortFrame
	}
	return nil
}

func (s *pieceSource) Peek(n int) ([]byte, error) {
	if err := s.ensure(n); err != nil {
		return nil, err
	}
	return s.buf[:n], nil
}

func (s *pieceSource) Skip(n int) error {
	if err := s.ensure(n); err != nil {
		return err
	}
	s.buf = s.buf[n:]
	return nil
}

func (s *pieceSource) Next(n int) ([]byte, error) {
	p, err := s.Peek(n)
	if err == nil {
		s.buf = s.buf[n:]
	}
	return p, err
}

func (s *pieceSource) ReadBinary(n int) ([]byte, error) {
	p, err := s.Next(n)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), p...), nil
}

// readPieces is readSplit over a pieceSource.
func readPieces(data []byte, cut, maxFrame int) ([]*Command, error) {
	src := &pieceSource{buf: append([]byte(nil), data[:cut]...), rest: data[cut:]}
	if len(src.rest) == 0 {
		src.rest = nil
	}
	var out []*Command
	for src.rest != nil || len(src.buf) > 0 {
		cmd, _, err := readFrame(src, maxFrame, false)
		if err != nil {
			return out, err
		}
		out = append(out, cmd)
	}
	return out, nil
}

// readSplit reads frames from data delivered in two pieces split at cut,
// releasing the buffer after each frame as the server does.
func readSplit(data []byte, cut, maxFrame int) ([]*Command, error) {
	lb := netpoll.NewLinkBuffer()
	defer lb.Close()
	_, _ = lb.WriteBinary(append([]byte(nil), data[:cut]...))
	if err := lb.Flush(); err != nil {
		return nil, err
	}
	src := &splitSource{lb: lb, rest: append([]byte(nil), data[cut:]...)}
	var out []*Command
	for {
		if src.rest == nil && lb.Len() == 0 {
			return out, nil
		}
		cmd, _, err := readFrame(src, maxFrame, false)
		_ = lb.Release()
		if err != nil {
			return out, err
		}
		out = append(out, cmd)
	}
}

// TestReadFrame_EverySplit: a stream of golden frames read from two pieces
// split at every byte decodes to the same commands as DecodeFrame.
func TestReadFrame_EverySplit(t *testing.T) {
	var stream []byte
	for _, name := range []string{"02-send-message.bin", "06-heart-beat-producer.bin", "09-query-consumer-offset.response.bin"} {
		stream = append(stream, loadFrame(t, name)...)
	}
	var want []*Command
	for rest := stream; len(rest) > 0; {
		c, n, err := DecodeFrame(rest, 0)
		require.NoError(t, err)
		want = append(want, c)
		rest = rest[n:]
	}
	for cut := 0; cut <= len(stream); cut++ {
		got, err := readSplit(stream, cut, DefaultMaxFrameSize)
		require.NoError(t, err, "cut %d", cut)
		require.Equal(t, want, got, "cut %d", cut)
	}
}

// TestReadFrame_Garbage: random bytes, and prefixes that claim frames of
// up to 1 MiB of which at most 64 bytes arrive, read over a LinkBuffer (as
// the server reads) from two pieces. The reader fails with the error the
// first bad field calls for (a garbage kind, on which the connection is
// closed, or ErrShortFrame, on which a connection waits for more), never
// returns a command, and never allocates the length a prefix claims.
func TestReadFrame_Garbage(t *testing.T) {
	const maxFrame = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[error]int{}
	for i := 0; i < 600; i++ {
		b := make([]byte, 1+rng.IntN(64))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%2 == 1 && len(b) >= framePrefixLen {
			// serialize type 3 is unknown; a header length past the frame or
			// 0 is malformed; a short one is decoded before the body is read.
			length := 64<<10 + rng.IntN(maxFrame-4-64<<10)
			hl := []int{0, 1 + rng.IntN(56), length - 3 + rng.IntN(8)}[rng.IntN(3)]
			copy(b, rawFrame(int32(length), byte(rng.IntN(4)), hl, nil))
		}
		want := garbageVerdict(t, b, maxFrame)
		seen[want]++
		var got []*Command
		var err error
		n := bytesAllocated(func() { got, err = readSplit(b, rng.IntN(len(b)+1), maxFrame) })
		require.ErrorIs(t, err, want, "input %x", b)
		require.Empty(t, got)
		require.Less(t, n, uint64(48<<10), "input %x: allocated %d bytes", b, n)
	}
	for _, kind := range []error{ErrShortFrame, ErrBadFrame, ErrFrameTooLarge, ErrUnknownSerializeType, ErrBadHeader} {
		require.Greater(t, seen[kind], 10, "%v: %v", kind, seen)
	}
}

// garbageVerdict is the error the frame reader owes for b, a stream too
// short to hold the frame its prefix claims, checked field by field.
func garbageVerdict(t *testing.T, b []byte, maxFrame int) error {
	if len(b) < 4 {
		return ErrShortFrame
	}
	length := int32(binary.BigEndian.Uint32(b))
	switch {
	case length < 4:
		return ErrBadFrame
	case int(length)+4 > maxFrame:
		return ErrFrameTooLarge
	case len(b) < framePrefixLen:
		return ErrShortFrame
	}
	require.Greater(t, 4+int(length), len(b), "input %x holds a whole frame", b)
	word := binary.BigEndian.Uint32(b[4:])
	codec, err := CodecFor(SerializeType(word >> 24))
	hl := int(word & 0xFFFFFF)
	switch {
	case err != nil:
		return ErrUnknownSerializeType
	case hl == 0 || hl > int(length)-4:
		return ErrBadFrame
	case len(b) < framePrefixLen+hl:
		return ErrShortFrame
	}
	var wide *CodeRangeError
	if err := codec.DecodeHeader(b[framePrefixLen:framePrefixLen+hl], &Header{}); err != nil && !errors.As(err, &wide) {
		return ErrBadHeader
	}
	return ErrShortFrame
}
