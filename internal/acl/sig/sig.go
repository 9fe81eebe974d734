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
	"hash"
	"slices"
	"sync"

	"github.com/sluicemq/sluice/internal/protocol"
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
// and body (see Verifier.Verify). The broker keeps a Verifier per account
// instead, which reuses its HMAC state and buffers.
func Verify(secret string, ext map[string]string, body []byte) bool {
	return NewVerifier(secret).Verify(ext, body)
}

// Verifier verifies the signatures of one secret. It is safe for
// concurrent use; HMAC states and content buffers are pooled.
type Verifier struct {
	macs sync.Pool // hash.Hash: HMAC-SHA1 keyed with the secret
	bufs sync.Pool // *[]byte: content buffers
}

// NewVerifier returns the Verifier of secret.
func NewVerifier(secret string) *Verifier {
	key := []byte(secret)
	v := &Verifier{}
	v.macs.New = func() any { return hmac.New(sha1.New, key) }
	v.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	return v
}

// Verify reports whether ext's Signature is the one the secret makes for
// ext and body. It tries what the Java broker signs (every field but
// Signature), then without SecurityToken (the official Go client does not
// sign it), then without _UNIQUE_KEY_QUERY (Java clients up to 4.9.3).
// Each comparison is constant-time.
func (v *Verifier) Verify(ext map[string]string, body []byte) bool {
	got, ok := ext[FieldSignature]
	if !ok {
		return false
	}
	if v.matches(got, ext, body) {
		return true
	}
	if _, token := ext[FieldSecurityToken]; token && v.matches(got, ext, body, FieldSecurityToken) {
		return true
	}
	_, uniq := ext[FieldUniqueKeyQuery]
	return uniq && v.matches(got, ext, body, FieldUniqueKeyQuery)
}

// signatureLen is the length of a base64 HMAC-SHA1 with padding.
const signatureLen = 28

func (v *Verifier) matches(got string, ext map[string]string, body []byte, skip ...string) bool {
	want := v.sign(ext, body, skip...)
	return subtle.ConstantTimeCompare(want[:], []byte(got)) == 1
}

// sign returns the signature of ext and body (without skip) in base64.
func (v *Verifier) sign(ext map[string]string, body []byte, skip ...string) [signatureLen]byte {
	bp := v.bufs.Get().(*[]byte)
	content := AppendContent((*bp)[:0], ext, body, skip...)
	h := v.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(content)
	var sum [sha1.Size]byte
	h.Sum(sum[:0])
	v.macs.Put(h)
	if cap(content) <= 1<<20 { // NB: a huge body's buffer is not kept
		*bp = content[:0]
		v.bufs.Put(bp)
	}
	var out [signatureLen]byte
	base64.StdEncoding.Encode(out[:], sum[:])
	return out
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
	v := NewVerifier(secret) // NB: its pooled HMAC states sign too
	return func(c *remoting.Command) {
		src := c.ExtMap()
		ext := make(map[string]string, len(src)+3)
		for k, val := range src {
			ext[k] = val
		}
		ext[FieldAccessKey] = key
		if token != "" {
			ext[FieldSecurityToken] = token
		}
		delete(ext, FieldSignature)
		s := v.sign(ext, c.Body)
		ext[FieldSignature] = string(s[:])
		c.ExtFields, c.ExtWriter, c.ExtPairs = ext, nil, protocol.ExtPairs{}
	}
}
