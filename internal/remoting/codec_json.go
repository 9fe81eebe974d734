package remoting

import (
	"strconv"
	"unicode/utf8"

	"github.com/sluicemq/sluice/internal/protocol"
)

// jsonCodec is serialize type 0 (spec §1.3): one JSON object with the keys
// code, language (the enum name), version, opaque, flag, remark and
// extFields. Lenient in, strict out: the decoder reads what the Java broker
// reads (numbers, booleans and null as extFields values or remark, unknown
// keys such as Java's serializeTypeCurrentRPC ignored, a code outside
// int16 reported as a CodeRangeError; see jsonDecoder in
// codec_json_decode.go, hand-written); the encoder writes extFields values
// as strings only, and omits an empty remark and empty extFields, as the
// captured Java-style responses do.
type jsonCodec struct{}

func (jsonCodec) AppendHeader(dst []byte, h *Header) ([]byte, error) {
	h = withExtMap(h)
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(h.Code), 10)
	dst = append(dst, `,"language":"`...)
	dst = append(dst, languageName(h.Language)...)
	dst = append(dst, `","version":`...)
	dst = strconv.AppendInt(dst, int64(h.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(h.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(h.Flag), 10)
	if h.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = appendJSONString(dst, h.Remark)
	}
	if len(h.ExtFields) > 0 {
		dst = append(dst, `,"extFields":{`...)
		first := true
		for k, v := range h.ExtFields {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

func (jsonCodec) DecodeHeader(src []byte, h *Header) error { return decodeJSONHeader(src, h) }

// languageName is the wire name of l; unknown codes travel as "OTHER" so
// that every peer can read them.
func languageName(l protocol.LanguageCode) string {
	if l.Valid() {
		return l.String()
	}
	return protocol.LanguageOther.String()
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does, so the output always parses.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
