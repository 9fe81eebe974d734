package message

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// specBatch is the spec §6.6 example: "b1" without properties, "b2" with
// tag TB (Go style, trailing separator).
const specBatch = "00000018000000000000000000000000000000026231" + "0000" +
	"00000020000000000000000000000000000000026232" + "0008" + "54414753015442" + "02"

func collectBatch(body []byte) ([]BatchItem, error) {
	var items []BatchItem
	err := DecodeBatch(body, func(it BatchItem) error {
		items = append(items, it)
		return nil
	})
	return items, err
}

func TestDecodeBatch_SpecExample(t *testing.T) {
	body, err := hex.DecodeString(specBatch)
	require.NoError(t, err)
	items, err := collectBatch(body)
	require.NoError(t, err)
	require.Equal(t, []BatchItem{
		{Body: []byte("b1")},
		{Body: []byte("b2"), Properties: "TAGS\x01TB\x02"},
	}, items)
	out, err := AppendBatch(nil, items)
	require.NoError(t, err)
	require.Equal(t, body, out)
}

func TestAppendBatch(t *testing.T) {
	items := []BatchItem{
		{Flag: -1, Body: []byte("first"), Properties: "a\x01b"},
		{Flag: 7},
		{Body: make([]byte, 1000), Properties: strings.Repeat("p", MaxPropertiesLen)},
	}
	prefix := []byte("keep")
	out, err := AppendBatch(prefix, items)
	require.NoError(t, err)
	require.Equal(t, "keep", string(out[:4]))
	n := 0
	for _, it := range items {
		n += BatchItemSize(it)
	}
	require.Len(t, out, 4+n)
	got, err := collectBatch(out[4:])
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i := range items {
		require.Equal(t, items[i].Flag, got[i].Flag)
		require.Equal(t, string(items[i].Body), string(got[i].Body))
		require.Equal(t, items[i].Properties, got[i].Properties)
	}

	tooLong := []BatchItem{{Body: []byte("x")}, {Properties: strings.Repeat("p", MaxPropertiesLen+1)}}
	out, err = AppendBatch(prefix, tooLong)
	require.ErrorIs(t, err, ErrPropertiesTooLong)
	require.Contains(t, err.Error(), "batch item 1")
	require.Equal(t, "keep", string(out))
}

func TestDecodeBatch_Errors(t *testing.T) {
	valid, err := hex.DecodeString(specBatch)
	require.NoError(t, err)
	first := valid[:0x18]
	mod := func(b []byte, off int, v uint32) []byte {
		c := append([]byte(nil), b...)
		binary.BigEndian.PutUint32(c[off:], v)
		return c
	}
	tests := []struct {
		name string
		body []byte
		text string
	}{
		{"empty", nil, "no items"},
		{"short", first[:21], "21 bytes left"},
		{"totalsize-below-22", mod(first, 0, 21), "TOTALSIZE 21"},
		{"totalsize-negative", mod(first, 0, 0x80000000), "TOTALSIZE -2147483648"},
		{"totalsize-beyond", mod(first, 0, 0x19), "TOTALSIZE 25 outside 22..24"},
		{"totalsize-larger-than-fields", append(mod(first, 0, 0x19), 0), "add up to 24 bytes, TOTALSIZE is 25"},
		{"bodylength-negative", mod(first, 16, 0xFFFFFFFF), "BODYLENGTH -1"},
		{"bodylength-beyond", mod(first, 16, 3), "BODYLENGTH 3"},
		{"propslength-negative", append(append([]byte(nil), first[:22]...), 0x80, 0x00), "PROPERTIESLENGTH -32768"},
		{"propslength-beyond", append(append([]byte(nil), first[:22]...), 0x00, 0x01), "add up to 25"},
		{"trailing-garbage", append(append([]byte(nil), valid...), 0, 0, 0), "item 2 at byte 56"},
		{"trailing-zero-item", append(append([]byte(nil), valid...), make([]byte, 22)...), "item 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := DecodeBatch(tc.body, func(BatchItem) error { calls++; return nil })
			require.ErrorIs(t, err, ErrMalformedBatch)
			require.Contains(t, err.Error(), tc.text)
			require.Zero(t, calls, "fn never sees part of a bad batch")
		})
	}

	for n := 1; n < len(valid); n++ {
		if n == 0x18 {
			continue // a whole first item is a valid batch
		}
		_, err := collectBatch(valid[:n])
		require.ErrorIs(t, err, ErrMalformedBatch, "prefix %d", n)
	}

	// Non-zero MAGICCODE and BODYCRC are ignored, as Java does.
	items, err := collectBatch(mod(mod(first, 4, 0xDAA320A7), 8, 12345))
	require.NoError(t, err)
	require.Equal(t, "b1", string(items[0].Body))
}

func TestDecodeBatch_CallbackError(t *testing.T) {
	body, err := hex.DecodeString(specBatch)
	require.NoError(t, err)
	stop := errors.New("stop")
	calls := 0
	err = DecodeBatch(body, func(BatchItem) error { calls++; return stop })
	require.Equal(t, stop, err, "returned as is")
	require.Equal(t, 1, calls)
}

func TestDecodeBatch_GoldenSendBatch(t *testing.T) {
	f := readFrame(t, "04-send-batch-message.bin")
	require.Equal(t, 320, f.Code)
	require.Len(t, f.Body, 153)
	items, err := collectBatch(f.Body)
	require.NoError(t, err)
	require.Equal(t, []BatchItem{
		{Body: []byte("batch-1"), Properties: "TAGS\x01TagB\x02KEYS\x01bk-1\x02"},
		{Body: []byte("batch-2"), Properties: "TAGS\x01TagB\x02KEYS\x01bk-2\x02"},
		{Body: []byte("batch-3"), Properties: "TAGS\x01TagB\x02KEYS\x01bk-3\x02seq\x013\x02"},
	}, items)
	for _, it := range items {
		_, ok := PropertyValue(it.Properties, PropUniqKey)
		require.False(t, ok, "Go batch members carry no UNIQ_KEY")
	}
	out, err := AppendBatch(nil, items)
	require.NoError(t, err)
	require.Equal(t, f.Body, out)
}

// TestDecodeBatchItems_Suffix: the suffix pair is appended to every item's
// properties, after a separator when they lack one, and the items come out
// as DecodeBatch gives them otherwise.
func TestDecodeBatchItems_Suffix(t *testing.T) {
	body, err := AppendBatch(nil, []BatchItem{{Body: []byte("b1")}, {Body: []byte("b2"), Properties: "TAGS\x01TB\x02"},
		{Flag: 3, Body: []byte("b3"), Properties: "KEYS\x01k"}})
	require.NoError(t, err)
	items, err := DecodeBatchItems(body, "CLUSTER\x01c\x02")
	require.NoError(t, err)
	require.Equal(t, []BatchItem{
		{Body: []byte("b1"), Properties: "CLUSTER\x01c\x02"},
		{Body: []byte("b2"), Properties: "TAGS\x01TB\x02CLUSTER\x01c\x02"},
		{Flag: 3, Body: []byte("b3"), Properties: "KEYS\x01k\x02CLUSTER\x01c\x02"},
	}, items)
	plain, err := DecodeBatchItems(body, "")
	require.NoError(t, err)
	collected, err := collectBatch(body)
	require.NoError(t, err)
	require.Equal(t, collected, plain)
	_, err = DecodeBatchItems(body[:len(body)-1], "x")
	require.ErrorIs(t, err, ErrMalformedBatch)
}
