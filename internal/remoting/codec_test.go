package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/internal/protocol"
)

func codecs() map[string]HeaderCodec {
	return map[string]HeaderCodec{"json": JSONCodec, "rocketmq": RocketMQCodec, "msgpack": MsgpackCodec}
}

func TestCodecs_RoundTrip(t *testing.T) {
	headers := sampleHeaders()
	headers["many"] = manyExt(MaxExtFields)
	for cname, codec := range codecs() {
		for hname, h := range headers {
			t.Run(cname+"/"+hname, func(t *testing.T) {
				b, err := codec.AppendHeader([]byte("prefix"), &h)
				require.NoError(t, err)
				require.Equal(t, "prefix", string(b[:6]), "appends")
				var got Header
				got.Remark = "dirty"
				got.ExtFields = map[string]string{"dirty": "x"}
				require.NoError(t, codec.DecodeHeader(b[6:], &got))
				require.Equal(t, h, normal(got))
				// NB: the decoded strings are copies: the reader's buffer
				// they came from is released and reused.
				for i := range b {
					b[i] = 'X'
				}
				require.Equal(t, h, normal(got), "decoded header aliases its input")
			})
		}
	}
}

func TestCodecFor(t *testing.T) {
	for _, st := range serializeTypes {
		c, err := CodecFor(st)
		require.NoError(t, err)
		require.NotNil(t, c)
	}
	_, err := CodecFor(3)
	require.ErrorIs(t, err, ErrUnknownSerializeType)
	require.Equal(t, "MSGPACK", SerializeMsgpack.String())
	require.Equal(t, "SerializeType(9)", SerializeType(9).String())
}

// TestCodecs_TooManyExtFields: one entry over MaxExtFields is refused.
func TestCodecs_TooManyExtFields(t *testing.T) {
	h := manyExt(MaxExtFields + 1)
	for cname, codec := range codecs() {
		b, err := codec.AppendHeader(nil, &h)
		require.NoError(t, err)
		require.ErrorIs(t, codec.DecodeHeader(b, new(Header)), ErrBadHeader, cname)
	}
}

// TestCodecs_UnknownLanguage: names and bytes outside the table decode as
// OTHER in every codec, and an unknown code is written as OTHER.
func TestCodecs_UnknownLanguage(t *testing.T) {
	h := Header{Code: 1, Language: 200}
	for cname, codec := range codecs() {
		b, err := codec.AppendHeader(nil, &h)
		require.NoError(t, err)
		var got Header
		require.NoError(t, codec.DecodeHeader(b, &got))
		require.Equal(t, protocol.LanguageOther, got.Language, cname)
	}
	var got Header
	require.NoError(t, JSONCodec.DecodeHeader([]byte(`{"code":1,"language":"COBOL"}`), &got))
	require.Equal(t, protocol.LanguageOther, got.Language)
	require.NoError(t, JSONCodec.DecodeHeader([]byte(`{"code":1}`), &got))
	require.Equal(t, protocol.LanguageOther, got.Language, "absent language")
}

