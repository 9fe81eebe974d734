package remoting

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

const fuzzMaxFrame = 64 << 10

// FuzzFrameReader feeds a byte stream, split in two pieces at a fuzzed
// point, to the frame reader the server uses: the second piece arrives when
// the reader first needs more bytes than the first holds, as with
// netpoll's blocking reads. Properties: no panic; the frames read are
// exactly those DecodeFrame finds in the whole input; reading allocates
// nothing near a claimed length beyond the cap.
//
// NB: the source is plain bytes, not a netpoll LinkBuffer, whose pooled
// nodes make coverage nondeterministic and drown the fuzzer in
// minimization; TestReadFrame_EverySplit and TestReadFrame_Garbage run the
// same reader over a LinkBuffer.
func FuzzFrameReader(f *testing.F) {
	for _, name := range goldenFiles(f) {
		b := loadFrame(f, name)
		f.Add(b, uint16(len(b)/2))
		f.Add(append(append([]byte(nil), b...), b[:9]...), uint16(3))
	}
	for _, st := range serializeTypes {
		b, err := EncodeFrame(sampleCommand(st, []byte("body")))
		require.NoError(f, err)
		f.Add(b, uint16(5))
	}
	f.Add(rawFrame(16<<20+1, 0, 100, nil), uint16(2))
	f.Add(rawFrame(20, 9, 4, nil), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		cut := int(split) % (len(data) + 1)
		var got []*Command
		var err error
		n := bytesAllocated(func() { got, err = readPieces(data, cut, fuzzMaxFrame) })
		require.Less(t, n, uint64(8*len(data)+4*fuzzMaxFrame+(1<<20)), "allocated %d for %d input bytes", n, len(data))

		var want []*Command
		rest := data
		var werr error
		for len(rest) > 0 {
			c, used, e := DecodeFrame(rest, fuzzMaxFrame)
			if e != nil {
				werr = e
				break
			}
			want = append(want, c)
			rest = rest[used:]
		}
		require.Equal(t, want, got)
		require.Equal(t, werr == nil, err == nil, "DecodeFrame %v, reader %v", werr, err)
		if werr != nil && badFrameReason(werr) == "" {
			require.ErrorIs(t, werr, ErrShortFrame)
		}
	})
}

// fuzzHeader checks one codec: no panic; a header that decodes re-encodes
// and decodes to the same Header; and the other codecs carry it unchanged
// (when it is valid for them: the JSON codec replaces invalid UTF-8).
// extra, if set, sees every input with its decode error.
func fuzzHeader(f *testing.F, codec HeaderCodec, seeds [][]byte, extra func(*testing.T, []byte, *Header, error)) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Header
		err := codec.DecodeHeader(data, &h)
		if extra != nil {
			extra(t, data, &h, err)
		}
		if err != nil {
			return
		}
		b, err := codec.AppendHeader(nil, &h)
		require.NoError(t, err)
		var again Header
		require.NoError(t, codec.DecodeHeader(b, &again))
		require.Equal(t, normal(h), normal(again))

		for _, other := range []HeaderCodec{MsgpackCodec, RocketMQCodec} {
			b, err := other.AppendHeader(nil, &h)
			if err != nil {
				continue // e.g. an extFields key over 32 KiB for ROCKETMQ
			}
			var h2 Header
			require.NoError(t, other.DecodeHeader(b, &h2))
			require.Equal(t, normal(h), normal(h2))
		}
	})
}

func headerSeeds(t testing.TB, codec HeaderCodec) [][]byte {
	var seeds [][]byte
	for _, name := range goldenFiles(t) {
		var h Header
		require.NoError(t, JSONCodec.DecodeHeader(goldenHeaderBytes(t, name), &h))
		b, err := codec.AppendHeader(nil, &h)
		require.NoError(t, err)
		seeds = append(seeds, b)
	}
	for _, h := range sampleHeaders() {
		b, err := codec.AppendHeader(nil, &h)
		require.NoError(t, err)
		seeds = append(seeds, b)
	}
	return seeds
}

