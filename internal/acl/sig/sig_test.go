package sig

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/remoting"
)

// The frames in testdata were captured from the official Go client
// (github.com/apache/rocketmq-client-go/v2, the version scripts/compat pins)
// given WithCredentials{AccessKey: "RocketMQ", SecretKey: "12345678"}, with
// and without SecurityToken "tok-1": its GET_ROUTEINFO_BY_TOPIC for topic
// "orders". The signature it sent, wQpEtKVGCRZV0Dt019r5of21aVA=, is also
// what `printf RocketMQorders | openssl dgst -sha1 -hmac 12345678 -binary
// | base64` prints: the values of AccessKey and topic, sorted by key.
func TestVerify_OfficialClientFrames(t *testing.T) {
	for _, name := range []string{"routeinfo-signed.bin", "routeinfo-signed-token.bin"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + name)
			require.NoError(t, err)
			cmd, _, err := remoting.DecodeFrame(raw, remoting.DefaultMaxFrameSize)
			require.NoError(t, err)
			ext := cmd.ExtMap()
			require.Equal(t, "wQpEtKVGCRZV0Dt019r5of21aVA=", ext[FieldSignature])
			require.True(t, Verify("12345678", ext, cmd.Body))
			require.False(t, Verify("12345679", ext, cmd.Body))
		})
	}
}

func TestSign_Golden(t *testing.T) {
	// openssl: printf RocketMQordershello | openssl dgst -sha1 -hmac 12345678 -binary | base64
	ext := map[string]string{"topic": "orders", FieldAccessKey: "RocketMQ"}
	require.Equal(t, "RocketMQordershello", string(AppendContent(nil, ext, []byte("hello"))))
	require.Equal(t, "fAOULTYn59DiUXhnk7V/A3FfdzA=", Sign("12345678", AppendContent(nil, ext, []byte("hello"))))
	// Sorting is bytewise: upper case before lower case, Signature never in.
	ext = map[string]string{"b": "2", "B": "1", "a": "3", FieldSignature: "x"}
	require.Equal(t, "132", string(AppendContent(nil, ext, nil)))
}

func TestVerify_Variants(t *testing.T) {
	body := []byte("payload")
	t.Run("java signs the token", func(t *testing.T) {
		ext := map[string]string{"topic": "t"}
		SignExt(ext, body, "alice1", "secret1", "tok")
		require.Equal(t, "tok", ext[FieldSecurityToken])
		require.True(t, Verify("secret1", ext, body))
		ext["topic"] = "u"
		require.False(t, Verify("secret1", ext, body), "a changed field")
	})
	t.Run("go client leaves the token out", func(t *testing.T) {
		ext := map[string]string{"topic": "t", FieldAccessKey: "alice1"}
		ext[FieldSignature] = Sign("secret1", AppendContent(nil, ext, body))
		ext[FieldSecurityToken] = "tok"
		require.True(t, Verify("secret1", ext, body))
		require.False(t, Verify("secret1", ext, []byte("payloaD")), "a changed body")
	})
	t.Run("old java clients leave _UNIQUE_KEY_QUERY out", func(t *testing.T) {
		ext := map[string]string{"topic": "t", FieldAccessKey: "alice1"}
		ext[FieldSignature] = Sign("secret1", AppendContent(nil, ext, body))
		ext[FieldUniqueKeyQuery] = "true"
		require.True(t, Verify("secret1", ext, body))
	})
	t.Run("re-signing replaces the old signature", func(t *testing.T) {
		ext := map[string]string{"topic": "t"}
		SignExt(ext, body, "alice1", "secret1", "")
		SignExt(ext, body, "alice1", "secret1", "")
		require.True(t, Verify("secret1", ext, body))
	})
	t.Run("no signature", func(t *testing.T) {
		require.False(t, Verify("secret1", map[string]string{FieldAccessKey: "alice1"}, body))
	})
}

func FuzzAppendContent(f *testing.F) {
	f.Add("topic", "orders", "AccessKey", "RocketMQ", []byte("hello"))
	f.Add("", "", "Signature", "x", []byte{})
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, body []byte) {
		ext := map[string]string{k1: v1, k2: v2}
		content := AppendContent(nil, ext, body)
		n := len(body)
		for k, v := range ext {
			if k != FieldSignature {
				n += len(v)
			}
		}
		if len(content) != n {
			t.Fatalf("content has %d bytes, want %d", len(content), n)
		}
		SignExt(ext, body, "key", "secret", "")
		if !Verify("secret", ext, body) {
			t.Fatalf("a request signed with SignExt does not verify: %q", ext)
		}
		if Verify("other", ext, body) {
			t.Fatal("verified with another secret")
		}
	})
}

// TestSigner: the remoting hook signs as SignExt does, on a copy of the
// header, replacing an earlier attempt's signature.
func TestSigner(t *testing.T) {
	shared := map[string]string{"topic": "orders"}
	cmd := remoting.NewRequest(10, shared, []byte("hello"))
	sign := Signer("RocketMQ", "12345678", "")
	sign(cmd)
	require.Equal(t, map[string]string{"topic": "orders"}, shared, "the caller's header is not written to")
	want := map[string]string{"topic": "orders"}
	SignExt(want, []byte("hello"), "RocketMQ", "12345678", "")
	require.Equal(t, want, cmd.ExtFields)
	require.Equal(t, "fAOULTYn59DiUXhnk7V/A3FfdzA=", cmd.ExtFields[FieldSignature])
	sign(cmd) // a retry: signed again over the same fields
	require.Equal(t, want, cmd.ExtFields)
	require.True(t, Verify("12345678", cmd.ExtFields, cmd.Body))

	withToken := remoting.NewRequest(10, map[string]string{"topic": "orders"}, nil)
	Signer("RocketMQ", "12345678", "tok")(withToken)
	require.Equal(t, "tok", withToken.ExtFields[FieldSecurityToken])
	require.True(t, Verify("12345678", withToken.ExtFields, nil))
	require.False(t, Verify("12345679", withToken.ExtFields, nil))
}