func TestJSON_Decode(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Header
	}{
		{"java response with unknown key",
			`{"code":0,"extFields":{"queueId":"1"},"flag":1,"language":"JAVA","opaque":2,"serializeTypeCurrentRPC":"JSON","version":409}`,
			Header{Code: 0, Language: protocol.LanguageJava, Version: 409, Opaque: 2, Flag: 1, ExtFields: map[string]string{"queueId": "1"}}},
		{"null remark and extFields",
			`{"code":3,"language":"GO","remark":null,"extFields":null}`,
			Header{Code: 3, Language: protocol.LanguageGo}},
		{"empty extFields is nil",
			` {"code":34,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{}}`,
			Header{Code: 34, Language: protocol.LanguageGo, Version: 317, Opaque: 7}},
		{"nested unknown value",
			`{"code":1,"language":"GO","x":{"a":[1,2,{"b":null}]},"y":[true]}`,
			Header{Code: 1, Language: protocol.LanguageGo}},
		// As the Java broker reads them (fastjson into a HashMap<String,
		// String>): other clients send numbers, booleans and nulls.
		{"issue 14: a Node client's send",
			`{"code":10,"language":"NODE","version":317,"opaque":7,"flag":0,"remark":null,"extFields":{"topic":"t","queueId":0,"unitMode":false,"defaultTopicQueueNums":4,"bornTimestamp":1764590000000}}`,
			Header{Code: 10, Language: protocol.LanguageOther, Version: 317, Opaque: 7, ExtFields: map[string]string{
				"topic": "t", "queueId": "0", "unitMode": "false", "defaultTopicQueueNums": "4", "bornTimestamp": "1764590000000"}}},
		{"numbers keep their text",
			`{"extFields":{"a":-0,"b":1.50,"c":1e3,"d":-2.5E-7,"e":123456789012345678901234567890,"f":true}}`,
			Header{Language: protocol.LanguageOther, ExtFields: map[string]string{
				"a": "-0", "b": "1.50", "c": "1e3", "d": "-2.5E-7", "e": "123456789012345678901234567890", "f": "true"}}},
		{"null is absent, also after a value",
			`{"extFields":{"a":null,"b":"1","b":null,"c":"","d":null,"d":"2"}}`,
			Header{Language: protocol.LanguageOther, ExtFields: map[string]string{"c": "", "d": "2"}}},
		{"only nulls",
			`{"extFields":{"a":null}}`,
			Header{Language: protocol.LanguageOther}},
		{"objects and arrays as compact JSON text",
			`{"extFields":{"o":{ "k" : [1, "a b", {}] , "s":"\" }"},"a":[ ]}}`,
			Header{Language: protocol.LanguageOther, ExtFields: map[string]string{"o": `{"k":[1,"a b",{}],"s":"\" }"}`, "a": "[]"}}},
		{"remark of any value",
			`{"remark":42}`,
			Header{Language: protocol.LanguageOther, Remark: "42"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Header
			require.NoError(t, JSONCodec.DecodeHeader([]byte(tc.in), &got))
			require.Equal(t, tc.want, got)
		})
	}
}

func TestJSON_DecodeErrors(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `"x"`, `{`, `{"code":"10"}`, `{"code":2147483648}`, `{"opaque":1.5}`,
		`{"extFields":[]}`, `{"extFields":{"a":tru}}`, `{"extFields":{"a":1.}}`, `{"extFields":{"a":{"b"}}}`,
		`{"code":1}x`, `{"code":99999}x`, `{"code":99999,"extFields":{"a":01}}`,
	} {
		var h Header
		require.ErrorIs(t, JSONCodec.DecodeHeader([]byte(in), &h), ErrBadHeader, in)
	}
}

// TestJSON_CodeOutOfRange: Java reads the code as an int, so a code past
// int16 is a CodeRangeError (not garbage) with the rest of the header read.
func TestJSON_CodeOutOfRange(t *testing.T) {
	for in, code := range map[string]int32{
		`{"code":99999,"opaque":7,"flag":2,"extFields":{"a":1}}`:           99999,
		`{"code":32768,"opaque":7,"flag":2,"extFields":{"a":1}}`:           32768,
		`{"opaque":7,"code":-2147483648,"flag":2,"extFields":{"a":1}}`:     -2147483648,
		`{"code":10,"code":70000,"opaque":7,"flag":2,"extFields":{"a":1}}`: 70000,
	} {
		var h Header
		err := JSONCodec.DecodeHeader([]byte(in), &h)
		var wide *CodeRangeError
		require.ErrorAs(t, err, &wide, in)
		require.NotErrorIs(t, err, ErrBadHeader)
		require.Equal(t, code, wide.Code)
		require.Equal(t, Header{Language: protocol.LanguageOther, Opaque: 7, Flag: FlagOneway,
			ExtFields: map[string]string{"a": "1"}}, h)
	}
	var h Header
	require.NoError(t, JSONCodec.DecodeHeader([]byte(`{"code":70000,"code":10}`), &h), "a later code replaces it")
	require.Equal(t, int16(10), h.Code)
}

