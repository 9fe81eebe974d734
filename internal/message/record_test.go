package message

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncode_SpecExample(t *testing.T) {
	require.Equal(t, 91, MinRecordSize)
	require.Equal(t, fields{
		bornHost: OffBornHost, bornHostLen: LenHostV4,
		storeTimestamp: OffStoreTimestampV4,
		storeHost:      OffStoreHostV4, storeHostLen: LenHostV4,
		reconsumeTimes: OffReconsumeTimesV4,
		preparedTx:     OffPreparedTxV4,
		bodyLength:     OffBodyLengthV4,
	}, layoutFor(0))
	require.Equal(t, OffBodyV4, OffBodyLengthV4+LenBodyLength)

	m := sampleMessage()
	require.Len(t, m.Properties, 63)
	require.Equal(t, 170, m.EncodedSize())
	rec := encodeT(t, &m, 0, 0)
	require.Len(t, rec, 170)

	// Fixed IPv4 offsets from spec §6.1.
	be := binary.BigEndian
	require.Equal(t, uint32(170), be.Uint32(rec[OffTotalSize:]))
	require.Equal(t, uint32(0xDAA320A7), be.Uint32(rec[OffMagic:]))
	require.Equal(t, uint32(3), be.Uint32(rec[OffQueueID:]))
	require.Equal(t, uint64(m.BornTimestamp), be.Uint64(rec[OffBornTimestamp:]))
	require.Equal(t, []byte{127, 0, 0, 1, 0, 0, 0xD7, 0x74}, rec[OffBornHost:OffBornHost+8]) // :55156
	require.Equal(t, uint64(m.StoreTimestamp), be.Uint64(rec[OffStoreTimestampV4:]))
	require.Equal(t, []byte{127, 0, 0, 1, 0, 0, 0x51, 0xAF}, rec[OffStoreHostV4:OffStoreHostV4+8]) // :20911
	require.Equal(t, uint32(1), be.Uint32(rec[OffReconsumeTimesV4:]))
	require.Equal(t, uint32(7), be.Uint32(rec[OffBodyLengthV4:]))
	require.Equal(t, "hello-1", string(rec[OffBodyV4:OffBodyV4+7]))
	require.Equal(t, byte(9), rec[OffBodyV4+7])
	require.Equal(t, "TopicTest", string(rec[OffBodyV4+8:OffBodyV4+17]))
	require.Equal(t, uint16(63), be.Uint16(rec[OffBodyV4+17:]))
	require.Equal(t, OffsetMsgID(m.StoreHost, int64(len(rec))), "7F000001000051AF00000000000000AA")
}

func TestEncodeDecode_RoundTrip(t *testing.T) {
	v4a := netip.MustParseAddrPort("192.0.2.2:55156")
	v4b := netip.MustParseAddrPort("10.1.2.3:10911")
	v6a := netip.MustParseAddrPort("[2001:db8::2]:55156")
	v6b := netip.MustParseAddrPort("[fe80::1:2:3:4]:10911")
	mapped := netip.MustParseAddrPort("[::ffff:192.0.2.2]:55156")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	compressed, err := Compress([]byte(strings.Repeat("The quick brown fox. ", 300)), DefaultCompressLevel)
	require.NoError(t, err)

	tests := []struct {
		name  string
		edit  func(m *Message)
		extra int // bytes above 91 + body + topic + props
	}{
		{"ipv4", func(m *Message) {}, 0},
		{"born=v6,store=v4", func(m *Message) { m.BornHost, m.StoreHost = v6a, v4b }, 12},
		{"born=v4,store=v6", func(m *Message) { m.BornHost, m.StoreHost = v4a, v6b }, 12},
		{"born=v6,store=v6", func(m *Message) { m.BornHost, m.StoreHost = v6a, v6b }, 24},
		{"born=v4-mapped-v6", func(m *Message) { m.BornHost = mapped }, 0},
		{"stale-host-bits", func(m *Message) { m.SysFlag = FlagBornHostV6 | FlagStoreHostV6 | TxCommit }, 0},
		{"empty-body", func(m *Message) { m.Body = nil }, 0},
		{"empty-properties", func(m *Message) { m.Properties = "" }, 0},
		{"empty-everything", func(m *Message) { m.Body, m.Properties, m.Topic = nil, "", "T" }, 0},
		{"topic=127", func(m *Message) { m.Topic = strings.Repeat("t", MaxTopicLen) }, 0},
		{"properties=32767", func(m *Message) { m.Properties = "a\x01" + strings.Repeat("v", MaxPropertiesLen-2) }, 0},
		{"compressed", func(m *Message) { m.Body, m.SysFlag = compressed, FlagCompressed }, 0},
		{"prepared", func(m *Message) { m.SysFlag, m.PreparedTransactionOffset = TxPrepared, 1031 }, 0},
		{"negative-fields", func(m *Message) { m.QueueID, m.Flag, m.ReconsumeTimes, m.BornTimestamp = -1, -2, -3, -4 }, 0},
		{"big-body", func(m *Message) { m.Body = big }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sampleMessage()
			tc.edit(&m)
			size := MinRecordSize + len(m.Body) + len(m.Topic) + len(m.Properties) + tc.extra
			require.Equal(t, size, m.EncodedSize())

			const queueOffset, pos = 42, 1 << 33
			rec := encodeT(t, &m, queueOffset, pos)
			r, err := Decode(rec)
			require.NoError(t, err)
			requireMatches(t, &m, r, queueOffset, pos)
			require.NoError(t, Validate(rec, pos, true))

			// Decoded records re-encode to the same bytes.
			m2 := r.Message()
			require.Equal(t, rec, encodeT(t, &m2, r.QueueOffset, r.PhysicalOffset))

			// Decode ignores bytes after the record and caps the views.
			r2, err := Decode(append(rec[:len(rec):len(rec)], 0xEE, 0xEE))
			require.NoError(t, err)
			require.Equal(t, r.TotalSize, r2.TotalSize)
			require.Equal(t, len(r2.Properties), cap(r2.Properties))
		})
	}
}

