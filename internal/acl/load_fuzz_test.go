package acl

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadFile: any file either loads (rules) or fails with an error, never
// a panic.
func FuzzLoadFile(f *testing.F) {
	f.Add([]byte("accounts:\n  - accessKey: alice1\n    secretKey: 12345678\n    topicPerms: [\"orders=PUB|SUB\"]\n"))
	f.Add([]byte("globalWhiteRemoteAddresses: [\"10.1.1.{1,2}\", \"192.168.*.*\"]\naccounts: []\n"))
	f.Add([]byte("accounts:\n  - accessKey: k\n    secretKey: s3cr3t\n    whiteRemoteAddress: 1.2.3.4-300\n"))
	f.Add([]byte("accounts: [\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "plain_acl.yml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := LoadFile(path)
		if err == nil && r == nil {
			t.Fatal("no rules and no error")
		}
	})
}
