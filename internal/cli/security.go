package cli

import (
	"flag"

	"github.com/sluicemq/sluice/conf"
)

// ServerSecurityUsage documents the flags AddServerSecurity defines.
const ServerSecurityUsage = `  --acl FILE                  ACL rules (RocketMQ plain_acl.yml shape); reloaded when
                              the file changes (key acl.file; default off)
  --tls-mode MODE             disabled, permissive (TLS and plaintext on one port)
                              or enforcing (TLS only); default disabled
  --tls-cert FILE, --tls-key FILE
                              PEM certificate and key (none: a self-signed one is made)
  --tls-client-ca FILE        PEM CAs; TLS clients must present a certificate they signed
  --pprof                     serve Go's profiler at /debug/pprof/ on the metrics listener
`

// ServerSecurity holds the security flags of mqbroker and mqnamesrv.
type ServerSecurity struct {
	fs                             *flag.FlagSet
	acl, mode, cert, key, clientCA *string
	pprof                          *bool
}

// AddServerSecurity defines --acl, --tls-mode, --tls-cert, --tls-key,
// --tls-client-ca and --pprof on fs.
func AddServerSecurity(fs *flag.FlagSet) *ServerSecurity {
	return &ServerSecurity{fs: fs,
		acl: fs.String("acl", "", ""), mode: fs.String("tls-mode", "", ""),
		cert: fs.String("tls-cert", "", ""), key: fs.String("tls-key", "", ""),
		clientCA: fs.String("tls-client-ca", "", ""), pprof: fs.Bool("pprof", false, "")}
}

// Apply sets the configuration values whose flags were given.
func (s *ServerSecurity) Apply(aclFile *string, t *conf.TLS, pprof *bool) {
	s.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "acl":
			*aclFile = *s.acl
		case "tls-mode":
			t.Mode = *s.mode
		case "tls-cert":
			t.Cert = *s.cert
		case "tls-key":
			t.Key = *s.key
		case "tls-client-ca":
			t.ClientCA = *s.clientCA
		case "pprof":
			*pprof = *s.pprof
		}
	})
}
