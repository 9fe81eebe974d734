package conf

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fieldErrors flattens a Validate result into its FieldErrors.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *FieldError
		require.True(t, errors.As(e, &fe), "not a FieldError: %v", e)
		out = append(out, fe)
	}
	if err != nil {
		walk(err)
	}
	return out
}

// requireFails checks that err holds exactly one FieldError, for key, whose
// text names the key and contains problem.
func requireFails(t *testing.T, err error, key, problem string) {
	t.Helper()
	require.ErrorIs(t, err, ErrInvalid)
	fes := fieldErrors(t, err)
	require.Len(t, fes, 1, "want only %s to fail, got: %v", key, err)
	require.Equal(t, key, fes[0].Key)
	require.ErrorContains(t, err, "conf: "+key+" = ")
	require.ErrorContains(t, err, problem)
}

func TestBroker_Validate(t *testing.T) {
	for _, tc := range []struct {
		name, key, problem string
		mut                func(b *Broker)
	}{
		{"empty broker name", "broker_name", "must not be empty", func(b *Broker) { b.BrokerName = "" }},
		{"broker name chars", "broker_name", "letters, digits", func(b *Broker) { b.BrokerName = "a b" }},
		{"long cluster name", "cluster_name", "at most 127 bytes", func(b *Broker) { b.ClusterName = string(make([]byte, 128)) }},
		{"negative broker id", "broker_id", "must be >= 0", func(b *Broker) { b.BrokerID = -1 }},
		{"master with an id", "broker_id", "must be 0 for a master", func(b *Broker) { b.BrokerID = 1 }},
		{"slave with id 0", "broker_id", "must be > 0 for a slave", func(b *Broker) { b.Role = RoleSlave }},
		{"unknown role", "role", "must be ASYNC_MASTER, SYNC_MASTER or SLAVE", func(b *Broker) { b.Role = "MASTER" }},
		{"bad ha listen", "ha.listen", "", func(b *Broker) { b.HA.Listen = "nohost" }},
		{"zero sync timeout", "ha.sync_timeout", "must be >=", func(b *Broker) { b.HA.SyncTimeout = 0 }},
		{"listen no port", "listen", `must be "host:port"`, func(b *Broker) { b.Listen = "127.0.0.1" }},
		{"listen bad port", "listen", "port must be a number in 0..65535", func(b *Broker) { b.Listen = "127.0.0.1:65536" }},
		{"listen named port", "listen", "port must be a number", func(b *Broker) { b.Listen = "127.0.0.1:http" }},
		{"namesrv empty entry", "namesrv_addr", `entry 2 "": must be "host:port"`, func(b *Broker) { b.NamesrvAddr = "a:1;;b:2" }},
		{"namesrv trailing ;", "namesrv_addr", `entry 2 ""`, func(b *Broker) { b.NamesrvAddr = "a:1;" }},
		{"namesrv no host", "namesrv_addr", "host must not be empty", func(b *Broker) { b.NamesrvAddr = ":9876" }},
		{"namesrv port 0", "namesrv_addr", "port must be a number in 1..65535", func(b *Broker) { b.NamesrvAddr = "a:0" }},
		{"namesrv comma list", "namesrv_addr", `"a:1,b:2"`, func(b *Broker) { b.NamesrvAddr = "a:1,b:2" }},
		{"metrics listen", "metrics_listen", `must be "host:port"`, func(b *Broker) { b.MetricsListen = "9090" }},
		{"metrics on listen port", "metrics_listen", "same port as listen", func(b *Broker) { b.MetricsListen = ":10911" }},
		{"console listen", "console.listen", `must be "host:port"`, func(b *Broker) { b.Console.Listen = "8080" }},
		{"embedded on listen port", "embedded_namesrv.listen", "same port as listen",
			func(b *Broker) { b.EmbeddedNamesrv.Listen = "127.0.0.1:10911" }},
		{"register interval", "register_interval", "must be >= 10ms", func(b *Broker) { b.RegisterInterval = 0 }},
		{"register vs expiry", "register_interval", "must be < embedded_namesrv.broker_expiry (2m0s)",
			func(b *Broker) { b.RegisterInterval = 2 * time.Minute }},
		{"queue nums low", "default_topic_queue_nums", "must be >= 1", func(b *Broker) { b.DefaultTopicQueueNums = 0 }},
		{"queue nums high", "default_topic_queue_nums", "must be <= 1024", func(b *Broker) { b.DefaultTopicQueueNums = 1025 }},
		{"tx check interval", "transaction_check_interval", "must be >= 100ms", func(b *Broker) { b.TransactionCheckInterval = 0 }},
		{"tx timeout", "transaction_timeout", "must be <= 1h", func(b *Broker) { b.TransactionTimeout = 2 * time.Hour }},
		{"store dir", "store.dir", "must not be empty", func(b *Broker) { b.Store.Dir = "" }},
		{"segment small", "store.segment_size", "= 1000: must be >= 65536 (64 KiB)", func(b *Broker) {
			b.Store.SegmentSize, b.Store.MaxMessageSize = 1000, 1
		}},
		{"segment big", "store.segment_size", "must be <= 4294967296 (4 GiB)", func(b *Broker) { b.Store.SegmentSize = 4<<30 + 1 }},
		{"message vs segment", "store.max_message_size", "must be <= store.segment_size - 36864 (28672)",
			func(b *Broker) { b.Store.SegmentSize = 64 << 10 }},
		{"message zero", "store.max_message_size", "must be >= 1", func(b *Broker) { b.Store.MaxMessageSize = 0 }},
		{"flush mode", "store.flush", `must be "async" or "sync"`, func(b *Broker) { b.Store.Flush = "SYNC" }},
		{"flush interval", "store.flush_interval", "must be >= 1ms", func(b *Broker) { b.Store.FlushInterval = 0 }},
		{"sync flush timeout", "store.sync_flush_timeout", "must be <= 10m0s", func(b *Broker) { b.Store.SyncFlushTimeout = time.Hour }},
		{"group commit window", "store.group_commit_window", "= 101ms: must be <= 100ms",
			func(b *Broker) { b.Store.GroupCommitWindow = 101 * time.Millisecond }},
		{"group commit negative", "store.group_commit_window", "must be >= 0s", func(b *Broker) { b.Store.GroupCommitWindow = -1 }},
		{"warm ahead small", "store.warm_ahead", "must be >= 2097152 (2 MiB)", func(b *Broker) { b.Store.WarmAhead = 1 << 20 }},
		{"warm ahead negative", "store.warm_ahead", "must be >= 2097152 (2 MiB)", func(b *Broker) { b.Store.WarmAhead = -1 }},
		{"warm ahead big", "store.warm_ahead", "must be <= 1073741824 (1 GiB)", func(b *Broker) { b.Store.WarmAhead = 2 << 30 }},
		{"reserved time", "store.file_reserved_time", "must be >= 1s", func(b *Broker) { b.Store.FileReservedTime = 0 }},
		{"retention interval", "store.retention_interval", "must be <= 1h0m0s", func(b *Broker) { b.Store.RetentionInterval = 2 * time.Hour }},
		{"high watermark zero", "store.disk_high_watermark", "must be > 0 and < 1", func(b *Broker) { b.Store.DiskHighWatermark = 0 }},
		{"full watermark high", "store.disk_full_watermark", "= 1: must be <= 0.99", func(b *Broker) { b.Store.DiskFullWatermark = 1 }},
		{"watermark order", "store.disk_full_watermark", "must be > store.disk_high_watermark (0.95)",
			func(b *Broker) { b.Store.DiskHighWatermark = 0.95 }},
		{"disk pressure policy", "store.on_disk_pressure", `= "delete": must be "refuse" or "delete_oldest"`,
			func(b *Broker) { b.Store.OnDiskPressure = "delete" }},
		{"disk reserve small", "store.disk_reserve", "must be >= 1048576 (1 MiB)", func(b *Broker) { b.Store.DiskReserve = 4096 }},
		{"disk reserve negative", "store.disk_reserve", "must be >= 1048576 (1 MiB)", func(b *Broker) { b.Store.DiskReserve = -1 }},
		{"cq entries", "store.consume_queue_entries", "must be >= 1", func(b *Broker) { b.Store.ConsumeQueueEntries = 0 }},
		{"send queue", "store.send_queue_size", "must be <= 1000000", func(b *Broker) { b.Store.SendQueueSize = 1_000_001 }},
		{"frame small", "remoting.max_frame_size", "must be >= 65536 (64 KiB)", func(b *Broker) {
			b.Remoting.MaxFrameSize, b.Store.MaxMessageSize = 1024, 1
		}},
		{"frame vs message", "remoting.max_frame_size", "must be >= store.max_message_size + 65536 (4259840)",
			func(b *Broker) { b.Remoting.MaxFrameSize = 4 << 20 }},
		{"no frame timeout", "remoting.frame_timeout", "= 0s: must be >= 1ms", func(b *Broker) { b.Remoting.FrameTimeout = 0 }},
		{"frame timeout long", "remoting.frame_timeout", "must be <= 1h0m0s", func(b *Broker) { b.Remoting.FrameTimeout = 2 * time.Hour }},
		{"no connections", "remoting.max_connections_per_address", "= 0: must be >= 1", func(b *Broker) { b.Remoting.MaxConnsPerAddr = 0 }},
		{"too many connections", "remoting.max_connections_per_address", "must be <= 1000000",
			func(b *Broker) { b.Remoting.MaxConnsPerAddr = 1_000_001 }},
		{"max suspend", "long_poll.max_suspend", "must be >= 1ms", func(b *Broker) { b.LongPoll.MaxSuspend = 0 }},
		{"short poll wait", "long_poll.short_poll_wait", "must be <= 1m0s", func(b *Broker) { b.LongPoll.ShortPollWait = time.Hour }},
		{"pull max messages", "pull_max_messages", "must be <= 4096", func(b *Broker) { b.PullMaxMessages = 5000 }},
		{"gc percent", "gc_percent", "must be >= 25", func(b *Broker) { b.GCPercent = 0 }},
		{"embedded listen", "embedded_namesrv.listen", `must be "host:port"`, func(b *Broker) { b.EmbeddedNamesrv.Listen = "" }},
		{"embedded frame", "embedded_namesrv.remoting.max_frame_size", "must be <= 1073741824 (1 GiB)",
			func(b *Broker) { b.EmbeddedNamesrv.Remoting.MaxFrameSize = 1<<30 + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := DefaultBroker()
			tc.mut(&b)
			requireFails(t, b.Validate(), tc.key, tc.problem)
		})
	}
}

