package remoting

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Frame limits.
const (
	// DefaultMaxFrameSize is the default bound on a whole frame, the 4-byte
	// length field included: 16 MiB, as Java's frameMaxLength.
	DefaultMaxFrameSize = 16 << 20

	// maxHeaderLen is what the 24-bit header length can say.
	maxHeaderLen = 1<<24 - 1

	// framePrefixLen is the length field plus the header word.
	framePrefixLen = 8
)

// AppendFrame appends c as one frame (length, header word, header, body)
// to dst. It fails with ErrFrameTooLarge if the header does not fit the
// 24-bit header length or the frame does not fit an int32 length, and with
// ErrUnknownSerializeType for a serialize type without a codec.
func AppendFrame(dst []byte, c *Command) ([]byte, error) {
	dst, err := appendFramePrefix(dst, c)
	if err != nil {
		return dst, err
	}
	return append(dst, c.Body...), nil
}

// EncodeFrame returns c as one frame in a new slice.
func EncodeFrame(c *Command) ([]byte, error) { return AppendFrame(nil, c) }

// appendFramePrefix appends the length, the header word and the header of
// c; the length accounts for c.Body, which the caller writes after.
func appendFramePrefix(dst []byte, c *Command) ([]byte, error) {
	codec, err := CodecFor(c.SerializeType)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst, err = codec.AppendHeader(dst, &c.Header)
	if err != nil {
		return dst[:start], err
	}
	hl := len(dst) - start - framePrefixLen
	if hl > maxHeaderLen {
		return dst[:start], fmt.Errorf("%w: header of %d bytes, limit %d", ErrFrameTooLarge, hl, maxHeaderLen)
	}
	length := int64(4 + hl + len(c.Body))
	if length > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: frame of %d bytes", ErrFrameTooLarge, length+4)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(length))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(c.SerializeType)<<24|uint32(hl))
	return dst, nil
}

// frameSource is what the frame reader needs from its input. A
// netpoll.Reader is one: its methods block until enough bytes have arrived
// (or the read timeout passes, or the connection closes).
type frameSource interface {
	Peek(n int) ([]byte, error)
	Skip(n int) error
	Next(n int) ([]byte, error)
	ReadBinary(n int) ([]byte, error)
}

// checkLength validates a frame's length field against maxFrame (which
// bounds the whole frame, length field included).
func checkLength(length int32, maxFrame int) error {
	if length < 4 {
		return fmt.Errorf("%w: length %d < 4", ErrBadFrame, length)
	}
	if int64(length)+4 > int64(maxFrame) {
		return fmt.Errorf("%w: %d bytes, limit %d%s", ErrFrameTooLarge, int64(length)+4, maxFrame, textHint(length))
	}
	return nil
}

// textHint names the length field's bytes when they are printable text
// ("HTTP" reads as a length of 1,213,486,164): the peer speaks another
// protocol, which the size alone does not say.
func textHint(length int32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(length))
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return ""
		}
	}
	return fmt.Sprintf(" (its first bytes read %q: is the peer speaking another protocol?)", b[:])
}

// checkHeaderWord validates the header word of a frame of the given length
// and returns its codec and header length.
func checkHeaderWord(word uint32, length int32) (SerializeType, HeaderCodec, int, error) {
	st := SerializeType(word >> 24)
	hl := int(word & 0xFFFFFF)
	codec, err := CodecFor(st)
	if err != nil {
		return st, nil, 0, err
	}
	if hl == 0 {
		return st, nil, 0, fmt.Errorf("%w: empty header", ErrBadFrame)
	}
	if hl > int(length)-4 {
		return st, nil, 0, fmt.Errorf("%w: header length %d past frame length %d", ErrBadFrame, hl, length)
	}
	return st, codec, hl, nil
}

