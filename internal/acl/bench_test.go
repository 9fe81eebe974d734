package acl

import (
	"net/netip"
	"testing"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// BenchmarkCheck: what the broker's reader spends per request: an
// official client's SEND_MESSAGE_V2 (14 ext fields, 1 KiB body), signed,
// checked against an account with topic lists; and the client's side
// (sig.Signer, as remoting.ClientOptions.Sign runs it).
func BenchmarkCheck(b *testing.B) {
	r, err := Compile(File{Accounts: []Account{{AccessKey: "alice1", SecretKey: "alice-secret",
		TopicPerms: []string{"orders=PUB", "payments=PUB|SUB"}, GroupPerms: []string{"billing=SUB"}}}})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	ext := map[string]string{"a": "pg", "b": "orders", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1764590000000",
		"h": "0", "i": "TAGS\x01T\x02UNIQ_KEY\x017F0000010001000000000000000A0001\x02", "j": "0", "k": "false", "m": "false", "n": "broker-a"}
	sig.SignExt(ext, body, "alice1", "alice-secret", "")
	req := Request{Code: protocol.SendMessageV2, Remote: netip.MustParseAddr("127.0.0.1"), Ext: ext, Body: body}
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if ref := r.Check(req); ref != nil {
				b.Fatal(ref.Remark)
			}
		}
	})
	// The signature alone, side by side: a fresh HMAC and buffer per call
	// (sig.Verify) and the account's pooled Verifier that Check uses.
	v := sig.NewVerifier("alice-secret")
	b.Run("verify/fresh", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if !sig.Verify("alice-secret", ext, body) {
				b.Fatal("no match")
			}
		}
	})
	b.Run("verify/pooled", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if !v.Verify(ext, body) {
				b.Fatal("no match")
			}
		}
	})
	b.Run("sign", func(b *testing.B) {
		sign := sig.Signer("alice1", "alice-secret", "")
		b.ReportAllocs()
		for range b.N {
			sign(remoting.NewRequest(protocol.SendMessageV2, ext, body))
		}
	})
}
