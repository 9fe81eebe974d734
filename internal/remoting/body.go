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
	n, err := checkMsgpackBody(b)
	if err != nil {
		return err
	}
	if maxValues > 0 && n > maxValues {
		return tooManyValues(maxValues)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.SetCustomStructTag("json")
	return dec.Decode(v)
}

// checkMsgpackBody walks a msgpack body with the header codec's validator
// before it is decoded, and returns the values in its arrays and maps
// (each element, each map entry): every claimed map, array, string, bin and
// ext length must fit in the bytes left, nesting stops at msgpackMaxDepth,
// and nothing may follow the value (as for JSON).
// NB: the msgpack library allocates what an array header claims (4 billion
// elements for 5 bytes), so a body is never handed to it unchecked.
func checkMsgpackBody(b []byte) (int, error) {
	d := msgpackDecoders.Get().(*msgpackDecoder)
	d.r, d.values = sliceReader{b: b}, 0
	err := d.skip(0)
	if err == nil && d.r.left() > 0 {
		err = fmt.Errorf("%d bytes after the value", d.r.left())
	}
	n := d.values
	d.r = sliceReader{}
	msgpackDecoders.Put(d)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrBadHeader.Error()+": ")
		return 0, fmt.Errorf("%w: body: %s", ErrBadFrame, msg)
	}
	return n, nil
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

// CheckMsgpack checks that b is one msgpack value whose every claimed
// length fits in the bytes left (checkMsgpackBody), for a caller about to
// hand b to the msgpack library, which allocates what an array header
// claims; it returns the values in b's arrays and maps.
func CheckMsgpack(b []byte) (int, error) { return checkMsgpackBody(b) }
