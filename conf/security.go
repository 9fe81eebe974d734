package conf

import "strconv"

// TLS modes (RocketMQ's): disabled serves plaintext only, permissive both
// on one port (a first byte of 0x16 starts a TLS handshake), enforcing TLS
// only.
const (
	TLSDisabled   = "disabled"
	TLSPermissive = "permissive"
	TLSEnforcing  = "enforcing"
)

// ACL configures a server's access control (internal/acl).
type ACL struct {
	// File is a rules file in RocketMQ's plain_acl.yml shape; empty turns
	// ACL off. It is reloaded when it changes.
	File string `mapstructure:"file"`
}

// BrokerACL is a broker's ACL: its rules, and the account it signs its
// own requests to the nameservers with.
type BrokerACL struct {
	// File: as ACL.File.
	File string `mapstructure:"file"`
	// AccessKey and SecretKey sign the broker's registrations with the
	// nameservers (an admin account there); empty: unsigned.
	AccessKey string `mapstructure:"access_key"`
	SecretKey string `mapstructure:"secret_key"`
}

// TLS configures a remoting listener's TLS.
type TLS struct {
	// Mode is TLSDisabled, TLSPermissive or TLSEnforcing.
	Mode string `mapstructure:"mode"`
	// Cert and Key are PEM files; both empty with a mode other than
	// disabled: a self-signed certificate is made (and kept) under the
	// store directory.
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
	// ClientCA, when set, is a PEM file of CAs; TLS clients must then
	// present a certificate one of them signed. Only with Mode enforcing:
	// permissive would let plaintext clients in without one.
	ClientCA string `mapstructure:"client_ca"`
}

// ClientTLS is how a server dials other servers (a broker its
// nameservers).
type ClientTLS struct {
	// Enabled dials with TLS.
	Enabled bool `mapstructure:"enabled"`
	// CAFile verifies the peer against these PEM CAs; empty: the system pool.
	CAFile string `mapstructure:"ca_file"`
	// Insecure skips verification (self-signed test setups).
	Insecure bool `mapstructure:"insecure"`
}

func defaultTLS() TLS { return TLS{Mode: TLSDisabled} }

func (t TLS) validate(c *checker, p string) {
	switch t.Mode {
	case TLSDisabled, TLSPermissive, TLSEnforcing:
	default:
		c.fail(p+"mode", strconv.Quote(t.Mode), "want disabled, permissive or enforcing")
	}
	if (t.Cert == "") != (t.Key == "") {
		c.fail(p+"cert", strconv.Quote(t.Cert), "give tls.cert and tls.key together (or neither, for a self-signed certificate)")
	}
	if t.Mode == TLSPermissive && t.ClientCA != "" {
		// NB: a permissive port also serves plaintext, which presents no
		// certificate: the client CA would bind TLS clients only.
		c.fail(p+"client_ca", strconv.Quote(t.ClientCA), "cannot be used with "+p+"mode permissive (--tls-client-ca with "+
			"--tls-mode permissive): plaintext connections on that port would skip the client certificate; "+
			"use "+p+"mode enforcing with the client CA, or permissive without "+p+"client_ca")
	}
}

func (a BrokerACL) validate(c *checker, b Broker) {
	if b.EmbedNamesrv() && b.EmbeddedNamesrv.ACL.File != "" && a.AccessKey == "" {
		c.fail("acl.access_key", `""`, "the broker registers with its embedded nameserver, which checks ACL: "+
			"give acl.access_key and acl.secret_key (SLUICE_ACL_ACCESS_KEY, SLUICE_ACL_SECRET_KEY) of an admin account")
	}
	if (a.AccessKey == "") != (a.SecretKey == "") {
		// NB: the secret's value is never echoed.
		c.fail("acl.access_key", strconv.Quote(a.AccessKey), "give acl.access_key and acl.secret_key together")
	}
}