func TestBroker_ValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(b *Broker)
	}{
		{"free ports", func(b *Broker) {
			b.Listen, b.EmbeddedNamesrv.Listen, b.MetricsListen = ":0", "127.0.0.1:0", "127.0.0.1:0"
		}},
		{"namesrv list", func(b *Broker) { b.NamesrvAddr = "10.0.0.1:9876;ns.local:9876;[::1]:9876" }},
		{"remote namesrv frees expiry bound", func(b *Broker) { b.NamesrvAddr = "a:1"; b.RegisterInterval = 5 * time.Minute }},
		{"remote namesrv frees its port", func(b *Broker) { b.NamesrvAddr = "a:1"; b.EmbeddedNamesrv.Listen = b.Listen }},
		{"smallest segment", func(b *Broker) { b.Store.SegmentSize, b.Store.MaxMessageSize = 64<<10, 28<<10 }},
		{"largest segment", func(b *Broker) { b.Store.SegmentSize = 4 << 30 }},
		{"bounds inclusive", func(b *Broker) {
			b.Store.GroupCommitWindow, b.Store.DiskFullWatermark = 100*time.Millisecond, 0.99
			b.DefaultTopicQueueNums, b.LongPoll.ShortPollWait = 1024, 0
		}},
		{"sync flush", func(b *Broker) { b.Store.Flush = FlushSync }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := DefaultBroker()
			tc.mut(&b)
			require.NoError(t, b.Validate())
		})
	}
}

