package remoting

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type bodySample struct {
	Names []string         `json:"names"`
	Sets  map[string][]int `json:"sets"`
}

func TestDecodeBody_MsgpackRoundTrip(t *testing.T) {
	in := bodySample{Names: []string{"a", "b"}, Sets: map[string][]int{"x": {1, 2, 3}}}
	b, err := EncodeBody(SerializeMsgpack, in)
	require.NoError(t, err)
	var out bodySample
	require.NoError(t, DecodeBody(SerializeMsgpack, b, &out))
	require.Equal(t, in, out)
}

// A msgpack body whose headers claim more than it holds is refused before
// the library sees it: the library allocates what an array header claims.
func TestDecodeBody_MsgpackClaimsBeyondBody(t *testing.T) {
	deep := append(bytes.Repeat([]byte{0x91}, msgpackMaxDepth+2), 0xc0)
	cases := map[string][]byte{
		"array32 of 4G":        {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0},
		"fuzz finding":         []byte("\x92\xdd\xdd\xdd\xdd\xddݜ\xd2\xea"),
		"map32 of 4G":          {0x81, 0xa4, 's', 'e', 't', 's', 0xdf, 0xff, 0xff, 0xff, 0xff},
		"str32 of 4G":          {0x81, 0xa5, 'n', 'a', 'm', 'e', 's', 0x91, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"bin32 of 4G":          {0xc6, 0xff, 0xff, 0xff, 0xff},
		"ext32 of 4G":          {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},
		"array16 past the end": {0x81, 0xa5, 'n', 'a', 'm', 'e', 's', 0xdc, 0x00, 0x10, 0xa1, 'a'},
		"nested too deep":      deep,
		"trailing bytes":       {0x80, 0xc0},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			var out bodySample
			err := DecodeBody(SerializeMsgpack, body, &out)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrBadFrame), "%v", err)
			require.Contains(t, err.Error(), "body")
			runtime.ReadMemStats(&ms)
			require.Less(t, ms.TotalAlloc-before, uint64(1<<20), "allocated for a claimed length")
		})
	}
}

// TestDecodeBodyMax: a body with more values in its arrays and maps than
// the bound is refused before decoding, in both codec families; one at the
// bound decodes. A megabyte of empty maps (one byte each in msgpack)
// decoded into 192 MiB of heartbeat entries.
func TestDecodeBodyMax(t *testing.T) {
	in := bodySample{Names: []string{"a", "b"}, Sets: map[string][]int{"x": {1, 2, 3}}} // 2 + 2 + 1 + 3 values
	for _, st := range []SerializeType{SerializeJSON, SerializeMsgpack} {
		b, err := EncodeBody(st, in)
		require.NoError(t, err)
		var out bodySample
		require.NoError(t, DecodeBodyMax(st, b, &out, 8), st)
		require.Equal(t, in, out)
		err = DecodeBodyMax(st, b, &out, 7)
		require.ErrorIs(t, err, ErrBadFrame, st)
		require.Contains(t, err.Error(), "more than 7 values")
	}
	const n = 1 << 20
	flood := map[SerializeType][]byte{
		SerializeMsgpack: append([]byte{0x81, 0xa5, 'n', 'a', 'm', 'e', 's', 0xdd, 0x00, 0x10, 0x00, 0x00}, bytes.Repeat([]byte{0x80}, n)...),
		SerializeJSON:    append(append([]byte(`{"names":[`), bytes.Repeat([]byte(`{},`), n-1)...), `{}]}`...),
	}
	for st, b := range flood {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		var out struct {
			Names []bodySample `json:"names"`
		}
		require.ErrorIs(t, DecodeBodyMax(st, b, &out, 1<<16), ErrBadFrame, st)
		runtime.ReadMemStats(&ms)
		require.Less(t, ms.TotalAlloc-before, uint64(1<<20), "%s: allocated before refusing", st)
	}
}

// TestMsgpackValues: checkMsgpackBody counts the values of a document
// holding every msgpack format (a miscounted skip would miscount) and
// refuses every cut of it.
func TestMsgpackValues(t *testing.T) {
	arr, m := make([]int, 20), map[string]int{}
	for i := range 20 {
		m[string(rune('a'+i))] = i
	}
	doc := map[string]any{
		"i8": int8(-100), "i16": int16(-1000), "i32": int32(-100000), "i64": int64(-1) << 40, "neg": -5, "pos": 5,
		"u8": uint8(200), "u16": uint16(60000), "u32": uint32(1) << 31, "u64": uint64(1) << 63,
		"f32": float32(1.5), "f64": 2.5, "nil": nil, "t": true, "f": false,
		"bin8": bytes.Repeat([]byte{1}, 10), "bin16": bytes.Repeat([]byte{1}, 300), "bin32": bytes.Repeat([]byte{1}, 70000),
		"str8": strings.Repeat("s", 40), "str16": strings.Repeat("s", 300), "str32": strings.Repeat("s", 70000),
		"time": time.Unix(1, 5), "time96": time.Unix(1<<40, 5), "arr16": arr, "map16": m,
	}
	b, err := EncodeBody(SerializeMsgpack, doc)
	require.NoError(t, err)
	got, err := checkMsgpackBody(b)
	require.NoError(t, err)
	require.Equal(t, len(doc)+20+20, got)
	for i := range b {
		_, err := checkMsgpackBody(b[:i])
		require.ErrorIs(t, err, ErrBadFrame, "cut at %d", i)
	}
}