func TestJSON_Encode(t *testing.T) {
	h := Header{Code: 0, Language: protocol.LanguageGo, Version: 409, Opaque: 2, Flag: 1}
	b, err := JSONCodec.AppendHeader(nil, &h)
	require.NoError(t, err)
	require.Equal(t, `{"code":0,"language":"GO","version":409,"opaque":2,"flag":1}`, string(b),
		"empty remark and extFields are omitted")

	// Whatever we write, encoding/json reads back the same values.
	for name, h := range sampleHeaders() {
		b, err := JSONCodec.AppendHeader(nil, &h)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), name)
		require.Equal(t, languageName(h.Language), m["language"])
		if h.Remark != "" {
			require.Equal(t, h.Remark, m["remark"])
		}
	}

	// Invalid UTF-8 becomes U+FFFD, as encoding/json does.
	h = Header{Remark: "a\xffb", ExtFields: map[string]string{"\xfe": "\xc3"}}
	b, err = JSONCodec.AppendHeader(nil, &h)
	require.NoError(t, err)
	want, err := json.Marshal(map[string]string{"\xfe": "\xc3"})
	require.NoError(t, err)
	require.Contains(t, string(b), `"remark":"a\ufffdb"`)
	require.Contains(t, string(b), string(want[1:len(want)-1]))
	var got Header
	require.NoError(t, JSONCodec.DecodeHeader(b, &got))
	require.Equal(t, "a\uFFFDb", got.Remark)
}

func TestRocketMQ_Layout(t *testing.T) {
	h := Header{Code: 10, Language: protocol.LanguageGo, Version: 317, Opaque: 2, Flag: 1,
		Remark: "ok", ExtFields: map[string]string{"k": "vv"}}
	b, err := RocketMQCodec.AppendHeader(nil, &h)
	require.NoError(t, err)
	want := []byte{
		0, 10, // code
		9,     // language GO
		1, 61, // version 317
		0, 0, 0, 2, // opaque
		0, 0, 0, 1, // flag
		0, 0, 0, 2, 'o', 'k', // remark
		0, 0, 0, 9, // ext length
		0, 1, 'k', 0, 0, 0, 2, 'v', 'v',
	}
	require.Equal(t, want, b)

	// Empty remark and extFields are length 0 and decode as empty / nil.
	b, err = RocketMQCodec.AppendHeader(nil, &Header{Code: 1})
	require.NoError(t, err)
	require.Len(t, b, rocketmqFixedLen)
}

func TestRocketMQ_DecodeErrors(t *testing.T) {
	good, err := RocketMQCodec.AppendHeader(nil, &Header{Code: 10, Remark: "r", ExtFields: map[string]string{"key": "value"}})
	require.NoError(t, err)
	// Every strict prefix fails.
	for n := 0; n < len(good); n++ {
		require.ErrorIs(t, RocketMQCodec.DecodeHeader(good[:n], new(Header)), ErrBadHeader, "prefix %d", n)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"trailing":          append(append([]byte(nil), good...), 0),
		"negative remark":   mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[13:], 0xFFFFFFFF); return b }),
		"huge remark":       mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[13:], 0x7FFFFFFF); return b }),
		"negative key len":  mutate(func(b []byte) []byte { binary.BigEndian.PutUint16(b[22:], 0x8000); return b }),
		"key past ext":      mutate(func(b []byte) []byte { binary.BigEndian.PutUint16(b[22:], 100); return b }),
		"value past ext":    mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[27:], 100); return b }),
		"negative ext len":  mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[18:], 0xFFFFFFF0); return b }),
		"ext cut in keylen": mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[18:], 1); return b[:23] }),
	} {
		require.ErrorIs(t, RocketMQCodec.DecodeHeader(b, new(Header)), ErrBadHeader, name)
	}
	// A key longer than an int16 cannot be encoded.
	_, err = RocketMQCodec.AppendHeader(nil, &Header{ExtFields: map[string]string{strings.Repeat("k", 1<<15): ""}})
	require.ErrorIs(t, err, ErrBadHeader)
}

func TestMsgpack_KeysMatchJSON(t *testing.T) {
	for name, h := range sampleHeaders() {
		mb, err := MsgpackCodec.AppendHeader(nil, &h)
		require.NoError(t, err)
		jb, err := JSONCodec.AppendHeader(nil, &h)
		require.NoError(t, err)
		var fromMsgpack, fromJSON map[string]any
		require.NoError(t, msgpack.Unmarshal(mb, &fromMsgpack), name)
		require.NoError(t, json.Unmarshal(jb, &fromJSON), name)
		require.Equal(t, len(fromJSON), len(fromMsgpack), name)
		for k := range fromJSON {
			require.Contains(t, fromMsgpack, k, name)
		}
		require.Equal(t, fromJSON["language"], fromMsgpack["language"])
	}
}