func TestEncode_OverwritesStaleBuffer(t *testing.T) {
	m := sampleMessage()
	m.BornHost = netip.MustParseAddrPort("[2001:db8::2]:1")
	want := encodeT(t, &m, 5, 6)
	dirty := bytes.Repeat([]byte{0xFF}, len(want))
	require.NoError(t, m.Encode(dirty, 5, 6))
	require.Equal(t, want, dirty)
}

func TestEncode_Errors(t *testing.T) {
	m := sampleMessage()
	require.ErrorIs(t, m.Encode(make([]byte, m.EncodedSize()-1), 0, 0), ErrBufferSize)
	require.ErrorIs(t, m.Encode(make([]byte, m.EncodedSize()+1), 0, 0), ErrBufferSize)

	m.Topic = strings.Repeat("t", MaxTopicLen+1)
	require.ErrorIs(t, m.Encode(make([]byte, m.EncodedSize()), 0, 0), ErrTopicTooLong)
	m = sampleMessage()
	m.StoreHost = netip.AddrPort{}
	require.ErrorIs(t, m.Encode(make([]byte, m.EncodedSize()), 0, 0), ErrInvalidHost)
}

func TestCheckLimits(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(m *Message)
		maxBody int
		err     error
		text    string
	}{
		{"ok", func(m *Message) {}, 0, nil, ""},
		{"topic-empty", func(m *Message) { m.Topic = "" }, 0, ErrTopicEmpty, ""},
		{"topic-127", func(m *Message) { m.Topic = strings.Repeat("t", 127) }, 0, nil, ""},
		{"topic-128", func(m *Message) { m.Topic = strings.Repeat("t", 128) }, 0, ErrTopicTooLong, "128 bytes, limit 127"},
		{"props-32767", func(m *Message) { m.Properties = strings.Repeat("p", 32767) }, 0, nil, ""},
		{"props-32768", func(m *Message) { m.Properties = strings.Repeat("p", 32768) }, 0, ErrPropertiesTooLong, "limit 32767"},
		{"body-at-limit", func(m *Message) { m.Body = make([]byte, 100) }, 100, nil, ""},
		{"body-over-limit", func(m *Message) { m.Body = make([]byte, 101) }, 100, ErrBodyTooLarge, "101 bytes, limit 100"},
		{"body-default-limit", func(m *Message) { m.Body = make([]byte, DefaultMaxBodySize) }, 0, nil, ""},
		{"body-over-default", func(m *Message) { m.Body = make([]byte, DefaultMaxBodySize+1) }, -1, ErrBodyTooLarge, "limit 4194304"},
		{"born-host-invalid", func(m *Message) { m.BornHost = netip.AddrPort{} }, 0, ErrInvalidHost, "born"},
		{"store-host-invalid", func(m *Message) { m.StoreHost = netip.AddrPort{} }, 0, ErrInvalidHost, "store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sampleMessage()
			tc.edit(&m)
			err := m.CheckLimits(tc.maxBody)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
			require.Contains(t, err.Error(), tc.text)
			require.True(t, strings.HasPrefix(err.Error(), "message: "), err.Error())
		})
	}
}

