package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckV5 reads the authorization header as the Go SDK (Credential
// AK//Rocketmq, lowercase hex) and the Node SDK (Credential AK, uppercase
// hex) send it, and refuses what is missing, unknown or wrong.
func TestCheckV5(t *testing.T) {
	r, err := Compile(File{Accounts: []Account{
		{AccessKey: "admin1", SecretKey: "secret-admin", Admin: true},
		{AccessKey: "user01", SecretKey: "secret-user", DefaultTopicPerm: "DENY", TopicPerms: []string{"orders=PUB"}},
	}})
	require.NoError(t, err)
	const dt = "20261205T150405Z"
	mac := hmac.New(sha1.New, []byte("secret-user"))
	mac.Write([]byte(dt))
	sig := hex.EncodeToString(mac.Sum(nil))
	ip := netip.MustParseAddr("127.0.0.1")
	pub := []Resource{{Name: "orders", Need: Pub}}
	for _, h := range []string{
		"MQv2-HMAC-SHA1 Credential=user01//Rocketmq, SignedHeaders=x-mq-date-time, Signature=" + sig,
		"MQv2-HMAC-SHA1 Credential=user01, SignedHeaders=x-mq-date-time, Signature=" + strings.ToUpper(sig),
		SignV5("user01", "secret-user", dt),
	} {
		require.Nil(t, r.CheckV5(V5Request{Authorization: h, DateTime: dt, Remote: ip, What: "SendMessage", Resources: pub}), h)
	}
	good := SignV5("user01", "secret-user", dt)
	for _, tc := range []struct {
		req    V5Request
		reason string
	}{
		{V5Request{DateTime: dt}, ReasonNoCredentials},
		{V5Request{Authorization: "Basic abc", DateTime: dt}, ReasonNoCredentials},
		{V5Request{Authorization: SignV5("nobody", "x", dt), DateTime: dt}, ReasonUnknownKey},
		{V5Request{Authorization: SignV5("user01", "wrong", dt), DateTime: dt}, ReasonSignature},
		{V5Request{Authorization: good, DateTime: "20261205T150406Z"}, ReasonSignature},
		{V5Request{Authorization: good}, ReasonSignature},
		{V5Request{Authorization: "MQv2-HMAC-SHA1 Credential=user01, Signature=zz", DateTime: dt}, ReasonSignature},
		{V5Request{Authorization: good, DateTime: dt, Resources: []Resource{{Name: "payments", Need: Pub}}}, ReasonPermission},
	} {
		tc.req.Remote, tc.req.What = ip, "SendMessage"
		ref := r.CheckV5(tc.req)
		require.NotNil(t, ref, "%+v", tc.req)
		require.Equal(t, tc.reason, ref.Reason, ref.Remark)
		require.NotContains(t, ref.Remark, "secret-user", "never the secret")
	}
	require.Nil(t, r.CheckV5(V5Request{Authorization: SignV5("admin1", "secret-admin", dt), DateTime: dt, Remote: ip,
		Resources: []Resource{{Name: "payments", Need: Pub}}}), "an admin without lists may do anything")
}