// readFrame reads one frame from src. It validates the length and the
// header word before consuming or allocating anything else, so a garbage
// prefix costs nothing; the header is decoded before the body is read. The
// returned command owns all its memory (strings and Body are copies), so
// the caller may release src's buffers at once; except, with borrow, the
// Body of a request: a view of src's buffer (marked borrowed), valid until
// the caller releases it.
//
// Errors wrapping ErrBadFrame, ErrFrameTooLarge, ErrUnknownSerializeType or
// ErrBadHeader mean the stream is garbage; other errors come from src. It
// also returns the bytes the frame took. A *CodeRangeError comes with the
// whole frame read: the command (Code 0) and its size.
func readFrame(src frameSource, maxFrame int, borrow bool) (*Command, int, error) {
	p, err := src.Peek(4)
	if err != nil {
		return nil, 0, err
	}
	length := int32(binary.BigEndian.Uint32(p))
	if err := checkLength(length, maxFrame); err != nil {
		return nil, 0, err
	}
	// NB: length >= 4, so the header word belongs to this frame.
	if p, err = src.Peek(framePrefixLen); err != nil {
		return nil, 0, err
	}
	st, codec, hl, err := checkHeaderWord(binary.BigEndian.Uint32(p[4:]), length)
	if err != nil {
		return nil, 0, err
	}
	if err := src.Skip(framePrefixLen); err != nil {
		return nil, 0, err
	}
	hdr, err := src.Next(hl)
	if err != nil {
		return nil, 0, err
	}
	in := &inbound{cmd: Command{SerializeType: st}}
	cmd := &in.cmd
	if borrow {
		cmd.inlineW = &in.w // NB: read off a connection (DecodeFrame's commands compare equal without it)
	}
	herr := codec.DecodeHeader(hdr, &cmd.Header)
	if herr != nil && asCodeRange(herr) == nil {
		return nil, 0, herr
	}
	if bodyLen := int(length) - 4 - hl; bodyLen > 0 {
		if borrow && !cmd.IsResponse() {
			cmd.Body, err = src.Next(bodyLen)
			cmd.borrowed = true
		} else {
			cmd.Body, err = src.ReadBinary(bodyLen)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return cmd, 4 + int(length), herr
}

// DecodeFrame decodes the first frame of buf, for tests, tools and
// fuzzing. maxFrameSize <= 0 means DefaultMaxFrameSize. It returns the
// command and the number of bytes it used, or ErrShortFrame when buf holds
// less than a whole frame, or an error wrapping ErrBadFrame,
// ErrFrameTooLarge, ErrUnknownSerializeType or ErrBadHeader, or a
// *CodeRangeError together with the command and its size.
func DecodeFrame(buf []byte, maxFrameSize int) (*Command, int, error) {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	if len(buf) < 4 {
		return nil, 0, ErrShortFrame
	}
	length := int32(binary.BigEndian.Uint32(buf))
	if err := checkLength(length, maxFrameSize); err != nil {
		return nil, 0, err
	}
	if len(buf) < framePrefixLen {
		return nil, 0, ErrShortFrame
	}
	if _, _, _, err := checkHeaderWord(binary.BigEndian.Uint32(buf[4:]), length); err != nil {
		return nil, 0, err
	}
	n := 4 + int(length)
	if len(buf) < n {
		return nil, 0, ErrShortFrame
	}
	cmd, _, err := readFrame(&bytesSource{b: buf[:n]}, maxFrameSize, false)
	if cmd == nil {
		return nil, 0, err
	}
	return cmd, n, err
}

// bytesSource is a frameSource over a complete frame.
type bytesSource struct{ b []byte }

func (s *bytesSource) Peek(n int) ([]byte, error) {
	if n > len(s.b) {
		return nil, ErrShortFrame
	}
	return s.b[:n], nil
}

func (s *bytesSource) Skip(n int) error {
	if n > len(s.b) {
		return ErrShortFrame
	}
	s.b = s.b[n:]
	return nil
}

func (s *bytesSource) Next(n int) ([]byte, error) {
	p, err := s.Peek(n)
	if err == nil {
		s.b = s.b[n:]
	}
	return p, err
}

func (s *bytesSource) ReadBinary(n int) ([]byte, error) {
	p, err := s.Next(n)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), p...), nil
}