// corrupt returns a copy of rec changed by edit.
func corrupt(rec []byte, edit func(b []byte)) []byte {
	b := bytes.Clone(rec)
	edit(b)
	return b
}

func TestValidate_Rules(t *testing.T) {
	m := sampleMessage()
	const pos = 4096
	rec := encodeT(t, &m, 1, pos)
	put32 := func(off int, v uint32) func(b []byte) {
		return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) }
	}
	topicLenAt := OffBodyV4 + len(m.Body)
	propsLenAt := topicLenAt + 1 + len(m.Topic)

	tests := []struct {
		name string
		rec  []byte
		at   int64
		err  error
		text string
	}{
		{"magic-random", corrupt(rec, put32(OffMagic, 0x12345678)), pos, ErrMalformed, "MAGICCODE 0x12345678"},
		{"magic-blank", corrupt(rec, put32(OffMagic, 0xCBD43194)), pos, ErrMalformed, "blank"},
		{"magic-v2", corrupt(rec, put32(OffMagic, 0xDAA320AB)), pos, ErrMalformed, "v2"},
		{"totalsize-zero", corrupt(rec, put32(OffTotalSize, 0)), pos, ErrMalformed, "TOTALSIZE 0 below"},
		{"totalsize-90", corrupt(rec, put32(OffTotalSize, 90)), pos, ErrMalformed, "below the minimum 91"},
		{"totalsize-negative", corrupt(rec, put32(OffTotalSize, 0x80000000)), pos, ErrMalformed, "below"},
		{"totalsize-beyond-input", corrupt(rec, put32(OffTotalSize, uint32(len(rec)+1))), pos, ErrMalformed, "exceeds"},
		{"totalsize-shorter", corrupt(rec, put32(OffTotalSize, uint32(len(rec)-1))), pos, ErrMalformed, "add up"},
		{"physical-offset", rec, pos + 1, ErrMalformed, "PHYSICALOFFSET 4096"},
		{"bodylength+1", corrupt(rec, put32(OffBodyLengthV4, uint32(len(m.Body)+1))), pos, ErrMalformed, ""},
		{"bodylength-huge", corrupt(rec, put32(OffBodyLengthV4, 0x7FFFFFFF)), pos, ErrMalformed, "BODYLENGTH"},
		{"bodylength-negative", corrupt(rec, put32(OffBodyLengthV4, 0xFFFFFFFF)), pos, ErrMalformed, "BODYLENGTH -1"},
		{"topiclength-zero", corrupt(rec, func(b []byte) { b[topicLenAt] = 0 }), pos, ErrMalformed, "TOPICLENGTH 0"},
		{"topiclength-negative", corrupt(rec, func(b []byte) { b[topicLenAt] = 0x80 }), pos, ErrMalformed, "TOPICLENGTH -128"},
		{"topiclength+1", corrupt(rec, func(b []byte) { b[topicLenAt]++ }), pos, ErrMalformed, "add up"},
		{"propslength-negative", corrupt(rec, func(b []byte) { b[propsLenAt] = 0xFF }), pos, ErrMalformed, "negative"},
		{"propslength-1", corrupt(rec, func(b []byte) { b[propsLenAt+1]-- }), pos, ErrMalformed, "add up to 169 bytes, TOTALSIZE is 170"},
		{"ipv6-bit-on-ipv4", corrupt(rec, put32(OffSysFlag, uint32(FlagStoreHostV6))), pos, ErrMalformed, ""},
		{"born-port", corrupt(rec, put32(OffBornHost+4, 65536)), pos, ErrMalformed, "BORNHOST port 65536"},
		{"store-port", corrupt(rec, put32(OffStoreHostV4+4, 0xFFFFFFFF)), pos, ErrMalformed, "STOREHOST port -1"},
		{"crc", corrupt(rec, func(b []byte) { b[OffBodyV4] ^= 1 }), pos, ErrCRC, "BODYCRC"},
		{"crc-field", corrupt(rec, func(b []byte) { b[OffBodyCRC+3] ^= 1 }), pos, ErrCRC, "BODYCRC"},
		{"crc-unmasked", corrupt(rec, func(b []byte) { b[OffBodyCRC] |= 0x80 }), pos, ErrCRC, "BODYCRC"},
	}
	require.NoError(t, Validate(rec, pos, true))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.rec, tc.at, true)
			require.ErrorIs(t, err, tc.err)
			require.Contains(t, err.Error(), tc.text)
			if tc.err == ErrCRC {
				require.NoError(t, Validate(tc.rec, tc.at, false), "CRC is skipped when not asked for")
				return
			}
			if tc.name != "physical-offset" {
				_, derr := Decode(tc.rec)
				require.ErrorIs(t, derr, ErrMalformed, "Decode agrees")
				_, derr = ReadDispatchInfo(tc.rec)
				require.ErrorIs(t, derr, ErrMalformed, "ReadDispatchInfo agrees")
			}
		})
	}
}

