package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// ACLRules is the ACL file the security tests share (plain_acl.yml shape):
// rootroot is an admin with no lists (brokers register as it); alice1
// publishes to orders; bobbob consumes orders in group billing; davedave
// may do anything but touch topic vault; carol1 is an admin whose
// whitelist is 10.9.9.9 only. Every secret ends in "-secret-1".
const ACLRules = `accounts:
  - accessKey: rootroot
    secretKey: root-secret-1
    admin: true
  - accessKey: alice1
    secretKey: alice-secret-1
    topicPerms: ["orders=PUB"]
  - accessKey: bobbob
    secretKey: bob-secret-1
    topicPerms: ["orders=SUB"]
    groupPerms: ["billing=SUB"]
  - accessKey: davedave
    secretKey: dave-secret-1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms: ["vault=DENY"]
  - accessKey: carol1
    secretKey: carol-secret-1
    admin: true
    whiteRemoteAddress: 10.9.9.9
`

// WriteACL writes rules to a plain_acl.yml in a fresh temporary directory
// and returns its path.
func WriteACL(t testing.TB, rules string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
