package message

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// reencodes checks that the decoded record rec encodes back to its bytes
// (BODYCRC aside unless crcOK). Records with IPv4-mapped IPv6 hosts are
// skipped: Encode stores those as IPv4, by design.
func reencodes(t *testing.T, rec []byte, r Record, crcOK bool) {
	if r.BornHost.Addr().Is4In6() || r.StoreHost.Addr().Is4In6() {
		return
	}
	m := r.Message()
	require.Equal(t, len(rec), m.EncodedSize())
	again := encodeT(t, &m, r.QueueOffset, r.PhysicalOffset)
	if !crcOK {
		copy(again[OffBodyCRC:OffBodyCRC+4], rec[OffBodyCRC:OffBodyCRC+4])
	}
	require.Equal(t, rec, again)
}

func FuzzDecodeMessage(f *testing.F) {
	for _, rec := range seedRecords(f) {
		f.Add(rec)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		d, derr := ReadDispatchInfo(data)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			require.ErrorIs(t, derr, ErrMalformed, "ReadDispatchInfo checks what Decode checks")
			return
		}
		require.NoError(t, derr)
		rec := data[:r.TotalSize]
		require.NoError(t, Validate(rec, r.PhysicalOffset, false))

		require.Equal(t, r.Topic, d.Topic)
		require.Equal(t, r.QueueID, d.QueueID)
		require.Equal(t, r.QueueOffset, d.QueueOffset)
		require.Equal(t, r.PhysicalOffset, d.PhysicalOffset)
		require.Equal(t, r.TotalSize, d.Size)
		require.Equal(t, r.SysFlag, d.SysFlag)
		require.Equal(t, r.StoreTimestamp, d.StoreTimestamp)
		tags, _ := PropertyValue(string(r.Properties), PropTags)
		require.Equal(t, TagsHashCode(tags), d.TagsCode)
		keys, _ := PropertyValueBytes(r.Properties, PropKeys)
		require.Equal(t, keys, d.Keys)
		uniq, _ := PropertyValueBytes(r.Properties, PropUniqKey)
		require.Equal(t, uniq, d.UniqKey)

		reencodes(t, rec, r, BodyCRC(r.Body) == r.BodyCRC)
	})
}

func FuzzValidate(f *testing.F) {
	for _, rec := range seedRecords(f) {
		r, err := Decode(rec)
		require.NoError(f, err)
		f.Add(rec, r.PhysicalOffset, true)
		f.Add(rec, r.PhysicalOffset, false)
		f.Add(rec, r.PhysicalOffset+1, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, at int64, checkCRC bool) {
		err := Validate(data, at, checkCRC)
		if err != nil {
			if !errorIsAny(err, ErrMalformed, ErrCRC) {
				t.Fatalf("error wraps neither ErrMalformed nor ErrCRC: %v", err)
			}
			return
		}
		r, err := Decode(data)
		require.NoError(t, err, "Validate accepted what Decode rejects")
		_, err = ReadDispatchInfo(data)
		require.NoError(t, err, "Validate accepted what ReadDispatchInfo rejects")
		require.Equal(t, at, r.PhysicalOffset)
		if checkCRC {
			require.Equal(t, BodyCRC(r.Body), r.BodyCRC)
		}
		reencodes(t, data[:r.TotalSize], r, checkCRC)
	})
}

func errorIsAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func FuzzProperties(f *testing.F) {
	f.Add(readFrame(f, "02-send-message.bin").ExtFields["properties"])
	f.Add(readFrame(f, "05-send-message-delay-level-3.bin").ExtFields["properties"])
	for _, rec := range seedRecords(f) {
		r, err := Decode(rec)
		require.NoError(f, err)
		f.Add(string(r.Properties))
	}
	for _, s := range []string{"WAIT\x01true\x02", "a\x01b\x02WAIT\x01true", "WAIT\x01true\x02a\x01b", "a\x01b\x02WAIT\x01true\x02c\x01d\x02", "a\x01b",
		"WAIT\x01true\x02CLUSTER\x01c\x02DELAY\x013\x02WAIT\x01false\x02", "TRAN_MSG\x01true\x02TIMER_DELIVER_MS\x0117\x02", "", "\x02", "\x02\x02a\x01b\x02\x02", "\x01a\x02", "a\x01", "a\x01b\x01c", "a\x01\x01", "标签\x01值\x02x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, props string) {
		m := ParseProperties(props)
		for name, value := range m {
			v, ok := PropertyValue(props, name)
			require.True(t, ok)
			require.Equal(t, value, v)
			require.NotEmpty(t, name)
			require.NotEmpty(t, value)
		}
		n := 0
		for name := range PropertiesSeq(props) {
			require.Contains(t, m, name)
			n++
		}
		require.GreaterOrEqual(t, n, len(m))

		// Parse, write, parse again: stable, and the written form is a fixed point.
		out := AppendProperties(nil, m)
		m2 := ParseProperties(string(out))
		require.Equal(t, m, m2)
		require.Equal(t, out, AppendProperties(nil, m2))
		require.False(t, bytes.HasSuffix(out, []byte{PropertySeparator}))

		// Editing agrees with the map view.
		for name := range m {
			want := maps.Clone(m)
			delete(want, name)
			require.Equal(t, want, ParseProperties(DeleteProperty(props, name)))
			break
		}
		set, err := SetProperty(props, "FUZZ", "v\x01w")
		require.NoError(t, err)
		want := maps.Clone(m)
		want["FUZZ"] = "v\x01w"
		require.Equal(t, want, ParseProperties(set))

		// The broker's one-scan reader agrees with PropertyValue, and its
		// one-scan rewrite with DeleteProperty then SetProperty, pair for
		// pair and in order.
		sp := ReadSendProperties(props)
		for _, c := range []struct {
			name, got string
			has       bool
		}{{PropWait, sp.Wait, sp.HasWait}, {PropDelay, sp.Delay, sp.HasDelay}, {PropTimerDeliverMS, sp.TimerDeliverMS, sp.HasTimerDeliverMS}} {
			v, ok := PropertyValue(props, c.name)
			require.Equal(t, ok, c.has, c.name)
			require.Equal(t, v, c.got, c.name)
		}
		v, _ := PropertyValue(props, PropTranMsg)
		require.Equal(t, v, sp.TranMsg)
		v, _ = PropertyValue(props, PropReplyToClient)
		require.Equal(t, v, sp.ReplyToClient)
		for _, cluster := range []string{"DefaultCluster", ""} {
			want, err := SetProperty(DeleteProperty(props, PropWait), PropCluster, cluster)
			if cluster == "" {
				require.Error(t, err)
				want = DeleteProperty(props, PropWait)
			}
			require.Equal(t, pairs(want), pairs(StoreProperties(props, cluster)), "cluster %q", cluster)
			// The cut from the scan's marks is the rewrite, byte for byte;
			// other properties than those read are rewritten.
			require.Equal(t, StoreProperties(props, cluster), sp.StoreProperties(props, cluster), "cluster %q", cluster)
			other := "KEYS\x01k\x02TAGS\x01t\x02U\x01v" + props[:len(props)/2]
			require.Equal(t, StoreProperties(other, cluster), sp.StoreProperties(other, cluster), "cluster %q", cluster)
		}
	})
}

func pairs(props string) [][2]string {
	var ps [][2]string
	for n, v := range PropertiesSeq(props) {
		ps = append(ps, [2]string{n, v})
	}
	return ps
}

func FuzzBatchBody(f *testing.F) {
	f.Add(readFrame(f, "04-send-batch-message.bin").Body)
	spec, err := hex.DecodeString(specBatch)
	require.NoError(f, err)
	f.Add(spec)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var items []BatchItem
		err := DecodeBatch(body, func(it BatchItem) error {
			items = append(items, it)
			return nil
		})
		if err != nil {
			require.ErrorIs(t, err, ErrMalformedBatch)
			require.Empty(t, items, "no item before the whole body is checked")
			return
		}
		require.NotEmpty(t, items)
		out, err := AppendBatch(nil, items)
		require.NoError(t, err)
		require.Len(t, out, len(body))
		var again []BatchItem
		require.NoError(t, DecodeBatch(out, func(it BatchItem) error {
			again = append(again, it)
			return nil
		}))
		require.Equal(t, len(items), len(again))
		for i := range items {
			require.Equal(t, items[i].Flag, again[i].Flag)
			require.True(t, bytes.Equal(items[i].Body, again[i].Body))
			require.Equal(t, items[i].Properties, again[i].Properties)
		}
		// With a suffix: the same items, each with the pair at the end.
		suffixed, err := DecodeBatchItems(body, "CLUSTER\x01c\x02")
		require.NoError(t, err)
		require.Len(t, suffixed, len(items))
		for i, it := range suffixed {
			p, ok := strings.CutSuffix(it.Properties, "CLUSTER\x01c\x02")
			require.True(t, ok)
			if p != items[i].Properties {
				require.Equal(t, items[i].Properties+"\x02", p, "a separator added, nothing else")
			}
		}
	})
}

