package protocol

import (
	"bytes"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// encodeExtSeed flattens a map into the fuzz input form: key NUL value NUL,
// keys sorted.
func encodeExtSeed(ext map[string]string) []byte {
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(ext[k])
		b.WriteByte(0)
	}
	return b.Bytes()
}

func decodeExtSeed(data []byte) map[string]string {
	parts := bytes.Split(data, []byte{0})
	ext := make(map[string]string, len(parts)/2)
	for i := 0; i+1 < len(parts); i += 2 {
		ext[string(parts[i])] = string(parts[i+1])
	}
	return ext
}

// FuzzExtFields feeds one fuzzed extFields map to every header's FromExt.
// Properties: no panic; an error is a *FieldError; a header that decodes
// re-encodes to a map that decodes to the same header.
func FuzzExtFields(f *testing.F) {
	for _, name := range goldenFiles(f) {
		f.Add(encodeExtSeed(loadGolden(f, name).ExtFields))
	}
	for _, tc := range headerCases() {
		f.Add(encodeExtSeed(Ext(tc.sample)))
	}
	f.Add([]byte("queueId\x00-0\x00offset\x00+9223372036854775807\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ext := decodeExtSeed(data)
		for _, tc := range headerCases() {
			h := tc.empty()
			err := h.FromExt(ext)
			if err != nil {
				var fe *FieldError
				require.ErrorAs(t, err, &fe, tc.name)
				continue
			}
			h2 := tc.empty()
			require.NoError(t, h2.FromExt(Ext(h)), tc.name)
			require.Equal(t, h, h2, tc.name)
		}
		for _, code := range []int16{SendMessage, SendMessageV2, SendBatchMessage} {
			_, _ = DecodeSendMessageRequestHeader(code, ext)
		}
		// A send answer read from pairs reads as from the map.
		var kv []string
		for k, v := range ext {
			kv = append(kv, k, v)
		}
		var fromMap, fromPairs SendMessageResponseHeader
		errMap, errPairs := fromMap.FromExt(ext), fromPairs.FromExtPairs(ExtPairsOf(kv...))
		require.Equal(t, errMap == nil, errPairs == nil, "%v / %v", errMap, errPairs)
		if errMap == nil {
			require.Equal(t, fromMap, fromPairs)
		}
		// And so do a pull and its answer.
		var pullMap, pullPairs PullMessageRequestHeader
		errMap, errPairs = pullMap.FromExt(ext), pullPairs.FromExtPairs(ExtPairsOf(kv...))
		require.Equal(t, errMap == nil, errPairs == nil, "%v / %v", errMap, errPairs)
		if errMap == nil {
			require.Equal(t, pullMap, pullPairs)
		}
		var ansMap, ansPairs PullMessageResponseHeader
		errMap, errPairs = ansMap.FromExt(ext), ansPairs.FromExtPairs(ExtPairsOf(kv...))
		require.Equal(t, errMap == nil, errPairs == nil, "%v / %v", errMap, errPairs)
		if errMap == nil {
			require.Equal(t, ansMap, ansPairs)
		}
	})
}

// FuzzAtoiShort: the fast path of a header's numbers agrees with
// strconv.ParseInt wherever it answers, and answers every plain decimal
// of up to 18 digits.
func FuzzAtoiShort(f *testing.F) {
	for _, s := range []string{"0", "-1", "7", "-", "", "+5", "1_0", "123456789012345678", "-123456789012345678",
		"1234567890123456789", "9223372036854775807", "-9223372036854775808", "00042", "--1", "1-", " 1", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := atoiShort(s)
		want, err := strconv.ParseInt(s, 10, 64)
		if ok {
			require.NoError(t, err, "%q", s)
			require.Equal(t, want, n, "%q", s)
			return
		}
		digits := strings.TrimPrefix(s, "-")
		plain := digits != "" && len(digits) <= 18 && strings.Trim(digits, "0123456789") == ""
		require.False(t, plain, "%q is a plain decimal the fast path declined", s)
	})
}

// FuzzSendHeaderPairs: the one-pass read of a send header's pairs
// (fromPairsUsual) takes exactly the headers the reader by key takes,
// and reads them the same.
func FuzzSendHeaderPairs(f *testing.F) {
	maxRe := int32(16)
	usual := []SendMessageRequestHeaderV2{
		{ProducerGroup: "pg", Topic: "t", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 3,
			BornTimestamp: 1764620000000, Properties: "UNIQ_KEY\x01k\x02WAIT\x01true\x02", BrokerName: "b"},
		{ProducerGroup: "pg", Topic: "%RETRY%g", QueueID: -1, SysFlag: 4, Flag: -7, ReconsumeTimes: 2, UnitMode: true,
			MaxReconsumeTimes: &maxRe, Batch: true},
	}
	for _, h := range usual {
		f.Add(encodeExtSeed(Ext(&h)))
	}
	f.Add([]byte("a\x00g\x00b\x00t\x00c\x00d\x00d\x00+4\x00e\x001\x00f\x000\x00g\x001\x00h\x000\x00"))
	f.Add([]byte("a\x00g\x00b\x00t\x00c\x00d\x00d\x004\x00e\x001\x00f\x000\x00g\x001\x00h\x000\x00k\x00TRUE\x00"))
	f.Add([]byte("a\x00g\x00b\x00t\x00d\x004\x00e\x001\x00f\x000\x00g\x001\x00h\x000\x00"))
	f.Add([]byte("a\x00g\x00b\x00t\x00c\x00d\x00d\x004\x00e\x002147483648\x00f\x000\x00g\x001\x00h\x000\x00b\x00u\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parts := bytes.Split(data, []byte{0})
		var kv []string
		for i := 0; i+1 < len(parts); i += 2 {
			kv = append(kv, string(parts[i]), string(parts[i+1]))
		}
		pairs := ExtPairsOf(kv...)
		var fast SendMessageRequestHeaderV2
		usual := fast.fromPairsUsual(pairs)
		var slow SendMessageRequestHeaderV2
		r := extReader{header: sendKeysShort.header}
		r.readLetters(pairs)
		err := (*SendMessageRequestHeader)(&slow).read(&r, &sendKeysShort)
		if usual {
			require.NoError(t, err, "read in one pass, refused by key: %q", kv)
			require.Equal(t, slow, fast)
			return
		}
		require.Zero(t, fast, "declined, yet set")
		require.Error(t, err, "declined a header the reader takes: %q", kv)
	})
}
