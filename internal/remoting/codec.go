package remoting

import "fmt"

// HeaderCodec encodes and decodes a Header in one serialize type.
//
// AppendHeader appends the encoded header to dst and returns the extended
// slice. DecodeHeader replaces every field of h; it never retains src (all
// strings are copied), never panics, and returns an error wrapping
// ErrBadHeader for input it cannot read, or a *CodeRangeError (JSON only)
// for a header it read whose code does not fit in 16 bits. ExtFields is nil after decoding an
// empty or absent map. A language name or byte that is not in the table
// decodes as protocol.LanguageOther, as does an absent one.
type HeaderCodec interface {
	AppendHeader(dst []byte, h *Header) ([]byte, error)
	DecodeHeader(src []byte, h *Header) error
}

// MaxExtFields caps the number of extFields entries a decoder accepts. The
// Go client sends at most 14; the cap keeps a hostile header from building
// a huge map.
const MaxExtFields = 1024

// Codecs, one per serialize type.
var (
	JSONCodec     HeaderCodec = jsonCodec{}
	RocketMQCodec HeaderCodec = rocketmqCodec{}
	MsgpackCodec  HeaderCodec = msgpackCodec{}
)

// CodecFor returns the codec of t, or an error wrapping
// ErrUnknownSerializeType.
func CodecFor(t SerializeType) (HeaderCodec, error) {
	switch t {
	case SerializeJSON:
		return JSONCodec, nil
	case SerializeRocketMQ:
		return RocketMQCodec, nil
	case SerializeMsgpack:
		return MsgpackCodec, nil
	}
	return nil, fmt.Errorf("%w: %d", ErrUnknownSerializeType, uint8(t))
}

func badHeader(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadHeader}, args...)...)
}
