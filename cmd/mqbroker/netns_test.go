package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// netns is a network namespace the test made, joined to another by a veth
// pair: its only addresses are its own loopback and addr.
type netns struct {
	name, addr string
}

func (n netns) cmd(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.name, bin}, args...)...)
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
}

// twoHosts makes two namespaces linked by a veth pair with addresses in a
// /24 that exists only between them; the cleanup deletes them.
func twoHosts(t *testing.T) (a, b netns) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test makes network namespaces: CI runs as root")
		}
		t.Skip("needs root to make network namespaces (CI runs it)")
	}
	tag := fmt.Sprintf("%d-%d", os.Getpid()%100000, rand.IntN(1000))
	net := fmt.Sprintf("10.213.%d", rand.IntN(250)+1)
	a = netns{"sluice-a-" + tag, net + ".1"}
	b = netns{"sluice-b-" + tag, net + ".2"}
	va, vb := "sla"+tag, "slb"+tag
	va, vb = va[:min(len(va), 15)], vb[:min(len(vb), 15)]
	for _, n := range []netns{a, b} {
		ipCmd(t, "netns", "add", n.name)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", n.name).Run() })
		ipCmd(t, "-n", n.name, "link", "set", "lo", "up")
	}
	ipCmd(t, "link", "add", va, "netns", a.name, "type", "veth", "peer", "name", vb, "netns", b.name)
	for _, x := range []struct {
		n   netns
		dev string
	}{{a, va}, {b, vb}} {
		ipCmd(t, "-n", x.n.name, "addr", "add", x.n.addr+"/24", "dev", x.dev)
		ipCmd(t, "-n", x.n.name, "link", "set", x.dev, "up")
	}
	return a, b
}

// TestReplication_AcrossHosts runs a master and its slave on two "hosts"
// (network namespaces), each listening on every interface: each advertises
// its only non-loopback address, which is the only way the other (and a
// client) can reach it; the slave copies the master through it.
func TestReplication_AcrossHosts(t *testing.T) {
	a, b := twoHosts(t)
	bin := buildBinary(t)
	admin := filepath.Join(filepath.Dir(bin), "mqadmin")
	out, err := exec.Command("go", "build", "-o", admin, "../mqadmin").CombinedOutput()
	require.NoError(t, err, string(out))

	master := a.cmd(bin, "--listen", "0.0.0.0:10911", "--store-dir", filepath.Join(t.TempDir(), "m"), "--role", "SYNC_MASTER")
	master.Env = append(os.Environ(), "SLUICE_EMBEDDED_NAMESRV_LISTEN=0.0.0.0:9876", "SLUICE_STORE_SEGMENT_SIZE=1048576",
		"SLUICE_STORE_MAX_MESSAGE_SIZE=65536", "SLUICE_REGISTER_INTERVAL=200ms")
	maddr, _ := serving(t, master)
	require.Equal(t, a.addr+":10911", maddr, "a broker on 0.0.0.0 advertises its non-loopback address")
	ns := a.addr + ":9876"
	slave := b.cmd(bin, "-n", ns, "--listen", "0.0.0.0:10911", "--store-dir", filepath.Join(t.TempDir(), "s"),
		"--role", "SLAVE", "--broker-id", "1")
	slave.Env = append(os.Environ(), "SLUICE_STORE_SEGMENT_SIZE=1048576", "SLUICE_STORE_MAX_MESSAGE_SIZE=65536",
		"SLUICE_REGISTER_INTERVAL=200ms")
	saddr, _ := serving(t, slave)
	require.Equal(t, b.addr+":10911", saddr)

	mqadmin := func(args ...string) string {
		out, err := b.cmd(admin, append([]string{"-n", ns}, args...)...).CombinedOutput()
		require.NoError(t, err, "mqadmin %v: %s", args, out)
		return string(out)
	}
	// The master answers SEND_OK once its slave has the message.
	require.Eventually(t, func() bool {
		out, err := b.cmd(admin, "-n", ns, "sendMessage", "-t", "orders", "-p", "hello").CombinedOutput()
		return err == nil && strings.Contains(string(out), "SEND_OK")
	}, 30*time.Second, 100*time.Millisecond)
	var cl struct {
		Brokers []struct {
			BrokerID int64             `json:"brokerId"`
			Addr     string            `json:"brokerAddr"`
			Runtime  map[string]string `json:"runtime"`
		} `json:"brokers"`
	}
	require.Eventually(t, func() bool {
		require.NoError(t, json.Unmarshal([]byte(mqadmin("--json", "clusterList")), &cl))
		return len(cl.Brokers) == 2 && cl.Brokers[1].Runtime["commitLogMaxOffset"] == cl.Brokers[0].Runtime["commitLogMaxOffset"]
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, maddr, cl.Brokers[0].Addr)
	require.Equal(t, saddr, cl.Brokers[1].Addr)
	require.Equal(t, "replicating", cl.Brokers[1].Runtime["haState"])
	require.Equal(t, a.addr+":10912", cl.Brokers[1].Runtime["haMaster"], "the slave dialed the master's advertised HA address")
	require.Equal(t, "0", cl.Brokers[1].Runtime["haLagBytes"])
}