func FuzzHeaderJSON(f *testing.F) {
	seeds := headerSeeds(f, JSONCodec)
	for _, name := range goldenFiles(f) {
		seeds = append(seeds, goldenHeaderBytes(f, name)) // the client's own bytes
	}
	for _, name := range lenientFiles(f) {
		seeds = append(seeds, goldenHeaderBytesIn(f, lenientDir, name))
	}
	seeds = append(seeds, []byte(`{"code":1,"remark":null,"extFields":null,"x":[{"y":1}]}`), []byte(`null`),
		[]byte(`{"c\u006fde":-0,"remark":"\ud83d\ude00\ud800x\u00e9\/","extFields":{"a":null,"a":"2"},"n":-1.5e+3}`),
		[]byte(`{"code":99999,"opaque":7,"remark":12.5e-1,"extFields":{"n":-0.0E+1,"b":true,"z":null,"o":{ "k" : [1, "\u00e9 x", {}] }}}`))
	fuzzHeader(f, JSONCodec, seeds, checkAgainstEncodingJSON)
}

func FuzzHeaderRocketMQ(f *testing.F) {
	fuzzHeader(f, RocketMQCodec, headerSeeds(f, RocketMQCodec), nil)
}

func FuzzHeaderMsgpack(f *testing.F) {
	seeds := headerSeeds(f, MsgpackCodec)
	seeds = append(seeds, []byte{0x81, 0xa1, 'x', 0x91, 0x91, 0x01}, []byte{0x81, 0xa4, 'c', 'o', 'd', 'e', 0xd1, 0x01, 0x00})
	fuzzHeader(f, MsgpackCodec, seeds, nil)
}

// checkAgainstEncodingJSON: whatever the hand-written JSON decoder
// accepts (or reads but for a code outside int16) is valid JSON, and
// encoding/json reads the same values from it, remark and extFields values
// read as the Java broker reads them (see jsonDecoder).
func checkAgainstEncodingJSON(t *testing.T, data []byte, h *Header, err error) {
	var wide *CodeRangeError
	if err != nil && !errors.As(err, &wide) {
		return
	}
	require.True(t, json.Valid(data), "accepted invalid JSON")
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &top))
	integer := func(key string, got int64) {
		var v *int64
		if raw, ok := top[key]; ok {
			require.NoError(t, json.Unmarshal(raw, &v), key)
		}
		if v == nil {
			require.Zero(t, got, key)
			return
		}
		require.Equal(t, *v, got, key)
	}
	if wide != nil {
		integer("code", int64(wide.Code))
		require.NotEqual(t, int64(int16(wide.Code)), int64(wide.Code))
		require.Zero(t, h.Code)
	} else {
		integer("code", int64(h.Code))
	}
	integer("version", int64(h.Version))
	integer("opaque", int64(h.Opaque))
	integer("flag", int64(h.Flag))
	remark, _ := javaText(t, top["remark"])
	require.Equal(t, remark, h.Remark)
	var lang *string
	if raw, ok := top["language"]; ok {
		require.NoError(t, json.Unmarshal(raw, &lang))
	}
	if lang == nil {
		require.Equal(t, protocol.LanguageOther, h.Language)
	} else {
		want, _ := protocol.ParseLanguage(*lang)
		require.Equal(t, want, h.Language)
	}
	var ext map[string]json.RawMessage
	if raw, ok := top["extFields"]; ok {
		require.NoError(t, json.Unmarshal(raw, &ext))
	}
	want := map[string]string{}
	for k, raw := range ext {
		if v, ok := javaText(t, raw); ok {
			want[k] = v
		}
	}
	if len(want) == 0 {
		require.Nil(t, h.ExtFields)
	} else {
		require.Equal(t, want, h.ExtFields)
	}
}

// javaText is the oracle for jsonDecoder.text: how fastjson reads a JSON
// value into a String, by encoding/json; ok is false for null or nothing.
func javaText(t *testing.T, raw json.RawMessage) (v string, ok bool) {
	switch {
	case raw == nil || string(raw) == "null":
		return "", false
	case raw[0] == '"':
		require.NoError(t, json.Unmarshal(raw, &v))
		return v, true
	}
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, raw))
	return strings.ToValidUTF8(b.String(), "\uFFFD"), true
}