func TestBroker_ValidateReportsAll(t *testing.T) {
	b := DefaultBroker()
	b.Listen = "nope"
	b.Store.Flush = "never"
	b.Store.DiskHighWatermark = -1
	b.LongPoll.MaxSuspend = 0
	b.EmbeddedNamesrv.ScanInterval = 0
	var keys []string
	for _, fe := range fieldErrors(t, b.Validate()) {
		keys = append(keys, fe.Key)
	}
	slices.Sort(keys)
	require.Equal(t, []string{"embedded_namesrv.scan_interval", "listen", "long_poll.max_suspend",
		"store.disk_high_watermark", "store.flush"}, keys)
}

func TestNameserver_Validate(t *testing.T) {
	for _, tc := range []struct {
		name, key, problem string
		mut                func(n *Nameserver)
	}{
		{"listen", "listen", `= "": must be "host:port"`, func(n *Nameserver) { n.Listen = "" }},
		{"metrics", "metrics_listen", "port must be a number", func(n *Nameserver) { n.MetricsListen = "a:b" }},
		{"metrics on listen port", "metrics_listen", "same port as listen", func(n *Nameserver) { n.MetricsListen = "0.0.0.0:9876" }},
		{"expiry", "broker_expiry", "must be >= 10ms", func(n *Nameserver) { n.BrokerExpiry = time.Millisecond }},
		{"scan low", "scan_interval", "must be >= 10ms", func(n *Nameserver) { n.ScanInterval = 0 }},
		{"scan vs expiry", "scan_interval", "= 3m0s: must be <= broker_expiry (2m0s)", func(n *Nameserver) { n.ScanInterval = 3 * time.Minute }},
		{"frame", "remoting.max_frame_size", "must be >= 65536", func(n *Nameserver) { n.Remoting.MaxFrameSize = 0 }},
		{"idle", "remoting.idle_timeout", "must be >= 0s", func(n *Nameserver) { n.Remoting.IdleTimeout = -1 }},
		{"frame timeout", "remoting.frame_timeout", "must be >= 1ms", func(n *Nameserver) { n.Remoting.FrameTimeout = -1 }},
		{"connections", "remoting.max_connections_per_address", "must be >= 1", func(n *Nameserver) { n.Remoting.MaxConnsPerAddr = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := DefaultNameserver()
			tc.mut(&n)
			requireFails(t, n.Validate(), tc.key, tc.problem)
		})
	}
}

