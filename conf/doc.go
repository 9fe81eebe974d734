// Package conf holds Sluice's typed configuration: Broker for mqbroker (with
// nested Store, Remoting, LongPoll and an embedded Nameserver) and Nameserver
// for mqnamesrv. It is the only package that imports viper; everything else
// receives these structs by value at startup and never reads config again.
//
// # Sources and precedence
//
// From strongest to weakest: command-line flags > config file > environment
// variables > defaults (DefaultBroker, DefaultNameserver, which are the
// single-node quickstart: loopback addresses, an embedded nameserver, a store
// under ./data). LoadBroker and LoadNameserver apply the last three; the
// binaries apply flags to the returned struct and call Validate again.
//
// # Keys
//
// A key is a field's mapstructure tag, nested sections joined with ".":
// listen, namesrv_addr, store.segment_size, store.flush, long_poll.max_suspend,
// embedded_namesrv.remoting.max_frame_size. The struct tags are the only list
// of keys; defaults, environment lookups, the unknown-key check and Dump are
// derived from them. The documented samples conf/broker.yaml and
// conf/namesrv.yaml list every key with its default, and a test keeps them
// equal to the defaults.
//
// Config files are YAML. Durations are strings such as "500ms" or "72h"
// (a bare 0 is also accepted); sizes are integer bytes. A key that no field
// has is an error naming it; a key written with no value counts as unset.
//
// # Environment
//
// Every key reads EnvPrefix + the key upper-cased with "." replaced by "_":
// SLUICE_LISTEN, SLUICE_STORE_FLUSH=sync, SLUICE_STORE_SEGMENT_SIZE=4096,
// SLUICE_LONG_POLL_ENABLED=false, SLUICE_STORE_FLUSH_INTERVAL=2s. The
// nameserver uses the same prefix with its own keys (SLUICE_BROKER_EXPIRY), so
// SLUICE_LISTEN reaches both binaries when both run in one environment. Empty
// variables count as unset. A value that does not parse as its key's type
// (integer, bool, float, duration) is an error naming the variable.
//
// # Validation
//
// Validate checks every bound and reports all failures at once, each a
// *FieldError naming the key path, the value and the bound, e.g.
// "conf: store.segment_size = 1000: must be >= 65536 (64 KiB)".
package conf