func TestMsgpack_Decode(t *testing.T) {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return b
	}
	var h Header
	// Unknown keys of every kind are skipped; language may be an ordinal.
	require.NoError(t, MsgpackCodec.DecodeHeader(enc(map[string]any{
		"code": 11, "language": 9, "opaque": 5, "serializeTypeCurrentRPC": "MSGPACK",
		"nested": map[string]any{"a": []any{1, 2.5, nil, true, []byte("bin"), map[string]any{"x": "y"}}},
		"ext":    &msgpack.RawMessage{0xd4, 1, 2}, // fixext1
	}), &h))
	require.Equal(t, Header{Code: 11, Language: protocol.LanguageGo, Opaque: 5}, h)

	require.NoError(t, MsgpackCodec.DecodeHeader(enc(map[string]any{"remark": nil, "extFields": nil, "language": nil}), &h))
	require.Equal(t, Header{Language: protocol.LanguageOther}, h)

	for name, b := range map[string][]byte{
		"nil":             {0xc0},
		"array":           enc([]any{1, 2}),
		"code range":      enc(map[string]any{"code": 40000}),
		"opaque range":    enc(map[string]any{"opaque": int64(1) << 40}),
		"code type":       enc(map[string]any{"code": "10"}),
		"ext value type":  enc(map[string]any{"extFields": map[string]any{"queueId": 1}}),
		"non-string key":  {0x81, 0x01, 0x01},
		"trailing":        append(enc(map[string]any{"code": 1}), 0),
		"map claims 2^32": {0xdf, 0xff, 0xff, 0xff, 0xff},
		"str claims 4GiB": {0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"deep nesting":    append(append([]byte{0x81, 0xa1, 'x'}, []byte(strings.Repeat("\x91", 100))...), 0x01),
		"reserved code":   {0x81, 0xa1, 'x', 0xc1},
	} {
		require.ErrorIs(t, MsgpackCodec.DecodeHeader(b, &h), ErrBadHeader, name)
	}

	good, err := MsgpackCodec.AppendHeader(nil, &Header{Code: 10, Remark: "r", ExtFields: map[string]string{"key": "value"}})
	require.NoError(t, err)
	for n := 0; n < len(good); n++ {
		require.ErrorIs(t, MsgpackCodec.DecodeHeader(good[:n], &h), ErrBadHeader, "prefix %d", n)
	}
}

// TestMsgpack_HostileLengthsDoNotAllocate: a header that claims a huge
// string or map allocates nothing near the claim.
func TestMsgpack_HostileLengthsDoNotAllocate(t *testing.T) {
	for name, b := range map[string][]byte{
		"str32": {0x81, 0xa6, 'r', 'e', 'm', 'a', 'r', 'k', 0xdb, 0x7f, 0xff, 0xff, 0xff},
		"map32": {0x81, 0xa9, 'e', 'x', 't', 'F', 'i', 'e', 'l', 'd', 's', 0xdf, 0x00, 0xff, 0xff, 0xff},
		"bin32": {0x81, 0xa1, 'x', 0xc6, 0x7f, 0xff, 0xff, 0xff},
		"arr32": {0x81, 0xa1, 'x', 0xdd, 0x7f, 0xff, 0xff, 0xff},
	} {
		var h Header
		allocBytes := bytesAllocated(func() {
			require.ErrorIs(t, MsgpackCodec.DecodeHeader(b, &h), ErrBadHeader, name)
		})
		require.Less(t, allocBytes, uint64(64<<10), name)
	}
}

