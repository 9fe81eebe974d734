// Package sig is the signature of RocketMQ 4.x ACL requests, apart from
// the rules (package acl) so that clients sign without the server side's
// dependencies: ext fields AccessKey, Signature and optional SecurityToken;
// Signature = base64(HMAC-SHA1(secretKey, the values of the ext fields
// sorted by key, then the body)). See package acl for the verification
// order.
package sig

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"slices"

	"github.com/sluicemq/sluice/internal/remoting"
)

// Ext field names of a signed request (RocketMQ's SessionCredentials).
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
	// FieldUniqueKeyQuery is left out of the content by Java brokers for
	// clients up to 4.9.3 (MixAll.UNIQUE_MSG_QUERY_FLAG).
	FieldUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// AppendContent appends to dst what a request's signature covers: the
// values of ext sorted by key (bytewise), concatenated, then body. The
// Signature field is never part of it, nor are the fields named in skip.
func AppendContent(dst []byte, ext map[string]string, body []byte, skip ...string) []byte {
	var arr [24]string
	keys := arr[:0]
	for k := range ext {
		if k != FieldSignature && !slices.Contains(skip, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = append(dst, ext[k]...)
	}
	return append(dst, body...)
}

// Sign returns base64(HMAC-SHA1(secret, content)) with padding.
func Sign(secret string, content []byte) string {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(content)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SignExt signs a request the way the Java broker verifies it: it sets
// ext's AccessKey (and SecurityToken when token is not empty), then its
// Signature over every other field and body. A Signature left from an
// earlier attempt is replaced.
func SignExt(ext map[string]string, body []byte, key, secret, token string) {
	ext[FieldAccessKey] = key
	if token != "" {
		ext[FieldSecurityToken] = token
	}
	ext[FieldSignature] = Sign(secret, AppendContent(nil, ext, body))
}

// Verify reports whether ext's Signature is the one secret makes for ext
// and body. It tries what the Java broker signs (every field but
// Signature), then without SecurityToken (the official Go client does not
// sign it), then without _UNIQUE_KEY_QUERY (Java clients up to 4.9.3).
// Each comparison is constant-time.
func Verify(secret string, ext map[string]string, body []byte) bool {
	sig, ok := ext[FieldSignature]
	if !ok {
		return false
	}
	buf := make([]byte, 0, 512+len(body))
	if EqualConstant(sig, Sign(secret, AppendContent(buf, ext, body))) {
		return true
	}
	_, token := ext[FieldSecurityToken]
	if token && EqualConstant(sig, Sign(secret, AppendContent(buf[:0], ext, body, FieldSecurityToken))) {
		return true
	}
	_, uniq := ext[FieldUniqueKeyQuery]
	return uniq && EqualConstant(sig, Sign(secret, AppendContent(buf[:0], ext, body, FieldUniqueKeyQuery)))
}

// EqualConstant compares a and b in time that depends on their lengths
// only.
func EqualConstant(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Signer returns a remoting.ClientOptions.Sign that signs every request
// with key and secret (and token, if not empty) the way the Java broker
// verifies. The request gets a custom header of its own (a map), so a
// header shared between requests is never written to.
func Signer(key, secret, token string) func(*remoting.Command) {
	return func(c *remoting.Command) {
		src := c.ExtMap()
		ext := make(map[string]string, len(src)+3)
		for k, v := range src {
			ext[k] = v
		}
		SignExt(ext, c.Body, key, secret, token)
		c.ExtFields, c.ExtWriter, c.ExtPairs = ext, nil, nil
	}
}
