package conf

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/spf13/viper"
	"github.com/stretchr/testify/require"
)

// clearEnv blanks every SLUICE_ variable of both structs for the test, so the
// machine's environment cannot leak in (an empty variable counts as unset).
func clearEnv(t *testing.T) {
	t.Helper()
	for _, def := range []any{DefaultBroker(), DefaultNameserver()} {
		for _, l := range leaves(reflect.ValueOf(def), "") {
			t.Setenv(EnvVar(l.key), "")
		}
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "conf.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func keysOf(def any) []string {
	var keys []string
	for _, l := range leaves(reflect.ValueOf(def), "") {
		keys = append(keys, l.key)
	}
	slices.Sort(keys)
	return keys
}

func TestDefaults_Valid(t *testing.T) {
	require.NoError(t, DefaultBroker().Validate())
	require.NoError(t, DefaultNameserver().Validate())
}

func TestLoad_NoFileGivesDefaults(t *testing.T) {
	clearEnv(t)
	b, err := LoadBroker("")
	require.NoError(t, err)
	require.Equal(t, DefaultBroker(), b)
	n, err := LoadNameserver("")
	require.NoError(t, err)
	require.Equal(t, DefaultNameserver(), n)
}

// TestSamples keeps conf/broker.yaml and conf/namesrv.yaml from drifting: each
// lists exactly the known keys, and loads (UnmarshalExact + Validate) to the
// defaults.
func TestSamples(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		file string
		def  any
		load func(string) (any, error)
	}{
		{"broker.yaml", DefaultBroker(), func(p string) (any, error) { return LoadBroker(p) }},
		{"namesrv.yaml", DefaultNameserver(), func(p string) (any, error) { return LoadNameserver(p) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			v := viper.New()
			v.SetConfigType("yaml")
			require.NoError(t, v.ReadConfig(bytes.NewReader(data)))
			got := v.AllKeys()
			slices.Sort(got)
			require.Equal(t, keysOf(tc.def), got, "sample must list every key, and only those")

			cfg, err := tc.load(tc.file)
			require.NoError(t, err)
			require.Equal(t, tc.def, cfg)
		})
	}
}

func TestEnvVar_Unique(t *testing.T) {
	for _, def := range []any{DefaultBroker(), DefaultNameserver()} {
		seen := map[string]string{}
		for _, k := range keysOf(def) {
			name := EnvVar(k)
			require.NotContains(t, seen, name, "keys %s and %s share a variable", seen[name], k)
			seen[name] = k
		}
	}
	require.Equal(t, "SLUICE_STORE_SEGMENT_SIZE", EnvVar("store.segment_size"))
}