// TestCodecs_AgreeOnGolden: every captured header decoded from JSON and
// re-encoded with the other codecs decodes to the same Header.
func TestCodecs_AgreeOnGolden(t *testing.T) {
	for _, name := range goldenFiles(t) {
		var h Header
		require.NoError(t, JSONCodec.DecodeHeader(goldenHeaderBytes(t, name), &h), name)
		for cname, codec := range codecs() {
			b, err := codec.AppendHeader(nil, &h)
			require.NoError(t, err)
			var got Header
			require.NoError(t, codec.DecodeHeader(b, &got), cname)
			require.Equal(t, normal(h), normal(got), "%s via %s", name, cname)
		}
	}
}

// TestJSON_AgainstEncodingJSON runs tricky inputs through the hand-written
// decoder and checks what it accepts against encoding/json.
func TestJSON_AgainstEncodingJSON(t *testing.T) {
	accept := []string{
		`{}`,
		` { "code" : -0 , "flag":null,"opaque":2147483647,"version":-32768 } `,
		`{"remark":"\"\\\/\b\f\n\r\t\u0041\u00e9\u65e5\ud83d\ude00"}`,
		`{"remark":"lone \ud800 high, lone \udc00 low, pair after high \ud800\ud83d\ude00, two highs \ud800\ud800"}`,
		"{\"remark\":\"bad utf8 \xff\xfe and \xe6\x97 cut\"}",
		`{"c\u006fde":7,"language":"G\u004f"}`,
		`{"extFields":{"a":"1","a":"2","b":null,"":"","\u0000":"\u0000"}}`,
		`{"extFields":{"a":1,"b":-0.5e+3,"c":true,"d":false,"e":null,"f":{"x": [1, "\u00e9\"]"]},"g":[]}}`,
		`{"remark":-1,"extFields":{"a":null}}`, `{"remark":{ }}`, "{\"extFields\":{\"a\":[\"\xff\"]}}",
		`{"extFields":{"x":"1"},"extFields":null}`,
		`{"x":[1,-2.5e+10,0.0,1E-3,true,false,null,"s",{"a":[{}]},[]],"y":{}}`,
		`{"language":null,"remark":null,"code":null}`,
		`{"language":"martian"}`,
	}
	for _, in := range accept {
		var h Header
		require.NoError(t, JSONCodec.DecodeHeader([]byte(in), &h), in)
		checkAgainstEncodingJSON(t, []byte(in), &h, nil)
	}
	reject := []string{
		`{"code":1.0}`, `{"code":1e2}`, `{"code":2147483648}`, `{"code":"1"}`, `{"code":01}`, `{"code":-}`,
		`{"code":+1}`, `{"code":.5}`, `{"x":1.}`, `{"x":1e}`, `{"x":tru}`, `{"x":nul}`,
		`{"remark":"\x"}`, `{"remark":"\u12"}`, `{"remark":"\u12g4"}`, "{\"remark\":\"a\nb\"}",
		`{"remark":"unterminated}`, `{"extFields":{"a":1,}}`, `{"extFields":{"a":"1",}}`, `{"extFields":"x"}`,
		`{"extFields":{"a":[1,]}}`, `{"remark":tru}`,
		`{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":[1,]}`, `{"a":[1 2]}`, `{'a':1}`, `{a:1}`,
		`{}}`, `{} {}`, `{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	}
	for _, in := range reject {
		require.ErrorIs(t, JSONCodec.DecodeHeader([]byte(in), new(Header)), ErrBadHeader, in)
	}
}

// TestMsgpack_EncoderMatchesLibrary: the hand-written header encoder writes
// byte for byte what msgpack.Encoder writes, at every int and length
// boundary (one ext field, so that map order cannot differ).
func TestMsgpack_EncoderMatchesLibrary(t *testing.T) {
	library := func(h *Header) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		n := 5
		if h.Remark != "" {
			n++
		}
		if len(h.ExtFields) > 0 {
			n++
		}
		require.NoError(t, enc.EncodeMapLen(n))
		for _, kv := range []struct {
			k string
			v int64
		}{{"code", int64(h.Code)}} {
			require.NoError(t, enc.EncodeString(kv.k))
			require.NoError(t, enc.EncodeInt(kv.v))
		}
		require.NoError(t, enc.EncodeString("language"))
		require.NoError(t, enc.EncodeString(languageName(h.Language)))
		for _, kv := range []struct {
			k string
			v int64
		}{{"version", int64(h.Version)}, {"opaque", int64(h.Opaque)}, {"flag", int64(h.Flag)}} {
			require.NoError(t, enc.EncodeString(kv.k))
			require.NoError(t, enc.EncodeInt(kv.v))
		}
		if h.Remark != "" {
			require.NoError(t, enc.EncodeString("remark"))
			require.NoError(t, enc.EncodeString(h.Remark))
		}
		if len(h.ExtFields) > 0 {
			require.NoError(t, enc.EncodeString("extFields"))
			require.NoError(t, enc.EncodeMapLen(len(h.ExtFields)))
			for k, v := range h.ExtFields {
				require.NoError(t, enc.EncodeString(k))
				require.NoError(t, enc.EncodeString(v))
			}
		}
		return buf.Bytes()
	}
	ints := []int32{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxInt32, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32}
	lens := []int{0, 1, 31, 32, 255, 256, 65535, 65536}
	for i, v := range ints {
		l := lens[i%len(lens)]
		h := &Header{Code: int16(v), Version: int16(-v), Opaque: v, Flag: -v, Language: protocol.LanguageGo,
			Remark: strings.Repeat("r", l), ExtFields: map[string]string{strings.Repeat("k", lens[(i+3)%len(lens)]+1): strings.Repeat("v", l)}}
		got, err := MsgpackCodec.AppendHeader([]byte("prefix"), h)
		require.NoError(t, err)
		require.Equal(t, library(h), got[len("prefix"):], "value %d, length %d", v, l)
		var back Header
		require.NoError(t, MsgpackCodec.DecodeHeader(got[len("prefix"):], &back))
		require.Equal(t, *h, normal(back))
	}
	// Many ext fields (map16) round-trip.
	many := manyExt(40)
	b, err := MsgpackCodec.AppendHeader(nil, &many)
	require.NoError(t, err)
	var back Header
	require.NoError(t, MsgpackCodec.DecodeHeader(b, &back))
	require.Equal(t, many.ExtFields, back.ExtMap())
}

// TestCodecs_ExtWriter: a header whose ext is an ExtWriter (no map)
// decodes, in every codec, to the fields its map would hold; a writer that
// writes other than ExtLen fields is refused, not framed wrong.
func TestCodecs_ExtWriter(t *testing.T) {
	maxRe := int32(2)
	writers := []protocol.ExtWriter{
		&protocol.SendMessageRequestHeaderV2{ProducerGroup: "g", Topic: "T", QueueID: -1, BornTimestamp: -1 << 62,
			Properties: "UNIQ_KEY\x01AB\x02", MaxReconsumeTimes: &maxRe, BrokerName: "b"},
		&protocol.SendMessageResponseHeader{MsgID: "m1,m2", QueueID: 7, QueueOffset: 1<<63 - 1, Region: "r", TraceOn: true},
	}
	for cname, codec := range codecs() {
		for _, w := range writers {
			t.Run(fmt.Sprintf("%s/%T", cname, w), func(t *testing.T) {
				h := Header{Code: protocol.SendMessageV2, Opaque: 9, ExtWriter: w}
				b, err := codec.AppendHeader(nil, &h)
				require.NoError(t, err)
				var got Header
				require.NoError(t, codec.DecodeHeader(b, &got))
				require.Equal(t, protocol.ExtMap(w), got.ExtMap())
				require.Nil(t, got.ExtWriter)
			})
		}
	}
	_, err := MsgpackCodec.AppendHeader(nil, &Header{ExtWriter: lyingWriter{}})
	require.ErrorIs(t, err, ErrBadHeader)
}

type lyingWriter struct{}

func (lyingWriter) ExtLen() int                    { return 3 }
func (lyingWriter) WriteExt(e protocol.ExtEncoder) { e.Str("a", "b") }

// TestMsgpack_SendExtAsPairs: the msgpack codec decodes a send or pull
// request's custom header and any answer's as pairs (no map; a connection
// makes an answer's a map unless it answers a send or a pull), every
// other request's as a map; both read the same.
func TestMsgpack_SendExtAsPairs(t *testing.T) {
	ext := map[string]string{"a": "g", "b": "T", "e": "3"}
	for _, tc := range []struct {
		code  int16
		flag  int32
		pairs bool
	}{
		{protocol.SendMessageV2, 0, true},
		{protocol.SendBatchMessage, FlagOneway, true},
		{protocol.SendMessageV2, FlagResponse, true},
		{protocol.PullMessage, FlagResponse, true},
		{protocol.PullMessage, 0, true},
		{protocol.SendMessage, 0, false},
		{protocol.QueryConsumerOffset, 0, false},
	} {
		b, err := MsgpackCodec.AppendHeader(nil, &Header{Code: tc.code, Flag: tc.flag, ExtFields: ext})
		require.NoError(t, err)
		var h Header
		require.NoError(t, MsgpackCodec.DecodeHeader(b, &h))
		require.Equal(t, tc.pairs, h.ExtPairs.Valid(), "code %d flag %d", tc.code, tc.flag)
		require.Equal(t, !tc.pairs, h.ExtFields != nil, "code %d flag %d", tc.code, tc.flag)
		require.Equal(t, ext, h.ExtMap())
	}
	// NB: decided by the whole header, whatever the order of its keys.
	b := mpMapLen(nil, 3)
	b = mpMapLen(mpStr(b, "extFields"), 1)
	b = mpStr(mpStr(b, "a"), "g")
	b = mpInt(mpStr(b, "code"), protocol.SendMessageV2)
	b = mpInt(mpStr(b, "flag"), int64(FlagResponse))
	var late Header
	require.NoError(t, MsgpackCodec.DecodeHeader(b, &late))
	require.Equal(t, []string{"a", "g"}, late.ExtPairs.Strings(), "an answer, though its flag came last")
	require.Nil(t, late.ExtFields)

	h := Header{ExtPairs: protocol.ExtPairsOf("k", "1", "k", "2")}
	require.Equal(t, map[string]string{"k": "2"}, h.ExtMap(), "the last of a repeated key counts, as in a map")
}

// TestMsgpack_IntWidths: a number in any int or uint width decodes to its
// value (other encoders need not pick the smallest form), and one cut
// short is an error.
func TestMsgpack_IntWidths(t *testing.T) {
	forms := map[string][]byte{
		"fixint": {0x05}, "uint8": {0xcc, 5}, "uint16": {0xcd, 0, 5}, "uint32": {0xce, 0, 0, 0, 5},
		"uint64": {0xcf, 0, 0, 0, 0, 0, 0, 0, 5}, "int8": {0xd0, 5}, "int16": {0xd1, 0, 5},
		"int32": {0xd2, 0, 0, 0, 5}, "int64": {0xd3, 0, 0, 0, 0, 0, 0, 0, 5},
	}
	for name, v := range forms {
		for _, key := range []string{"code", "version", "opaque", "flag"} {
			b := append([]byte{0x81, 0xa0 | byte(len(key))}, key...)
			var h Header
			require.NoError(t, MsgpackCodec.DecodeHeader(append(b, v...), &h), "%s %s", name, key)
			// NB: key is the one field set.
			require.Equal(t, int64(5), int64(h.Code)+int64(h.Version)+int64(h.Opaque)+int64(h.Flag), "%s %s", name, key)
			for n := 1; n < len(v); n++ {
				require.ErrorIs(t, MsgpackCodec.DecodeHeader(append(b, v[:n]...), &h), ErrBadHeader, "%s %s cut to %d", name, key, n)
			}
		}
	}
	var h Header
	require.NoError(t, MsgpackCodec.DecodeHeader([]byte{0x81, 0xa6, 'o', 'p', 'a', 'q', 'u', 'e', 0xd2, 0xff, 0xff, 0xff, 0xfe}, &h))
	require.Equal(t, int32(-2), h.Opaque)
	require.NoError(t, MsgpackCodec.DecodeHeader([]byte{0x81, 0xa4, 'c', 'o', 'd', 'e', 0xd1, 0x80, 0x00}, &h))
	require.Equal(t, int16(math.MinInt16), h.Code)
	require.ErrorIs(t, MsgpackCodec.DecodeHeader([]byte{0x81, 0xa4, 'c', 'o', 'd', 'e', 0xce, 0x00, 0x01, 0x00, 0x00}, &h), ErrBadHeader)
}