func TestHumanBytes(t *testing.T) {
	for in, want := range map[int64]string{0: "0 B", 1000: "1000 B", 64 << 10: "64 KiB", 4 << 20: "4 MiB", 4 << 30: "4 GiB", 1536: "1536 B"} {
		require.Equal(t, want, humanBytes(in))
	}
}

func TestController_Validate(t *testing.T) {
	ok := DefaultNameserver()
	ok.Controller.Enable = true
	ok.Controller.Peers = "n0=127.0.0.1:9880; n1=127.0.0.1:9881;n2=127.0.0.1:9882"
	require.NoError(t, ok.Validate())
	off := DefaultNameserver()
	off.Controller.Peers = "junk"
	require.NoError(t, off.Validate(), "a disabled controller's keys are not checked")

	for _, tc := range []struct {
		name, key string
		edit      func(*Controller)
	}{
		{"no id", "controller.id", func(c *Controller) { c.ID = "" }},
		{"no dir", "controller.dir", func(c *Controller) { c.Dir = "" }},
		{"peer without address", "controller.peers", func(c *Controller) { c.Peers = "n0" }},
		{"peer with port 0", "controller.peers", func(c *Controller) { c.Peers = "n0=127.0.0.1:0" }},
		{"self not a peer", "controller.peers", func(c *Controller) { c.Peers = "n1=127.0.0.1:9880" }},
		{"timeout too short", "controller.master_timeout", func(c *Controller) { c.MasterTimeout = time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := DefaultNameserver()
			n.Controller.Enable = true
			tc.edit(&n.Controller)
			err := n.Validate()
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.key, fe.Key, err.Error())
		})
	}
	s := DefaultControllerServer()
	require.NoError(t, s.Validate())
	s.Controller.Dir = ""
	require.Error(t, s.Validate())
	b := DefaultBroker()
	b.EmbeddedNamesrv.Controller.Enable = true
	require.ErrorContains(t, b.Validate(), "embedded_namesrv.controller.enable")
}

