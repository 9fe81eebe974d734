package remoting

import (
	"encoding/binary"
	"math"

	"github.com/sluicemq/sluice/internal/protocol"
)

// rocketmqCodec is serialize type 1, RocketMQ's binary header (spec §1.5),
// big-endian:
//
//	code int16 | language byte | version int16 | opaque int32 | flag int32 |
//	remarkLen int32 | remark | extLen int32 |
//	extLen bytes of { keyLen int16 | key | valLen int32 | val }
//
// An empty remark or extFields is written as length 0. The decoder rejects
// negative lengths, lengths past the end, and trailing bytes.
type rocketmqCodec struct{}

const rocketmqFixedLen = 2 + 1 + 2 + 4 + 4 + 4 + 4 // 21

func (rocketmqCodec) AppendHeader(dst []byte, h *Header) ([]byte, error) {
	h = withExtMap(h)
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Code))
	dst = append(dst, byte(h.Language))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Flag))
	if len(h.Remark) > maxHeaderLen {
		return dst, badHeader("remark of %d bytes", len(h.Remark))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(h.Remark)))
	dst = append(dst, h.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for k, v := range h.ExtFields {
		if len(k) > math.MaxInt16 {
			return dst, badHeader("extFields key of %d bytes", len(k))
		}
		if len(v) > maxHeaderLen {
			return dst, badHeader("extFields value of %d bytes", len(v))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	extLen := len(dst) - lenAt - 4
	if extLen > maxHeaderLen {
		return dst, badHeader("extFields of %d bytes", extLen)
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(extLen))
	return dst, nil
}

func (rocketmqCodec) DecodeHeader(src []byte, h *Header) error {
	if len(src) < rocketmqFixedLen {
		return badHeader("ROCKETMQ header of %d bytes, need at least %d", len(src), rocketmqFixedLen)
	}
	lang := protocol.LanguageCode(src[2])
	if !lang.Valid() {
		lang = protocol.LanguageOther
	}
	*h = Header{
		Code:     int16(binary.BigEndian.Uint16(src)),
		Language: lang,
		Version:  int16(binary.BigEndian.Uint16(src[3:])),
		Opaque:   int32(binary.BigEndian.Uint32(src[5:])),
		Flag:     int32(binary.BigEndian.Uint32(src[9:])),
	}
	p := src[13:]
	remark, p, err := takeBytes32(p, "remark")
	if err != nil {
		return err
	}
	h.Remark = string(remark)
	var ext []byte
	ext, p, err = takeBytes32(p, "extFields")
	if err != nil {
		return err
	}
	if len(p) != 0 {
		return badHeader("%d trailing bytes after ROCKETMQ header", len(p))
	}
	if len(ext) == 0 {
		return nil
	}
	// Validate and count first, so the map is allocated once at its size.
	n := 0
	for p := ext; len(p) > 0; n++ {
		if n == MaxExtFields {
			return badHeader("more than %d extFields", MaxExtFields)
		}
		if _, _, p, err = nextEntry(p); err != nil {
			return err
		}
	}
	m := make(map[string]string, n)
	for p := ext; len(p) > 0; {
		var key, val []byte
		key, val, p, _ = nextEntry(p)
		m[string(key)] = string(val)
	}
	h.ExtFields = m
	return nil
}

// nextEntry splits one [keyLen int16][key][valLen int32][val] entry off p.
func nextEntry(p []byte) (key, val, rest []byte, err error) {
	if len(p) < 2 {
		return nil, nil, nil, badHeader("extFields entry cut at key length")
	}
	kl := int(int16(binary.BigEndian.Uint16(p)))
	if kl < 0 || kl > len(p)-2 {
		return nil, nil, nil, badHeader("extFields key length %d", kl)
	}
	key = p[2 : 2+kl]
	val, rest, err = takeBytes32(p[2+kl:], "extFields value")
	return key, val, rest, err
}

// takeBytes32 splits an int32-length-prefixed field off p.
func takeBytes32(p []byte, what string) (field, rest []byte, err error) {
	if len(p) < 4 {
		return nil, nil, badHeader("%s length cut short", what)
	}
	n := int64(int32(binary.BigEndian.Uint32(p)))
	if n < 0 || n > int64(len(p)-4) {
		return nil, nil, badHeader("%s length %d with %d bytes left", what, n, len(p)-4)
	}
	return p[4 : 4+n], p[4+n:], nil
}
