package remoting

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

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