// TestTLS_PermissiveWithClientCA: a client CA on a permissive port is
// refused by every server's configuration (a broker's, its embedded
// nameserver's, a nameserver's, a controller's), naming both settings and
// the two ways out: plaintext connections would skip the certificate.
func TestTLS_PermissiveWithClientCA(t *testing.T) {
	permissive := TLS{Mode: TLSPermissive, ClientCA: "ca.pem"}
	want := func(t *testing.T, err error, key string) {
		t.Helper()
		requireFails(t, err, key, `= "ca.pem": cannot be used with `)
		for _, s := range []string{"mode permissive", "--tls-client-ca", "--tls-mode permissive", "plaintext",
			"mode enforcing with the client CA", "permissive without"} {
			require.ErrorContains(t, err, s)
		}
	}
	b := DefaultBroker()
	b.TLS = permissive
	want(t, b.Validate(), "tls.client_ca")
	b = DefaultBroker()
	b.EmbeddedNamesrv.TLS = permissive
	want(t, b.Validate(), "embedded_namesrv.tls.client_ca")
	n := DefaultNameserver()
	n.TLS = permissive
	want(t, n.Validate(), "tls.client_ca")
	s := DefaultControllerServer()
	s.TLS = permissive
	want(t, s.Validate(), "tls.client_ca")

	for _, ok := range []TLS{{Mode: TLSEnforcing, ClientCA: "ca.pem"}, {Mode: TLSPermissive}, {Mode: TLSDisabled}} {
		b, n, s := DefaultBroker(), DefaultNameserver(), DefaultControllerServer()
		b.TLS, n.TLS, s.TLS = ok, ok, ok
		require.NoError(t, b.Validate(), "%+v", ok)
		require.NoError(t, n.Validate(), "%+v", ok)
		require.NoError(t, s.Validate(), "%+v", ok)
	}
}

// TestConsole_AllowedHosts: console.allowed_hosts takes hosts and
// host:port entries separated by ';' and refuses what is not one, naming
// the entry.
func TestConsole_AllowedHosts(t *testing.T) {
	b := DefaultBroker()
	b.Console.AllowedHosts = " console.example.com; mq.local:8080;[::1]:9000 ;10.0.0.5;[fe80::1];"
	require.NoError(t, b.Validate())
	require.Equal(t, []string{"console.example.com", "mq.local:8080", "[::1]:9000", "10.0.0.5", "[fe80::1]"},
		b.Console.AllowedHostList())
	require.Empty(t, Console{}.AllowedHostList())
	for v, problem := range map[string]string{
		"a;http://b":   `entry 2 "http://b": must be a host or host:port, without scheme`,
		"a,b":          `entry 1 "a,b"`,
		"x/y":          `entry 1 "x/y"`,
		"a:b":          "port must be a number",
		"a:0":          "port must be a number in 1..65535",
		"fe80::1":      "an IPv6 address goes in brackets",
		":8080":        "host must not be empty",
		"user@host:80": "without scheme, path",
	} {
		b := DefaultBroker()
		b.Console.AllowedHosts = v
		requireFails(t, b.Validate(), "console.allowed_hosts", problem)
		n := DefaultNameserver()
		n.Console.AllowedHosts = v
		requireFails(t, n.Validate(), "console.allowed_hosts", problem)
	}
}