func FuzzOffsetMsgID(f *testing.F) {
	for _, id := range []string{
		"7F000001000051AF00000000000000AA",
		"7F000001000051AF00000000000001CF",
		"7f000001000051af00000000000001cf",
		"20010DB800000000000000000000000100002A9F000000123456789A",
		"00000000000000000000FFFF7F000001000051AF00000000000000AA", // IPv4-mapped
		"7F0000010001000000000000000000AA",
		"",
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		host, off, err := ParseOffsetMsgID(id)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidMsgID)
			return
		}
		require.GreaterOrEqual(t, off, int64(0))
		if host.Addr().Is4In6() {
			require.Len(t, OffsetMsgID(host, off), OffsetMsgIDLenV4)
			return
		}
		require.Equal(t, strings.ToUpper(id), OffsetMsgID(host, off))
	})
}

// FuzzParseUniqID: an id parses exactly when it is 32 hex characters of
// either case, and then its fields print back to the id in uppercase;
// anything else is an error wrapping ErrInvalidMsgID, never a panic.
func FuzzParseUniqID(f *testing.F) {
	g := NewUniqIDGenerator(netip.MustParseAddr("10.1.2.3"), 4242)
	for _, id := range []string{g.Next(), g.Next(), "7F0000010F2B00000000261C0DA50003",
		"7f0000010f2b00000000261c0da50003", "7F0000010F2B0000000026", "7F0000010F2B00000000261C0DA5000G", ""} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		u, err := ParseUniqID(id)
		_, hexErr := hex.DecodeString(id)
		if len(id) != UniqIDLen || hexErr != nil {
			require.ErrorIs(t, err, ErrInvalidMsgID)
			return
		}
		require.NoError(t, err)
		require.True(t, u.IP.Is4())
		b := u.IP.AsSlice()
		b = binary.BigEndian.AppendUint16(b, u.PID)
		b = binary.BigEndian.AppendUint32(b, uint32(u.ClassLoaderHash))
		b = binary.BigEndian.AppendUint32(b, u.MonthMillis)
		b = binary.BigEndian.AppendUint16(b, u.Counter)
		require.Equal(t, strings.ToUpper(id), strings.ToUpper(hex.EncodeToString(b)))
	})
}

// FuzzDecompress: Decompress never panics; it fails with ErrDecompress or
// ErrBodyTooLarge, or returns at most maxSize bytes, the same that zlib's
// own reader inflates from the stream; a body of n bytes passes a cap of n
// and fails one of n-1 with ErrBodyTooLarge.
func FuzzDecompress(f *testing.F) {
	text := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20))
	for _, level := range []int{zlib.NoCompression, zlib.HuffmanOnly, DefaultCompressLevel, zlib.BestCompression} {
		c, err := Compress(text, level)
		require.NoError(f, err)
		f.Add(c, uint16(len(text)-1)) // a cap of exactly len(text)
		f.Add(c, uint16(len(text)-2))
		f.Add(c[:len(c)-3], uint16(0))
	}
	bomb, err := Compress(make([]byte, 256<<10), zlib.BestCompression)
	require.NoError(f, err)
	f.Add(bomb, uint16(4095))
	f.Add([]byte{0x78, 0x9c}, uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, maxSize uint16) {
		limit := int(maxSize) + 1 // NB: not 0, the 4 MiB default: inflating MiBs slows the fuzzer down
		out, err := Decompress(body, limit)
		if err != nil {
			if !errors.Is(err, ErrBodyTooLarge) {
				require.ErrorIs(t, err, ErrDecompress)
			}
			return
		}
		require.LessOrEqual(t, len(out), limit)
		r, err := zlib.NewReader(bytes.NewReader(body))
		require.NoError(t, err)
		want, err := io.ReadAll(r)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, out), "zlib inflates %d bytes, Decompress %d", len(want), len(out))
		if len(out) > 0 {
			_, err = Decompress(body, len(out))
			require.NoError(t, err, "a cap of exactly %d bytes", len(out))
			_, err = Decompress(body, len(out)-1)
			if len(out) > 1 {
				require.ErrorIs(t, err, ErrBodyTooLarge)
			}
		}
	})
}
