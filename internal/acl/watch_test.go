package acl_test

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/testutil"
)

const aliceRules = `globalWhiteRemoteAddresses: []
accounts:
  - accessKey: alice1
    secretKey: 12345678
    topicPerms: ["orders=PUB"]
`

func send(key, secret string) acl.Request {
	ext := map[string]string{"topic": "orders"}
	sig.SignExt(ext, []byte("m"), key, secret, "")
	return acl.Request{Code: protocol.SendMessage, Remote: netip.MustParseAddr("127.0.0.1"), Ext: ext, Body: []byte("m")}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatcher_Reload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(path, []byte(aliceRules), 0o600))
	var logs testutil.SyncBuffer
	w, err := acl.NewWatcher(path, acl.LoadFile, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	defer w.Close()
	require.Nil(t, w.Rules().Check(send("alice1", "12345678")))

	// Revoke alice by replacing the file (rename over it, as editors do).
	tmp := filepath.Join(dir, "new.yml")
	require.NoError(t, os.WriteFile(tmp, []byte(strings.ReplaceAll(aliceRules, "alice1", "bobbob")), 0o600))
	require.NoError(t, os.Rename(tmp, path))
	waitFor(t, "alice's revocation", func() bool { return w.Rules().Check(send("alice1", "12345678")) != nil })
	ref := w.Rules().Check(send("alice1", "12345678"))
	require.Equal(t, acl.ReasonUnknownKey, ref.Reason)
	require.Nil(t, w.Rules().Check(send("bobbob", "12345678")))

	// A broken edit keeps bob.
	require.NoError(t, os.WriteFile(path, []byte("accounts:\n  - accessKey: bobbob\n    secretKey: x\n    topicPerms: [\"orders=WRITE\"]\n"), 0o600))
	waitFor(t, "the failed reload", func() bool { _, failed := w.Reloads(); return failed > 0 })
	require.Nil(t, w.Rules().Check(send("bobbob", "12345678")))
	require.Contains(t, logs.String(), "keeping the last good rules")
	require.Contains(t, logs.String(), "line 4: accounts[0].topicPerms[0]")
	require.NotContains(t, logs.String(), "12345678", "a secret in the log")
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
}

func TestLoadACL_Errors(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ file, want string }{
		"unknown key": {"accounts:\n  - accessKey: alice1\n    secretKey: 12345678\n    secretkee: x\n", "invalid keys: secretkee"},
		"bad perm":    {"accounts:\n  - accessKey: alice1\n    secretKey: 12345678\n    defaultTopicPerm: ALL\n", `line 4: accounts[0].defaultTopicPerm: permission "ALL"`},
		"bad address": {"globalWhiteRemoteAddresses:\n  - 10.*\n", `line 2: globalWhiteRemoteAddresses[0]: address pattern "10.*"`},
		"not yaml":    {"accounts: [", "parse ACL file"},
		"null key":    {"~: x\naccounts: []\n", "invalid keys: <nil>"},
		"not a map":   {"- accounts\n", "expected a map"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yml")
			require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o600))
			_, err := acl.LoadFile(path)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := acl.LoadFile(filepath.Join(dir, "missing.yml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
