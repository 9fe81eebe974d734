package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConsole: mqnamesrv --console-listen serves the console, asking that
// nameserver, and prints its address; a bad address is a usage error.
func TestConsole(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0")
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`^Sluice console on http://(\S+)/\n$`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	resp, err := http.Get("http://" + m[1] + "/api/cluster")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var c struct {
		Brokers []any `json:"brokers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))
	require.Empty(t, c.Brokers, "no broker registered with this nameserver")

	code, stderr := runToExit(t, bin, "--console-listen", "localhost")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "console.listen")
}
