package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// patience bounds waiting for the child process; tests assert outcomes,
// not speed.
const patience = 30 * time.Second

// buildBinary compiles mqnamesrv into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mqnamesrv")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// cleanEnv is the environment without SLUICE_ variables, so that the
// caller's environment cannot change the configuration under test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return env
}

// runToExit runs the binary to completion and returns its exit code and
// stderr.
func runToExit(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
		return exit.ExitCode(), stderr.String()
	}
	return 0, stderr.String()
}

func TestBinary(t *testing.T) {
	bin := buildBinary(t)

	t.Run("serves routes and stops on SIGTERM", func(t *testing.T) {
		// The file asks for a fixed port; the flag wins (flags > file).
		cfgFile := filepath.Join(t.TempDir(), "namesrv.yaml")
		require.NoError(t, os.WriteFile(cfgFile, []byte("listen: \"127.0.0.1:9\"\nbroker_expiry: \"60s\"\n"), 0o644))
		cmd := exec.Command(bin, "-c", cfgFile, "--listen", "127.0.0.1:0")
		cmd.Env = cleanEnv()
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		exited := false
		t.Cleanup(func() {
			if !exited {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})

		// Scan the log until EOF (the process's exit), reporting the
		// listen address once seen.
		addrRe := regexp.MustCompile(`msg="mqnamesrv: listening" addr=(\S+)`)
		addrC := make(chan string, 1)
		logDone := make(chan string, 1)
		go func() {
			var all strings.Builder
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				all.WriteString(sc.Text() + "\n")
				if m := addrRe.FindStringSubmatch(sc.Text()); m != nil {
					addrC <- m[1]
				}
			}
			logDone <- all.String()
		}()
		var addr string
		select {
		case addr = <-addrC:
		case log := <-logDone:
			t.Fatalf("mqnamesrv exited before listening:\n%s", log)
		case <-time.After(patience):
			t.Fatal("mqnamesrv did not log its address")
		}
		require.NotEqual(t, "127.0.0.1:9", addr)

		opts := remoting.DefaultClientOptions()
		opts.SerializeType = remoting.SerializeJSON
		client := remoting.NewClient(opts)
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		resp, err := client.Invoke(ctx, addr, remoting.NewRequest(protocol.GetRouteInfoByTopic,
			protocol.Ext(&protocol.GetRouteInfoRequestHeader{Topic: "NoSuchTopic"}), nil))
		cancel()
		require.NoError(t, client.Close())
		require.NoError(t, err)
		require.Equal(t, int16(protocol.TopicNotExist), resp.Code)
		require.Contains(t, resp.Remark, "NoSuchTopic")

		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		var log string
		select {
		case log = <-logDone:
		case <-time.After(patience):
			t.Fatal("mqnamesrv did not exit after SIGTERM")
		}
		err = cmd.Wait()
		exited = true
		require.NoError(t, err, "exit status after SIGTERM; log:\n%s", log)
		require.Contains(t, log, "mqnamesrv: stopped")
	})

	t.Run("bad config file", func(t *testing.T) {
		dir := t.TempDir()
		write := func(name, content string) string {
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
			return p
		}
		for _, tc := range []struct {
			name, file, want string
		}{
			{"unknown key", write("typo.yaml", "listn: \"127.0.0.1:0\"\n"), `unknown key "listn"`},
			{"invalid value", write("bounds.yaml", "broker_expiry: \"1m\"\nscan_interval: \"1h\"\n"), "scan_interval"},
			{"not YAML", write("garbage.yaml", "listen: [unclosed\n"), "garbage.yaml"},
			{"missing file", filepath.Join(dir, "absent.yaml"), "absent.yaml"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, stderr := runToExit(t, bin, "-c", tc.file, "--listen", "127.0.0.1:0")
				require.Equal(t, 1, code, stderr)
				requireOneLineError(t, stderr, tc.want)
			})
		}
	})

	t.Run("bad command line", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"unknown flag", []string{"--nope"}, "-nope"},
			{"missing value", []string{"--listen"}, "listen"},
			{"stray argument", []string{"extra"}, `"extra"`},
			{"invalid listen", []string{"--listen", "not-an-address"}, "listen"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, stderr := runToExit(t, bin, tc.args...)
				require.Equal(t, 2, code, stderr)
				requireOneLineError(t, stderr, tc.want)
			})
		}
	})

	t.Run("help", func(t *testing.T) {
		out, err := exec.Command(bin, "-h").Output()
		require.NoError(t, err)
		require.Contains(t, string(out), "--metrics-listen")
		require.Contains(t, string(out), "Prometheus")
	})
}

func requireOneLineError(t *testing.T, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	require.Len(t, lines, 1, "one line expected: %q", stderr)
	require.True(t, strings.HasPrefix(lines[0], "mqnamesrv: "), lines[0])
	require.Contains(t, lines[0], want)
}

// TestMQNamesrv_BadSecurityFlags: a broken ACL file, a missing one, an
// unknown TLS mode and a client CA on a permissive port stop mqnamesrv at
// once with a one-line reason.
func TestMQNamesrv_BadSecurityFlags(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(broken, []byte("accounts:\n  - accessKey: alice1\n    secretKey: 12345678\n    topicPerms: [\"orders=WRITE\"]\n"), 0o600))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--acl", broken}, exitError, `line 4: accounts[0].topicPerms[0]: permission "WRITE"`},
		{[]string{"--acl", filepath.Join(t.TempDir(), "missing.yml")}, exitError, "read ACL file"},
		{[]string{"--tls-mode", "sometimes"}, exitUsage, "tls.mode"},
		{[]string{"--tls-mode", "enforcing", "--tls-cert", "c.pem"}, exitUsage, "give tls.cert and tls.key together"},
		{[]string{"--tls-mode", "permissive", "--tls-client-ca", "ca.pem"}, exitUsage, "use tls.mode enforcing with the client CA"},
	} {
		var out, errb strings.Builder
		require.Equal(t, tc.code, run(append([]string{"--listen", "127.0.0.1:0"}, tc.args...), &out, &errb), errb.String())
		require.Contains(t, errb.String(), tc.want)
		require.NotContains(t, errb.String(), "12345678")
	}
}