func TestValidate_Truncated(t *testing.T) {
	m := sampleMessage()
	m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:1")
	rec := encodeT(t, &m, 0, 77)
	for n := range len(rec) {
		require.ErrorIs(t, Validate(rec[:n], 77, true), ErrMalformed, "prefix %d", n)
		_, err := Decode(rec[:n])
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", n)
		_, err = ReadDispatchInfo(rec[:n])
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", n)
	}
	require.NoError(t, Validate(rec, 77, true))
}

func TestValidate_BodyBitFlips(t *testing.T) {
	m := sampleMessage()
	m.Body = bytes.Repeat([]byte("abc"), 100)
	rec := encodeT(t, &m, 0, 0)
	for i := OffBodyV4; i < OffBodyV4+len(m.Body); i++ {
		for bit := range 8 {
			b := corrupt(rec, func(b []byte) { b[i] ^= 1 << bit })
			require.ErrorIs(t, Validate(b, 0, true), ErrCRC, "byte %d bit %d", i, bit)
		}
	}
}

func TestReadDispatchInfo(t *testing.T) {
	m := sampleMessage()
	m.Properties = "KEYS\x01k1 k2\x02TAGS\x01TagA\x02DELAY\x013\x02REAL_TOPIC\x01Orig\x02UNIQ_KEY\x01U1\x02WAIT\x01true"
	m.SysFlag = TxCommit
	rec := encodeT(t, &m, 9, 1234)
	d, err := ReadDispatchInfo(rec)
	require.NoError(t, err)
	require.Equal(t, DispatchInfo{
		Topic:          []byte("TopicTest"),
		QueueID:        3,
		QueueOffset:    9,
		PhysicalOffset: 1234,
		Size:           int32(len(rec)),
		SysFlag:        TxCommit,
		StoreTimestamp: m.StoreTimestamp,
		TagsCode:       2598919,
		Keys:           []byte("k1 k2"),
		UniqKey:        []byte("U1"),
		DelayLevel:     3,
		RealTopic:      []byte("Orig"),
		Properties:     []byte(m.Properties),
	}, d)

	for props, want := range map[string]DispatchInfo{
		"":                              {},
		"DELAY\x01x\x02TAGS\x01\x02":    {},                             // bad level, empty tag value
		"DELAY\x0199999999999":          {},                             // out of int32
		"DELAY\x01-2\x02TAGS\x01b":      {DelayLevel: -2, TagsCode: 98}, // raw value; the dispatcher clamps
		"TAGS\x01a\x02TAGS\x01b\x02":    {TagsCode: 98},                 // last wins
		"tags\x01a\x02UNIQ_KEY\x01\x02": {},                             // names are case-sensitive
	} {
		m.Properties = props
		d, err := ReadDispatchInfo(encodeT(t, &m, 0, 0))
		require.NoError(t, err)
		require.Equal(t, want.TagsCode, d.TagsCode, "%q", props)
		require.Equal(t, want.DelayLevel, d.DelayLevel, "%q", props)
		require.Nil(t, d.Keys)
		require.Nil(t, d.UniqKey)
	}
}

