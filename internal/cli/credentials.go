package cli

import "os"

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