func TestLoadBroker_Env(t *testing.T) {
	for _, tc := range []struct {
		env, value string
		want       func(b *Broker)
	}{
		{"SLUICE_LISTEN", "0.0.0.0:20911", func(b *Broker) { b.Listen = "0.0.0.0:20911" }},
		{"SLUICE_NAMESRV_ADDR", "10.0.0.1:9876;10.0.0.2:9876", func(b *Broker) { b.NamesrvAddr = "10.0.0.1:9876;10.0.0.2:9876" }},
		{"SLUICE_STORE_FLUSH", "sync", func(b *Broker) { b.Store.Flush = FlushSync }},
		{"SLUICE_REGISTER_INTERVAL", "5s", func(b *Broker) { b.RegisterInterval = 5 * time.Second }},
		{"SLUICE_STORE_FLUSH_INTERVAL", "2s", func(b *Broker) { b.Store.FlushInterval = 2 * time.Second }},
		{"SLUICE_AUTO_CREATE_TOPIC", "false", func(b *Broker) { b.AutoCreateTopic = false }},
		{"SLUICE_STORE_PREALLOCATE", "0", func(b *Broker) { b.Store.Preallocate = false }},
		{"SLUICE_STORE_WARM_AHEAD", "0", func(b *Broker) { b.Store.WarmAhead = 0 }},
		{"SLUICE_ROLE", "SYNC_MASTER", func(b *Broker) { b.Role = RoleSyncMaster }},
		{"SLUICE_HA_SYNC_TIMEOUT", "2s", func(b *Broker) { b.HA.SyncTimeout = 2 * time.Second }},
		{"SLUICE_DEFAULT_TOPIC_QUEUE_NUMS", "4", func(b *Broker) { b.DefaultTopicQueueNums = 4 }},
		{"SLUICE_STORE_SEGMENT_SIZE", "67108864", func(b *Broker) { b.Store.SegmentSize = 64 << 20 }},
		{"SLUICE_STORE_SEND_QUEUE_SIZE", "5", func(b *Broker) { b.Store.SendQueueSize = 5 }},
		{"SLUICE_STORE_DISK_HIGH_WATERMARK", "0.5", func(b *Broker) { b.Store.DiskHighWatermark = 0.5 }},
		{"SLUICE_LONG_POLL_ENABLED", "false", func(b *Broker) { b.LongPoll.Enabled = false }},
		{"SLUICE_FILTER_PROPERTY_ENABLED", "false", func(b *Broker) { b.Filter.PropertyEnabled = false }},
		{"SLUICE_DEDUP_WINDOW", "0s", func(b *Broker) { b.Dedup.Window = 0 }},
		{"SLUICE_DEDUP_MAX_KEYS", "5000", func(b *Broker) { b.Dedup.MaxKeys = 5000 }},
		{"SLUICE_PULL_MAX_MESSAGES", "64", func(b *Broker) { b.PullMaxMessages = 64 }},
		{"SLUICE_GC_PERCENT", "200", func(b *Broker) { b.GCPercent = 200 }},
		{"SLUICE_EMBEDDED_NAMESRV_REMOTING_MAX_FRAME_SIZE", "8388608", func(b *Broker) { b.EmbeddedNamesrv.Remoting.MaxFrameSize = 8 << 20 }},
	} {
		t.Run(tc.env, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tc.env, tc.value)
			want := DefaultBroker()
			tc.want(&want)
			got, err := LoadBroker("")
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

func TestLoadNameserver_Env(t *testing.T) {
	clearEnv(t)
	t.Setenv("SLUICE_BROKER_EXPIRY", "60s")
	t.Setenv("SLUICE_REMOTING_IDLE_TIMEOUT", "0s")
	want := DefaultNameserver()
	want.BrokerExpiry = time.Minute
	want.Remoting.IdleTimeout = 0
	got, err := LoadNameserver("")
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestLoad_FileBeatsEnvBeatsDefaults(t *testing.T) {
	clearEnv(t)
	t.Setenv("SLUICE_STORE_FLUSH", "sync")
	t.Setenv("SLUICE_STORE_FLUSH_INTERVAL", "1s")
	t.Setenv("SLUICE_LISTEN", "127.0.0.1:20911")
	path := writeFile(t, "store:\n  flush: async\n  flush_interval: 250ms\n")
	got, err := LoadBroker(path)
	require.NoError(t, err)
	want := DefaultBroker()
	want.Store.FlushInterval = 250 * time.Millisecond // file over env
	want.Listen = "127.0.0.1:20911"                   // env over default
	require.Equal(t, want, got)                       // Flush: file "async" over env "sync"

	t.Setenv("SLUICE_BROKER_EXPIRY", "60s")
	n, err := LoadNameserver(writeFile(t, "broker_expiry: 90s\n"))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, n.BrokerExpiry)
}

func TestLoad_FileValues(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		name, yaml string
		want       func(b *Broker)
	}{
		{"empty file", "", func(*Broker) {}},
		{"key with no value is unset", "listen:\nstore:\n", func(*Broker) {}},
		{"bare zero duration", "store:\n  group_commit_window: 0\n", func(*Broker) {}},
		{"dotted key", "store.flush: sync\n", func(b *Broker) { b.Store.Flush = FlushSync }},
		{"deep nesting", "embedded_namesrv:\n  remoting:\n    idle_timeout: 5m\n",
			func(b *Broker) { b.EmbeddedNamesrv.Remoting.IdleTimeout = 5 * time.Minute }},
		{"integral float to int", "store:\n  segment_size: 2.0e+7\n", func(b *Broker) { b.Store.SegmentSize = 20_000_000 }},
		{"float", "store:\n  disk_full_watermark: 0.95\n", func(b *Broker) { b.Store.DiskFullWatermark = 0.95 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := DefaultBroker()
			tc.want(&want)
			got, err := LoadBroker(writeFile(t, tc.yaml))
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

func TestLoad_UnknownKey(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"nested typo", "store:\n  segmnt_size: 1\n", []string{`"store.segmnt_size"`, `did you mean "store.segment_size"`}},
		{"top-level typo", "listne: 127.0.0.1:1\n", []string{`"listne"`, `did you mean "listen"`}},
		{"unrelated", "zookeeper: x\n", []string{`"zookeeper"`}},
		{"section given a value", "store: 5\n", []string{`"store" is a section`}},
		{"leaf given a mapping", "listen:\n  port: 1\n", []string{`"listen.port"`}},
		{"two typos", "flsh: 1\nstore:\n  dri: x\n", []string{`"flsh"`, `"store.dri"`}},
		{"renamed", "remoting:\n  read_timeout: 0s\n", []string{`"remoting.read_timeout"`,
			`renamed remoting.frame_timeout: a limit for a whole frame, "30s" by default; 0 no longer disables it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.yaml)
			_, err := LoadBroker(path)
			require.Error(t, err)
			require.ErrorContains(t, err, path)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
	_, err := LoadNameserver(writeFile(t, "store:\n  dir: x\n"))
	require.ErrorIs(t, err, ErrUnknownKey)
	require.ErrorContains(t, err, `"store.dir"`)
}

func TestLoad_BadFileValue(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"duration as number", "store:\n  flush_interval: 500\n", "store.flush_interval"},
		{"duration typo", "store:\n  flush_interval: fast\n", "store.flush_interval"},
		{"int32 overflow", "store:\n  max_message_size: 99999999999\n", "store.max_message_size"},
		{"fraction to int", "store:\n  segment_size: 1.5\n", "store.segment_size"},
		{"string to int", "default_topic_queue_nums: eight\n", "default_topic_queue_nums"},
		{"string to bool", "auto_create_topic: \"yes\"\n", "auto_create_topic"},
		{"out of bounds", "store:\n  segment_size: 1000\n", "store.segment_size = 1000: must be >= 65536"},
		{"int to float, then bounds", "store:\n  disk_high_watermark: 0\n", "store.disk_high_watermark = 0: must be > 0"},
		{"bad yaml", "listen: [\n", "parse config file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadBroker(writeFile(t, tc.yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLoad_BadEnv(t *testing.T) {
	for _, tc := range []struct{ env, value string }{
		{"SLUICE_STORE_SEGMENT_SIZE", "1GiB"},
		{"SLUICE_AUTO_CREATE_TOPIC", "maybe"},
		{"SLUICE_STORE_FLUSH_INTERVAL", "500"},
		{"SLUICE_DEFAULT_TOPIC_QUEUE_NUMS", "99999999999"},
		{"SLUICE_STORE_DISK_FULL_WATERMARK", "ninety"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tc.env, tc.value)
			_, err := LoadBroker("")
			require.ErrorIs(t, err, ErrBadEnv)
			require.ErrorContains(t, err, tc.env+"=")
		})
	}
	t.Run("all reported", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("SLUICE_BROKER_EXPIRY", "soon")
		t.Setenv("SLUICE_SCAN_INTERVAL", "10")
		_, err := LoadNameserver("")
		require.ErrorContains(t, err, "SLUICE_BROKER_EXPIRY")
		require.ErrorContains(t, err, "SLUICE_SCAN_INTERVAL")
	})
	t.Run("env value fails Validate", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("SLUICE_STORE_FLUSH", "always")
		_, err := LoadBroker("")
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, `store.flush = "always"`)
	})
}

func TestLoad_MissingFile(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := LoadBroker(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, path)
	_, err = LoadNameserver(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestDump_RoundTrip(t *testing.T) {
	clearEnv(t)
	b := DefaultBroker()
	b.BrokerName = "broker-b"
	b.NamesrvAddr = "10.0.0.1:9876;[::1]:9876"
	b.Store.Dir = "/var/lib/sluice \"q\""
	b.Store.Flush = FlushSync
	b.Store.GroupCommitWindow = 1500 * time.Microsecond
	b.Store.DiskHighWatermark = 0.6
	b.LongPoll.Enabled = false
	b.EmbeddedNamesrv.ScanInterval = time.Second
	got, err := LoadBroker(writeFile(t, b.Dump()))
	require.NoError(t, err)
	require.Equal(t, b, got)

	n := DefaultNameserver()
	n.MetricsListen = ":9877"
	n.Remoting.FrameTimeout = 3 * time.Second
	n.Remoting.MaxConnsPerAddr = 7
	gotN, err := LoadNameserver(writeFile(t, n.Dump()))
	require.NoError(t, err)
	require.Equal(t, n, gotN)
}

func TestBroker_NamesrvAddrs(t *testing.T) {
	b := DefaultBroker()
	require.True(t, b.EmbedNamesrv())
	require.Nil(t, b.NamesrvAddrs())
	b.NamesrvAddr = "a:1;b:2"
	require.False(t, b.EmbedNamesrv())
	require.Equal(t, []string{"a:1", "b:2"}, b.NamesrvAddrs())
	require.False(t, b.Store.SyncFlush())
	b.Store.Flush = FlushSync
	require.True(t, b.Store.SyncFlush())
}

func TestLeaves_RejectsUntaggedField(t *testing.T) {
	type bad struct{ X int }
	require.Panics(t, func() { leaves(reflect.ValueOf(bad{}), "") })
	require.True(t, errors.Is(&FieldError{}, ErrInvalid))
}

// TestKeys: the key lists are the loaders' keys: each variable they name
// sets its key (checked on one key of each list), and paths are unique.
func TestKeys(t *testing.T) {
	for name, keys := range map[string][]Key{"broker": BrokerKeys(), "nameserver": NameserverKeys(), "controller": ControllerKeys()} {
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k.Path] || k.Env != EnvVar(k.Path) || k.Default == "" {
				t.Errorf("%s: bad or repeated key %+v", name, k)
			}
			seen[k.Path] = true
		}
		if len(keys) < 5 {
			t.Errorf("%s: only %d keys", name, len(keys))
		}
	}
	t.Setenv("SLUICE_STORE_FLUSH", "sync")
	b, err := LoadBroker("")
	if err != nil || b.Store.Flush != FlushSync {
		t.Fatalf("SLUICE_STORE_FLUSH=sync: %v, flush %q", err, b.Store.Flush)
	}
	found := false
	for _, k := range BrokerKeys() {
		found = found || (k.Path == "store.flush" && k.Env == "SLUICE_STORE_FLUSH" && k.Default == `"async"`)
	}
	if !found {
		t.Error("store.flush is not listed with SLUICE_STORE_FLUSH and its default")
	}
}
