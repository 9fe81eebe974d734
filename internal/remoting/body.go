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
func DecodeBody(st SerializeType, b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty body", ErrBadFrame)
	}
	if st != SerializeMsgpack {
		return json.Unmarshal(b, v)
	}
	if err := checkMsgpackBody(b); err != nil {
		return err
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
