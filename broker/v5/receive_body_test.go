package v5

import (
	"crypto/md5"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
)

// TestToV5_CompressedBody: a body a 4.x producer compressed (zlib, the
// compressed flag, with or without the algorithm bits) reaches a v5
// consumer as sent, IDENTITY, its digest over what it receives (the Node
// SDK gunzips only GZIP and would hand the zlib bytes on as the body); a
// body that does not inflate goes as stored.
func TestToV5_CompressedBody(t *testing.T) {
	plain := []byte(strings.Repeat("a compressible body, ", 512))
	packed, err := message.Compress(plain, message.DefaultCompressLevel)
	require.NoError(t, err)
	rec := func(body []byte, sysFlag int32) Popped {
		return Popped{Rec: message.Record{Topic: []byte("T"), Body: body, SysFlag: sysFlag,
			StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), Properties: []byte("UNIQ_KEY\x01ID1\x02")},
			Attempt: 1, Handle: "h"}
	}
	digest := func(b []byte) string { s := md5.Sum(b); return strings.ToUpper(hex.EncodeToString(s[:])) }
	for _, c := range []struct {
		what    string
		body    []byte
		sysFlag int32
		want    []byte
	}{
		{"compressed", packed, message.FlagCompressed, plain},
		{"compressed, zlib bits", packed, message.FlagCompressed | message.CompressionZlib, plain},
		{"plain", plain, 0, plain},
		{"not zlib", []byte("not zlib"), message.FlagCompressed, []byte("not zlib")},
	} {
		m := toV5(rec(c.body, c.sysFlag), 10*time.Second)
		require.Equal(t, c.want, m.GetBody(), c.what)
		require.Equal(t, v2.Encoding_IDENTITY, m.GetSystemProperties().GetBodyEncoding(), c.what)
		require.Equal(t, digest(c.want), m.GetSystemProperties().GetBodyDigest().GetChecksum(), c.what)
	}
}
