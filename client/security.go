package client

import (
	"crypto/tls"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/remoting"
)

// WithCredentials signs every request with an ACL account (RocketMQ 4.x
// ACL, as the official clients' WithCredentials): ext fields AccessKey and
// Signature, HMAC-SHA1 with secretKey over the sorted field values and the
// body. Servers without ACL ignore them.
func WithCredentials(accessKey, secretKey string) Option {
	return func(c *config) { c.accessKey, c.secretKey = accessKey, secretKey }
}

// secure applies the credentials and TLS to o.
func (c *config) secure(o *remoting.ClientOptions) {
	if c.accessKey != "" {
		o.Sign = sig.Signer(c.accessKey, c.secretKey, "")
	}
	o.TLS = c.tls
}

// WithTLS makes every connection TLS with cfg (nil: verified against
// the system pool). InsecureSkipVerify is for self-signed test setups.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.tls = cfg
	}
}

// Combine returns one Option that applies opts in order (tools build a
// set of connection options once and pass it to every client).
func Combine(opts ...Option) Option {
	return func(c *config) {
		for _, o := range opts {
			o(c)
		}
	}
}
