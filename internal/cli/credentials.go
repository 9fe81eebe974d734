package cli

import (
	"crypto/tls"
	"os"

	"github.com/sluicemq/sluice/internal/tlscert"
)

// Environment variables the client tools (mqadmin, mqbench) read ACL
// credentials from when the flags are not given.
const (
	EnvAccessKey = "SLUICE_ACCESS_KEY"
	EnvSecretKey = "SLUICE_SECRET_KEY"
)

// Credentials are a client tool's ACL account: --access-key and
// --secret-key, else SLUICE_ACCESS_KEY and SLUICE_SECRET_KEY. NB: flag
// defaults stay empty, so a secret never shows in a help text.
type Credentials struct {
	AccessKey, SecretKey string
}

// Resolve fills in what the flags left empty from the environment and
// reports a usage problem ("" when none): a key without its secret or the
// reverse.
func (c *Credentials) Resolve() string {
	if c.AccessKey == "" {
		c.AccessKey = os.Getenv(EnvAccessKey)
	}
	if c.SecretKey == "" {
		c.SecretKey = os.Getenv(EnvSecretKey)
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return "give --access-key and --secret-key together (or SLUICE_ACCESS_KEY and SLUICE_SECRET_KEY)"
	}
	return ""
}

// CredentialsUsage documents the flags.
const CredentialsUsage = "ACL account to sign requests with (default $" + EnvAccessKey + ")"

// SecretUsage documents --secret-key.
const SecretUsage = "secret key of --access-key (default $" + EnvSecretKey + ")"

// ClientTLS is a client tool's --tls, --tls-ca and --tls-insecure.
type ClientTLS struct {
	Enabled  bool
	CAFile   string
	Insecure bool
}

// Usage texts of the client TLS flags.
const (
	TLSUsage         = "connect with TLS, verifying servers against the system pool or --tls-ca"
	TLSCAUsage       = "PEM file of the CAs to verify servers with (implies --tls)"
	TLSInsecureUsage = "TLS without verifying the server (self-signed test setups; implies --tls)"
)

// Config returns the TLS configuration, nil when TLS is off.
func (t ClientTLS) Config() (*tls.Config, error) {
	if !t.Enabled && t.CAFile == "" && !t.Insecure {
		return nil, nil
	}
	return tlscert.Client(t.CAFile, t.Insecure, "", "")
}
