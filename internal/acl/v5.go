package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// V5Request is what CheckV5 reads of a RocketMQ 5 (gRPC) request: its
// authorization header, "MQv2-HMAC-SHA1 Credential=AK[/region/service],
// SignedHeaders=x-mq-date-time, Signature=hex(HMAC-SHA1(secret,
// x-mq-date-time))", the signed date-time, and what it touches.
type V5Request struct {
	Authorization string
	DateTime      string
	Remote        netip.Addr
	What          string // the RPC, for remarks
	Resources     []Resource
}

// v5Algorithm is the only signature algorithm of RocketMQ 5 clients.
const v5Algorithm = "MQv2-HMAC-SHA1"

// parseV5Authorization splits an authorization header into its access
// key and signature bytes.
func parseV5Authorization(h string) (key string, mac []byte, err error) {
	alg, rest, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || alg != v5Algorithm {
		return "", nil, fmt.Errorf("the authorization header does not start with %s", v5Algorithm)
	}
	var sigHex string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			key, _, _ = strings.Cut(v, "/")
		case "Signature":
			sigHex = v
		}
	}
	if key == "" {
		return "", nil, fmt.Errorf("the authorization header names no Credential")
	}
	if mac, err = hex.DecodeString(sigHex); err != nil || len(mac) != sha1.Size {
		return key, nil, fmt.Errorf("the authorization header's Signature is not %d hex bytes", sha1.Size)
	}
	return key, mac, nil
}

// CheckV5 decides a RocketMQ 5 request against the same accounts and
// permissions as remoting requests. It returns nil when the request may
// proceed.
func (r *Rules) CheckV5(req V5Request) *Refusal {
	if req.Authorization == "" {
		return &Refusal{Reason: ReasonNoCredentials, Remark: fmt.Sprintf(
			"ACL: %s carries no authorization header: this server takes signed requests only; give the client credentials (access key and secret key)", req.What)}
	}
	key, mac, err := parseV5Authorization(req.Authorization)
	if err != nil && key == "" {
		return &Refusal{Reason: ReasonNoCredentials, Remark: "ACL: " + err.Error()}
	}
	acc, refused := r.accountAt(key, req.Remote)
	if refused != nil {
		return refused
	}
	if err != nil {
		return &Refusal{Reason: ReasonSignature, Key: key, Remark: fmt.Sprintf("ACL: access key %q: %v", key, err)}
	}
	if req.DateTime == "" {
		return &Refusal{Reason: ReasonSignature, Key: key, Remark: fmt.Sprintf(
			"ACL: access key %q: the request carries no x-mq-date-time, which its signature covers", key)}
	}
	h := hmac.New(sha1.New, []byte(acc.secret))
	h.Write([]byte(req.DateTime))
	if !hmac.Equal(h.Sum(nil), mac) {
		return &Refusal{Reason: ReasonSignature, Key: key, Remark: fmt.Sprintf(
			"ACL: access key %q: the signature does not match (a wrong secret key?)", key)}
	}
	return acc.permits(key, req.Resources, req.What)
}

// SignV5 returns the authorization header a RocketMQ 5 client sends for
// dateTime (tests, tools).
func SignV5(key, secret, dateTime string) string {
	h := hmac.New(sha1.New, []byte(secret))
	h.Write([]byte(dateTime))
	return v5Algorithm + " Credential=" + key + ", SignedHeaders=x-mq-date-time, Signature=" + hex.EncodeToString(h.Sum(nil))
}
