package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

var consoleRE = regexp.MustCompile(`^Sluice console on http://(\S+)/( \(read-only\))?$`)

// TestMQBroker_Console: the quickstart prints its console's address on the
// line after the broker's, and serves the API there; --console-read-only
// says so in /api/config; --console-listen off starts none; a bad address
// is a usage error naming the flag's key.
func TestMQBroker_Console(t *testing.T) {
	bin := buildBinary(t)
	_, rd, _ := startQuickstart(t, bin, "--console-listen", "127.0.0.1:0", "--console-read-only")
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	m := consoleRE.FindStringSubmatch(line[:len(line)-1])
	require.NotNil(t, m, line)
	require.Equal(t, " (read-only)", m[2])
	resp, err := http.Get("http://" + m[1] + "/api/config")
	require.NoError(t, err)
	defer resp.Body.Close()
	var cfg struct {
		ReadOnly    bool     `json:"readOnly"`
		NameServers []string `json:"nameServers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&cfg))
	require.True(t, cfg.ReadOnly)
	require.Len(t, cfg.NameServers, 1)

	out, err := exec.Command(bin, "--console-listen", "8080").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "console.listen")
}

// TestMQBroker_ConsoleOff: with --console-listen off the quickstart prints
// no console line.
func TestMQBroker_ConsoleOff(t *testing.T) {
	cmd, rd, stderr := startQuickstart(t, buildBinary(t), "--console-listen", "off")
	// Once it has stopped, everything it printed is there to read.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	errs, err := io.ReadAll(stderr)
	require.NoError(t, err)
	require.Contains(t, string(errs), "mqbroker: stopped")
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	require.Empty(t, string(rest))
}

// startQuickstart runs bin with an embedded nameserver on free ports and
// args, reads the broker's first line and returns the process with the
// rest of its stdout and its stderr.
func startQuickstart(t *testing.T, bin string, args ...string) (*exec.Cmd, *bufio.Reader, io.Reader) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--listen", "127.0.0.1:0", "--store-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), "SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Regexp(t, servingRE, line)
	return cmd, rd, stderr
}
