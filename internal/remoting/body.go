package remoting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// EncodeBody marshals a body that is not a message record in the family of
// the request's header codec (DESIGN.md): JSON for JSON and ROCKETMQ
// requests, msgpack for msgpack ones. The msgpack form uses the JSON field
// names, so both decode into the same Go types.
func EncodeBody(st SerializeType, v any) ([]byte, error) {
	if st != SerializeMsgpack {
		return json.Marshal(v)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("json")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeBody unmarshals a body written by EncodeBody (or by a RocketMQ
// client, for JSON) into v.
func DecodeBody(st SerializeType, b []byte, v any) error { return DecodeBodyMax(st, b, v, 0) }

// DecodeBodyMax is DecodeBody for a body from a peer that may be hostile (a
// request to a server): it refuses a body with more than maxValues values
// in its arrays and maps (each element, each map entry), counted before
// anything is decoded; maxValues <= 0 counts nothing. Decoding allocates
// for each value what its Go type takes, whatever it takes on the wire: a
// heartbeat's consumer entry is about 100 bytes in Go and 1 in msgpack (an
// empty map), 3 in JSON ({}), so a 1 MiB heartbeat allocated 192 MiB.
func DecodeBodyMax(st SerializeType, b []byte, v any, maxValues int) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty body", ErrBadFrame)
	}
	if st != SerializeMsgpack {
		if maxValues > 0 && jsonValues(b, maxValues) > maxValues {
			return tooManyValues(maxValues)
		}
		return json.Unmarshal(b, v)
	}
	if err := checkMsgpackBody(b); err != nil {
		return err
	}
	if maxValues > 0 {
		if n, err := msgpackValues(b, maxValues); err != nil {
			return fmt.Errorf("%w: body: %w", ErrBadFrame, err)
		} else if n > maxValues {
			return tooManyValues(maxValues)
		}
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.SetCustomStructTag("json")
	return dec.Decode(v)
}

// checkMsgpackBody walks a msgpack body with the header codec's validator
// before it is decoded: every claimed map, array, string, bin and ext
// length must fit in the bytes left, nesting stops at msgpackMaxDepth, and
// nothing may follow the value (as for JSON).
// NB: the msgpack library allocates what an array header claims (4 billion
// elements for 5 bytes), so a body is never handed to it unchecked.
func checkMsgpackBody(b []byte) error {
	d := msgpackDecoders.Get().(*msgpackDecoder)
	d.r = sliceReader{b: b}
	err := d.skip(0)
	if err == nil && d.r.left() > 0 {
		err = fmt.Errorf("%d bytes after the value", d.r.left())
	}
	d.r = sliceReader{}
	msgpackDecoders.Put(d)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrBadHeader.Error()+": ")
		return fmt.Errorf("%w: body: %s", ErrBadFrame, msg)
	}
	return nil
}

func tooManyValues(max int) error {
	return fmt.Errorf("%w: body: more than %d values in its arrays and maps", ErrBadFrame, max)
}

// jsonValues counts, stopping past max, an upper bound of the values in a
// JSON document's arrays and maps: each opening bracket or brace (its
// first value) and each comma outside strings. The document need not be
// valid; json.Unmarshal checks that.
func jsonValues(b []byte, max int) int {
	n, inString := 0, false
	for i := 0; i < len(b) && n <= max; i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++ // NB: the escaped byte cannot end the string
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{' || c == ',':
			n++
		}
	}
	return n
}

// msgpackValues counts, stopping past max, the values in a msgpack
// document's arrays and maps: the sum of their headers' lengths (a map's
// entry counts once). It reads the items one after another, containers'
// headers included, without recursion. REQUIRES: checkMsgpackBody(b)
// passed; it still never reads past b.
func msgpackValues(b []byte, max int) (int, error) {
	n := 0
	for i := 0; i < len(b) && n <= max; {
		c := b[i]
		i++
		size := func(w int) (int, bool) { // a w-byte big-endian length at i
			if i+w > len(b) {
				return 0, false
			}
			v := 0
			for _, x := range b[i : i+w] {
				v = v<<8 | int(x)
			}
			i += w
			return v, true
		}
		var l int
		ok := true
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3: // fixint, nil, bool
		case c <= 0x8f: // fixmap
			n += int(c & 0x0f)
		case c <= 0x9f: // fixarray
			n += int(c & 0x0f)
		case c <= 0xbf: // fixstr
			i += int(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			l, ok = size(1)
			i += l
		case c == 0xc5 || c == 0xda: // bin16, str16
			l, ok = size(2)
			i += l
		case c == 0xc6 || c == 0xdb: // bin32, str32
			l, ok = size(4)
			i += l
		case c >= 0xc7 && c <= 0xc9: // ext8, ext16, ext32: length, type, data
			l, ok = size(1 << (c - 0xc7))
			i += 1 + l
		case c == 0xca || c == 0xd2 || c == 0xce: // float32, int32, uint32
			i += 4
		case c == 0xcb || c == 0xd3 || c == 0xcf: // float64, int64, uint64
			i += 8
		case c == 0xcc || c == 0xd0: // uint8, int8
			i++
		case c == 0xcd || c == 0xd1: // uint16, int16
			i += 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1..16: type, data
			i += 1 + 1<<(c-0xd4)
		case c == 0xdc || c == 0xde: // array16, map16
			l, ok = size(2)
			n += l
		case c == 0xdd || c == 0xdf: // array32, map32
			l, ok = size(4)
			n += l
		default: // 0xc1: never used
			return n, fmt.Errorf("msgpack: byte 0x%x at %d", c, i-1)
		}
		if !ok {
			return n, fmt.Errorf("msgpack: length past the end at %d", i)
		}
	}
	return n, nil
}
