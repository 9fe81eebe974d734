package message

import (
	"flag"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/records-v1.golden")

// pulledRecord is what the capture README says a harness-built record holds.
type pulledRecord struct {
	size, queueID                    int32
	crc                              uint32 // as stored
	queueOffset, pos                 int64
	sysFlag                          int32
	bornTimestamp, storeTimestamp    int64
	body, props                      string // body inflated when sysFlag has FlagCompressed
	tags, keys, uniqKey, offsetMsgID string
	delay                            int32
}

func TestGolden_PullBodies(t *testing.T) {
	const fox = "The quick brown fox jumps over the lazy dog. "
	files := map[string][]pulledRecord{
		"10-pull-message-queue0.response.bin": {
			{256, 0, 146577001, 0, 207, FlagCompressed, 1795993369922, 1795993369923, strings.Repeat(fox, 140),
				"UNIQ_KEY\x01C000020272AC00000000952411a80002\x02TAGS\x01TagBig\x02KEYS\x01big-1\x02",
				"TagBig", "big-1", "C000020272AC00000000952411a80002", "7F000001000051AF00000000000000CF", 0},
			{175, 0, 1497915881, 1, 856, 0, 1795993370525, 1795993370525, "delayed hello",
				"DELAY\x013\x02UNIQ_KEY\x01C000020272AC00000000952415900003\x02TAGS\x01TagD\x02",
				"TagD", "", "C000020272AC00000000952415900003", "7F000001000051AF0000000000000358", 3},
		},
		"11-pull-message-queue1.response.bin": {
			{207, 1, 2053706679, 0, 0, 0, 1795993369620, 1795993369620, "hello sluice",
				"TAGS\x01TagA\x02KEYS\x01order-1001 user-42\x02region\x01eu-west-1\x02UNIQ_KEY\x01C000020272AC00000000952411a80001\x02",
				"TagA", "order-1001 user-42", "C000020272AC00000000952411a80001", "7F000001000051AF0000000000000000", 0},
			{129, 1, 1344045282, 1, 463, 0, 1795993370223, 1795993370224, "batch-1",
				"TAGS\x01TagB\x02KEYS\x01bk-1\x02", "TagB", "bk-1", "", "7F000001000051AF00000000000001CF", 0},
			{129, 1, 3373650264, 2, 592, 0, 1795993370223, 1795993370224, "batch-2",
				"TAGS\x01TagB\x02KEYS\x01bk-2\x02", "TagB", "bk-2", "", "7F000001000051AF0000000000000250", 0},
			{135, 1, 3188908494, 3, 721, 0, 1795993370223, 1795993370224, "batch-3",
				"TAGS\x01TagB\x02KEYS\x01bk-3\x02seq\x013\x02", "TagB", "bk-3", "", "7F000001000051AF00000000000002D1", 0},
		},
	}
	bornHost := netip.MustParseAddrPort("127.0.0.1:55156")
	storeHost := netip.MustParseAddrPort("127.0.0.1:20911")
	for name, want := range files {
		t.Run(name, func(t *testing.T) {
			recs := splitRecords(t, readFrame(t, name).Body)
			require.Len(t, recs, len(want))
			for i, w := range want {
				rec := recs[i]
				r, err := Decode(rec)
				require.NoError(t, err)
				require.Equal(t, w.size, r.TotalSize)
				require.Equal(t, w.crc, uint32(r.BodyCRC))
				require.Equal(t, w.queueID, r.QueueID)
				require.Zero(t, r.Flag)
				require.Equal(t, w.queueOffset, r.QueueOffset)
				require.Equal(t, w.pos, r.PhysicalOffset)
				require.Equal(t, w.sysFlag, r.SysFlag)
				require.Equal(t, w.bornTimestamp, r.BornTimestamp)
				require.Equal(t, bornHost, r.BornHost)
				require.Equal(t, w.storeTimestamp, r.StoreTimestamp)
				require.Equal(t, storeHost, r.StoreHost)
				require.Zero(t, r.ReconsumeTimes)
				require.Zero(t, r.PreparedTransactionOffset)
				require.Equal(t, "SluiceTopic", string(r.Topic))
				require.Equal(t, w.props, string(r.Properties))
				body := r.Body
				if r.SysFlag&FlagCompressed != 0 {
					require.Len(t, body, 89)
					body, err = Decompress(body, 0)
					require.NoError(t, err)
				}
				require.Equal(t, w.body, string(body))
				require.Equal(t, w.offsetMsgID, OffsetMsgID(r.StoreHost, r.PhysicalOffset), "send response msgId")

				d, err := ReadDispatchInfo(rec)
				require.NoError(t, err)
				require.Equal(t, TagsHashCode(w.tags), d.TagsCode)
				require.Equal(t, w.keys, string(d.Keys))
				require.Equal(t, w.uniqKey, string(d.UniqKey))
				require.Equal(t, w.delay, d.DelayLevel)

				// The harness wrote the two batch records' BODYCRC unmasked (bit 31
				// set), which recovery must treat as corrupt (spec §6.2).
				require.NoError(t, Validate(rec, w.pos, false))
				m := r.Message()
				again := encodeT(t, &m, r.QueueOffset, r.PhysicalOffset)
				if w.crc > 0x7FFFFFFF {
					require.ErrorIs(t, Validate(rec, w.pos, true), ErrCRC)
					require.Equal(t, w.crc&0x7FFFFFFF, uint32(BodyCRC(r.Body)))
					require.Equal(t, rec[:OffBodyCRC], again[:OffBodyCRC])
					require.Equal(t, rec[OffBodyCRC+4:], again[OffBodyCRC+4:])
				} else {
					require.NoError(t, Validate(rec, w.pos, true))
					require.Equal(t, rec, again, "re-encodes to the captured bytes")
				}
			}
		})
	}
}

// goldenMessages are the records of testdata/records-v1.golden, in order.
func goldenMessages(t testing.TB) []Message {
	compressed := readFrame(t, "03-send-message-compressed.bin")
	return []Message{
		sampleMessage(),
		{
			Topic: "%RETRY%cg-push", QueueID: 0, Flag: 1, SysFlag: TxPrepared,
			BornTimestamp: 1795993415343, BornHost: netip.MustParseAddrPort("[2001:db8::2]:55156"),
			StoreTimestamp: 1795993415344, StoreHost: netip.MustParseAddrPort("[2001:db8::1]:10911"),
			ReconsumeTimes: 2, PreparedTransactionOffset: 170,
			Body:       []byte("tx-commit"),
			Properties: "TRAN_MSG\x01true\x02PGROUP\x01pg-tx\x02REAL_TOPIC\x01SluiceTopic\x02REAL_QID\x011",
		},
		{
			Topic: "SluiceTopic", QueueID: 1, SysFlag: FlagCompressed,
			BornTimestamp: 1795993369922, BornHost: netip.MustParseAddrPort("192.0.2.2:55156"),
			StoreTimestamp: 1795993369923, StoreHost: netip.MustParseAddrPort("[2001:db8::1]:10911"),
			Body:       compressed.Body,
			Properties: compressed.ExtFields["properties"],
		},
	}
}

func TestGolden_Records(t *testing.T) {
	msgs := goldenMessages(t)
	var want []byte
	for i := range msgs {
		want = append(want, encodeT(t, &msgs[i], int64(10+i), int64(len(want)))...)
	}
	if *update {
		require.NoError(t, os.WriteFile(goldenRecordsFile, want, 0o644))
	}
	got, err := os.ReadFile(goldenRecordsFile)
	require.NoError(t, err)
	require.Equal(t, want, got, "the encoding changed; if that is intended, run go test -run TestGolden_Records -update")

	pos := 0
	for i := range msgs {
		require.NoError(t, Validate(got[pos:], int64(pos), true))
		r, err := Decode(got[pos:])
		require.NoError(t, err)
		requireMatches(t, &msgs[i], r, int64(10+i), int64(pos))
		m := r.Message()
		end := pos + int(r.TotalSize)
		require.Equal(t, got[pos:end], encodeT(t, &m, r.QueueOffset, r.PhysicalOffset))
		pos = end
	}
	require.Equal(t, len(got), pos)
}