// TestValidateDispatchInfo: one pass does what Validate (without the CRC)
// and ReadDispatchInfo do: for records valid and damaged (any header or
// length byte changed, cut short, at another offset), the same error or
// none, and the same DispatchInfo.
func TestValidateDispatchInfo(t *testing.T) {
	m := sampleMessage()
	m.Properties = "KEYS\x01k1 k2\x02TAGS\x01TagA\x02DELAY\x013\x02UNIQ_KEY\x01U1"
	m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:1")
	good := encodeT(t, &m, 9, 1234)
	check := func(rec []byte, at int64, what string) {
		t.Helper()
		want := Validate(rec, at, false)
		got, err := ValidateDispatchInfo(rec, at)
		if want != nil {
			require.EqualError(t, err, want.Error(), what)
			return
		}
		require.NoError(t, err, what)
		read, err := ReadDispatchInfo(rec)
		require.NoError(t, err, what)
		require.Equal(t, read, got, what)
	}
	check(good, 1234, "valid")
	check(good, 1235, "elsewhere")
	for n := range len(good) {
		check(good[:n], 1234, fmt.Sprintf("cut at %d", n))
	}
	for i := range len(good) {
		for _, b := range []byte{1, 0x7f, 0x80, 0xff} {
			rec := bytes.Clone(good)
			rec[i] ^= b
			check(rec, 1234, fmt.Sprintf("byte %d ^ %#x", i, b))
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	m := sampleMessage()
	m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:1")
	m.Properties = "TAGS\x01标签\x02KEYS\x01k1\x02UNIQ_KEY\x01U\x02DELAY\x012"
	m.Body = make([]byte, 1024)
	buf := make([]byte, m.EncodedSize())
	rec := encodeT(t, &m, 0, 0)
	topic, key := []byte("TopicTest"), []byte("键-key")
	var sink int64
	for name, fn := range map[string]func(){
		"Encode":             func() { _ = m.Encode(buf, 1, 0) },
		"Validate":           func() { _ = Validate(rec, 0, true) },
		"Decode":             func() { r, _ := Decode(rec); sink += r.QueueOffset },
		"ReadDispatchInfo":   func() { d, _ := ReadDispatchInfo(rec); sink += d.TagsCode },
		"ValidateDispatch":   func() { d, _ := ValidateDispatchInfo(rec, 0); sink += d.TagsCode },
		"PropertyValue":      func() { v, _ := PropertyValue(m.Properties, PropKeys); sink += int64(len(v)) },
		"PropertyValueBytes": func() { v, _ := PropertyValueBytes(rec[len(rec)-10:], PropKeys); sink += int64(len(v)) },
		"TagsHashCode":       func() { sink += TagsHashCode("标签😀") },
		"IndexKeyHash":       func() { sink += int64(IndexKeyHash(topic, key)) },
		"DeleteProperty":     func() { sink += int64(len(DeleteProperty(m.Properties, "absent"))) },
		"KeysSeq": func() {
			for k := range KeysSeq(key) {
				sink += int64(len(k))
			}
		},
	} {
		require.Zero(t, testing.AllocsPerRun(100, fn), name)
	}
	_ = sink
}

// TestValidate_TornEnd: a record whose end a power loss zeroed (properties
// or topic) passes the body CRC but not a full Validate; the store never
// writes a record that would look so (CheckLimits refuses properties that
// end with a NUL byte).
func TestValidate_TornEnd(t *testing.T) {
	m := sampleMessage()
	const pos = 1 << 20
	rec := encodeT(t, &m, 1, pos)
	require.NoError(t, Validate(rec, pos, true))
	r, err := Decode(rec)
	require.NoError(t, err)
	require.NotEmpty(t, r.Properties)
	for cut := len(rec) - len(r.Properties); cut < len(rec); cut++ {
		torn := append([]byte(nil), rec...)
		clear(torn[cut:])
		require.ErrorIs(t, Validate(torn, pos, true), ErrMalformed, "properties zeroed from %d", cut)
		require.NoError(t, Validate(torn, pos, false), "the structure alone is sound")
	}
	topicAt := len(rec) - len(r.Properties) - LenPropsLen - len(r.Topic)
	torn := append([]byte(nil), rec...)
	clear(torn[topicAt+1 : topicAt+2])
	require.ErrorIs(t, Validate(torn, pos, true), ErrMalformed, "a NUL in the topic")

	m.Properties += "\x00"
	require.ErrorIs(t, m.CheckLimits(0), ErrPropertiesNUL)
}
