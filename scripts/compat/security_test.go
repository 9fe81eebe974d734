package compat

import (
	"os"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The servers under test always run with ACL (compatACL), and every client
// of the suite signs with adminCreds, as the official client does with
// WithCredentials. With SLUICE_COMPAT_TLS=1 (scripts/test.sh runs the
// suite once so) they also enforce TLS, and every client uses WithTls(true).
var overTLS = os.Getenv("SLUICE_COMPAT_TLS") == "1"

// compatACL: compat-admin may do everything; compat-sub may consume any
// topic in any group but publish nothing.
const compatACL = `accounts:
  - accessKey: compat-admin
    secretKey: compat-admin-secret
    admin: true
  - accessKey: compat-sub
    secretKey: compat-sub-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
`

var (
	adminCreds = primitive.Credentials{AccessKey: "compat-admin", SecretKey: "compat-admin-secret"}
	subCreds   = primitive.Credentials{AccessKey: "compat-sub", SecretKey: "compat-sub-secret"}
)

// producerSecurity returns the producer options for creds.
func producerSecurity(creds primitive.Credentials) []producer.Option {
	return []producer.Option{producer.WithCredentials(creds), producer.WithTls(overTLS)}
}

// consumerSecurity returns the consumer options for creds.
func consumerSecurity(creds primitive.Credentials) []consumer.Option {
	return []consumer.Option{consumer.WithCredentials(creds), consumer.WithTls(overTLS)}
}

func adminSecurity() []admin.AdminOption {
	return []admin.AdminOption{admin.WithCredentials(adminCreds), admin.WithTls(overTLS)}
}

// mqadminArgs is the start of every mqadmin command line: the nameserver,
// the admin account and, over TLS, --tls --tls-insecure.
func mqadminArgs(args ...string) []string {
	out := []string{"-n", nameserverAddr, "--access-key", adminCreds.AccessKey, "--secret-key", adminCreds.SecretKey}
	if overTLS {
		out = append(out, "--tls", "--tls-insecure")
	}
	return append(out, args...)
}
