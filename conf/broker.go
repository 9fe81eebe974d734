package conf

import (
	"strings"
	"time"
)

// Flush modes accepted by Store.Flush.
const (
	// FlushAsync acknowledges a put once it is in the page cache; a background
	// loop fsyncs every Store.FlushInterval.
	FlushAsync = "async"
	// FlushSync acknowledges a put only after the fsync that covers it.
	FlushSync = "sync"
)

// Disk pressure policies accepted by Store.OnDiskPressure.
const (
	// DiskPressureRefuse deletes nothing early: above the high watermark the
	// broker warns, above the full watermark (or at ENOSPC) it refuses sends
	// until space returns. Nothing acknowledged and unconsumed is lost.
	DiskPressureRefuse = "refuse"
	// DiskPressureDeleteOldest deletes the oldest segments above the high
	// watermark, whether consumers have read them or not (RocketMQ's
	// behaviour); each unconsumed message it deletes is logged and counted.
	DiskPressureDeleteOldest = "delete_oldest"
)

// Broker is the configuration of one mqbroker process. Keys in files and
// environment variables are the mapstructure tags, nested with "."; see the
// package documentation for precedence and naming.
type Broker struct {
	// BrokerName names the broker in routes; master and slaves of one broker
	// share it. Letters, digits, '-', '_' and '.', at most 127 bytes.
	BrokerName string `mapstructure:"broker_name"`
	// ClusterName is the cluster the broker registers in. Same syntax as
	// BrokerName.
	ClusterName string `mapstructure:"cluster_name"`
	// BrokerID is 0 for a master, > 0 for a slave.
	BrokerID int64 `mapstructure:"broker_id"`
	// Role is RoleAsyncMaster, RoleSyncMaster or RoleSlave (RocketMQ's
	// brokerRole). A master has broker_id 0, a slave > 0.
	Role string `mapstructure:"role"`
	// Advertise is the ip:port clients are told (RocketMQ's brokerIP1).
	// Empty: the listen address, or, when it is unspecified (0.0.0.0), the
	// machine's first non-loopback address.
	Advertise string `mapstructure:"advertise"`
	// HA configures replication between a master and its slaves.
	HA HA `mapstructure:"ha"`
	// Controller lists the controllers as "host:port;host:port" (their
	// remoting addresses): controller mode, where the broker's role is
	// elected (Role and a non-zero BrokerID are then ignored). Empty: off.
	Controller string `mapstructure:"controller"`
	// SlaveReadEnable lets a master suggest a slave to consumers that read
	// far behind the log's end (cold reads), as RocketMQ's slaveReadEnable.
	SlaveReadEnable bool `mapstructure:"slave_read_enable"`
	// Listen is the host:port the remoting server binds. An empty host binds
	// every interface; port 0 picks a free port (tests).
	Listen string `mapstructure:"listen"`
	// NamesrvAddr lists the nameservers as "host:port;host:port". Empty means
	// the broker embeds a nameserver configured by EmbeddedNamesrv.
	NamesrvAddr string `mapstructure:"namesrv_addr"`
	// MetricsListen is the host:port of the metrics HTTP endpoint; empty
	// disables it.
	MetricsListen string `mapstructure:"metrics_listen"`
	// Console configures the web console (console.listen, console.read_only).
	Console Console `mapstructure:"console"`
	// GRPC configures the RocketMQ 5 gRPC service (grpc.listen).
	GRPC GRPC `mapstructure:"grpc"`
	// RegisterInterval is how often the broker registers with every
	// nameserver. With an embedded nameserver it must be below its
	// broker_expiry.
	RegisterInterval time.Duration `mapstructure:"register_interval"`
	// AutoCreateTopic lets a send to an unknown topic create it from the
	// template topic TBW102.
	AutoCreateTopic bool `mapstructure:"auto_create_topic"`
	// DefaultTopicQueueNums is TBW102's queue count (1..1024). A topic
	// auto-created by a send gets this many queues, capped by the count the
	// producer asks for (its DefaultTopicQueueNums, 4 in RocketMQ's clients
	// and Sluice's), as RocketMQ's broker does.
	DefaultTopicQueueNums int32 `mapstructure:"default_topic_queue_nums"`
	// TransactionCheckInterval is how often the broker asks producers about
	// half messages left undecided (RocketMQ's transactionCheckInterval;
	// 100ms..1h), TransactionTimeout how old one must be before it is asked
	// about (transactionTimeOut; 100ms..1h).
	TransactionCheckInterval time.Duration `mapstructure:"transaction_check_interval"`
	TransactionTimeout       time.Duration `mapstructure:"transaction_timeout"`
	// Store configures the message store (commitlog and consume queues).
	Store Store `mapstructure:"store"`
	// Remoting configures the broker's remoting server.
	Remoting Remoting `mapstructure:"remoting"`
	// LongPoll configures parked pull requests.
	LongPoll LongPoll `mapstructure:"long_poll"`
	// Filter configures the broker's message filters.
	Filter Filter `mapstructure:"filter"`
	// Dedup configures the duplicate window (exactly-once publishing).
	Dedup Dedup `mapstructure:"dedup"`
	// PullMaxMessages caps the messages one pull returns, whatever the
	// client asks (RocketMQ's maxTransferCountOnMessageInMemory; 1..4096).
	PullMaxMessages int32 `mapstructure:"pull_max_messages"`
	// GCPercent is the Go collector's GOGC for mqbroker (25..10000), unless
	// the GOGC environment variable is set. A broker's live heap is small and
	// each request allocates its frame, so the default 100 collects very
	// often; 400 measured 25% less broker CPU on batch sends.
	GCPercent int `mapstructure:"gc_percent"`
	// EmbeddedNamesrv configures the nameserver the broker runs in-process
	// when NamesrvAddr is empty; ignored otherwise.
	EmbeddedNamesrv Nameserver `mapstructure:"embedded_namesrv"`
	// ACL is access control (off unless acl.file is set) and the broker's
	// own credentials.
	ACL BrokerACL `mapstructure:"acl"`
	// TLS is the remoting port's TLS.
	TLS TLS `mapstructure:"tls"`
	// Pprof serves net/http/pprof on the metrics listener.
	Pprof bool `mapstructure:"pprof"`
	// NamesrvTLS is how the broker dials the nameservers.
	NamesrvTLS ClientTLS `mapstructure:"namesrv_tls"`
	// ControllerTLS is how the broker dials the controllers (controller
	// mode).
	ControllerTLS ClientTLS `mapstructure:"controller_tls"`
}

// Broker roles accepted by Broker.Role.
const (
	// RoleAsyncMaster acknowledges a send after its own write (and flush,
	// with flush sync); slaves copy it behind.
	RoleAsyncMaster = "ASYNC_MASTER"
	// RoleSyncMaster acknowledges a send only once a slave has its bytes
	// (FLUSH_SLAVE_TIMEOUT after ha.sync_timeout, SLAVE_NOT_AVAILABLE at
	// once with no slave caught up).
	RoleSyncMaster = "SYNC_MASTER"
	// RoleSlave copies its master's commitlog and serves reads; it refuses
	// sends.
	RoleSlave = "SLAVE"
)

// HA configures replication (RocketMQ 4.x's HA service).
type HA struct {
	// Listen is the host:port a master accepts its slaves on. Empty: the
	// listen host, port + 1 (RocketMQ's 10912).
	Listen string `mapstructure:"listen"`
	// Advertise is the ip:port slaves are told to dial (RocketMQ's
	// brokerIP2). Empty: derived from ha.listen as advertise is from listen.
	Advertise string `mapstructure:"advertise"`
	// SyncTimeout bounds how long a SYNC_MASTER send waits for a slave
	// (1ms..10m; RocketMQ's syncFlushTimeout).
	SyncTimeout time.Duration `mapstructure:"sync_timeout"`
	// MaxLag is how far (bytes) a slave may be behind and still count for
	// SYNC_MASTER sends (RocketMQ's haSlaveFallbehindMax).
	MaxLag int64 `mapstructure:"max_lag"`
	// MaxCatchupLag (controller mode): a slave that has not caught up with
	// the master for this long leaves the SyncStateSet (1s..1h).
	MaxCatchupLag time.Duration `mapstructure:"max_catchup_lag"`
	// AllAckInSyncStateSet (controller mode): a send is acknowledged once
	// every replica of the SyncStateSet has it; otherwise once
	// min_in_sync_replicas do.
	AllAckInSyncStateSet bool `mapstructure:"all_ack_in_sync_state_set"`
	// MinInSyncReplicas (controller mode): fewer replicas (the master
	// included) in the SyncStateSet answers sends IN_SYNC_REPLICAS_NOT_ENOUGH.
	MinInSyncReplicas int `mapstructure:"min_in_sync_replicas"`
}

// ControllerMode reports whether the broker's role is elected.
func (b Broker) ControllerMode() bool { return b.Controller != "" }

// IsSlave reports whether the broker is configured as a slave (outside
// controller mode).
func (b Broker) IsSlave() bool { return b.Role == RoleSlave && !b.ControllerMode() }

// Store configures the message store. Sizes are bytes.
type Store struct {
	// Dir is the data directory (commitlog, consume queues, state files).
	Dir string `mapstructure:"dir"`
	// SegmentSize is the size of one commitlog segment file, 64 KiB..4 GiB.
	SegmentSize int64 `mapstructure:"segment_size"`
	// MaxMessageSize caps a message body. A record of this size plus
	// MaxRecordOverhead must fit in one segment.
	MaxMessageSize int32 `mapstructure:"max_message_size"`
	// Flush is FlushAsync or FlushSync.
	Flush string `mapstructure:"flush"`
	// FlushInterval is the fsync period in async mode (1ms..1m).
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// SyncFlushTimeout bounds how long a sync-mode put waits for its fsync
	// before answering FLUSH_DISK_TIMEOUT (1ms..10m).
	SyncFlushTimeout time.Duration `mapstructure:"sync_flush_timeout"`
	// GroupCommitWindow delays an fsync to gather more puts into it; 0 starts
	// the next fsync as soon as the previous one ends (0..100ms).
	GroupCommitWindow time.Duration `mapstructure:"group_commit_window"`
	// Preallocate makes new segment files full-size up front.
	Preallocate bool `mapstructure:"preallocate"`
	// WarmAhead, in sync mode with Preallocate, keeps this many bytes past
	// the end of the commitlog written with zeros and fsynced, so that the
	// fsync acknowledging a send flushes data and no file system metadata.
	// 0 = off; otherwise 2 MiB..1 GiB.
	WarmAhead int64 `mapstructure:"warm_ahead"`
	// ReadAhead is how far ahead of a reader replaying the commitlog from
	// disk (its reads miss the page cache) the log is read into the cache
	// in the background. 0 = off (the kernel's read-ahead only); otherwise
	// 1 MiB..1 GiB.
	ReadAhead int64 `mapstructure:"read_ahead"`
	// CheckCRCOnRecover verifies body CRCs while recovering the log tail.
	CheckCRCOnRecover bool `mapstructure:"check_crc_on_recover"`
	// FileReservedTime is the age after which a segment is deleted (>= 1s).
	FileReservedTime time.Duration `mapstructure:"file_reserved_time"`
	// RetentionInterval is how often retention runs (10ms..1h).
	RetentionInterval time.Duration `mapstructure:"retention_interval"`
	// DiskHighWatermark is the share of the disk in use above which the
	// broker warns that it will refuse sends soon, and, with OnDiskPressure
	// DiskPressureDeleteOldest, deletes the oldest segments before their
	// time (0 < x < full).
	DiskHighWatermark float64 `mapstructure:"disk_high_watermark"`
	// DiskFullWatermark is the share of the disk in use above which appends
	// are refused with SERVICE_NOT_AVAILABLE (high < x <= 0.99).
	DiskFullWatermark float64 `mapstructure:"disk_full_watermark"`
	// OnDiskPressure is what the store does above DiskHighWatermark:
	// DiskPressureRefuse (warn, then refuse sends above the full watermark;
	// nothing is deleted before file_reserved_time) or
	// DiskPressureDeleteOldest (delete the oldest segments, consumed or not).
	OnDiskPressure string `mapstructure:"on_disk_pressure"`
	// DiskReserve is the size of the reserve file the store keeps on its
	// disk and deletes when the disk fills, so that the indexes, the
	// checkpoints and a restart still find room; 0 = none (1 MiB..1 GiB).
	DiskReserve int64 `mapstructure:"disk_reserve"`
	// ConsumeQueueEntries is the number of 20-byte entries per consume-queue
	// file (1..10,000,000).
	ConsumeQueueEntries int32 `mapstructure:"consume_queue_entries"`
	// SendQueueSize is how many senders may wait for the store before new
	// sends get SYSTEM_BUSY (1..1,000,000).
	SendQueueSize int `mapstructure:"send_queue_size"`
}

// SyncFlush reports whether puts wait for their fsync.
func (s Store) SyncFlush() bool { return s.Flush == FlushSync }

// Remoting configures a remoting server (broker or nameserver).
type Remoting struct {
	// MaxFrameSize caps one frame; a larger length prefix closes the
	// connection (64 KiB..1 GiB).
	MaxFrameSize int32 `mapstructure:"max_frame_size"`
	// FrameTimeout bounds one frame from its first bytes to its last: a
	// connection that does not complete a started frame in time is closed
	// (1ms..1h; it replaces read_timeout, whose 0 meant no limit).
	FrameTimeout time.Duration `mapstructure:"frame_timeout"`
	// IdleTimeout closes a connection with no traffic for this long; 0 means
	// never.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// MaxConnsPerAddr caps the open connections from one remote IP address;
	// a connection over it is closed at accept (1..1,000,000).
	MaxConnsPerAddr int `mapstructure:"max_connections_per_address"`
}

// LongPoll configures how pull requests with no new messages are parked.
type LongPoll struct {
	// Enabled parks pulls until a message arrives or the suspend time ends;
	// when false, pulls wait ShortPollWait and answer.
	Enabled bool `mapstructure:"enabled"`
	// MaxSuspend caps a client's suspendTimeoutMillis (1ms..1h).
	MaxSuspend time.Duration `mapstructure:"max_suspend"`
	// ShortPollWait is how long a pull waits when long polling is off or the
	// client did not ask to suspend (0..1m).
	ShortPollWait time.Duration `mapstructure:"short_poll_wait"`
}

// Filter configures how the broker filters the messages of a pull.
type Filter struct {
	// PropertyEnabled accepts SQL92 subscriptions: expressions over message
	// properties the broker evaluates for each message it delivers
	// (RocketMQ's enablePropertyFilter, off by default there). When false,
	// heartbeats and pulls with a SQL92 subscription are refused.
	PropertyEnabled bool `mapstructure:"property_enabled"`
}

// Dedup configures the duplicate window: a send whose UNIQ_KEY the broker
// stored for the same topic within Window is answered with the first
// copy's ids instead of being stored again.
type Dedup struct {
	// Window is how long a stored message's key is remembered (0..24h);
	// 0 turns deduplication off.
	Window time.Duration `mapstructure:"window"`
	// MaxKeys bounds the keys remembered (1000..100000000); past it the
	// oldest leave first, cutting the window short.
	MaxKeys int `mapstructure:"max_keys"`
}

// DefaultBroker returns the single-node quickstart configuration: loopback
// listen address, an embedded nameserver, a store under ./data. It is valid.
func DefaultBroker() Broker {
	return Broker{
		BrokerName:            "broker-a",
		ClusterName:           "DefaultCluster",
		BrokerID:              0,
		Role:                  RoleAsyncMaster,
		Listen:                "127.0.0.1:10911",
		NamesrvAddr:           "",
		MetricsListen:         "",
		RegisterInterval:      30 * time.Second,
		AutoCreateTopic:       true,
		DefaultTopicQueueNums: 8,
		Store: Store{
			Dir:                 "./data",
			SegmentSize:         1 << 30,
			MaxMessageSize:      4 << 20,
			Flush:               FlushAsync,
			FlushInterval:       500 * time.Millisecond,
			SyncFlushTimeout:    5 * time.Second,
			GroupCommitWindow:   0,
			Preallocate:         true,
			WarmAhead:           16 << 20,
			ReadAhead:           16 << 20,
			CheckCRCOnRecover:   true,
			FileReservedTime:    72 * time.Hour,
			RetentionInterval:   10 * time.Second,
			DiskHighWatermark:   0.75,
			DiskFullWatermark:   0.90,
			OnDiskPressure:      DiskPressureRefuse,
			DiskReserve:         16 << 20,
			ConsumeQueueEntries: 300_000,
			SendQueueSize:       10_000,
		},
		TransactionCheckInterval: 60 * time.Second,
		TransactionTimeout:       6 * time.Second,
		HA: HA{SyncTimeout: 5 * time.Second, MaxLag: 256 << 20, MaxCatchupLag: 15 * time.Second,
			AllAckInSyncStateSet: true, MinInSyncReplicas: 1},
		Remoting:        defaultRemoting(),
		LongPoll:        LongPoll{Enabled: true, MaxSuspend: 30 * time.Second, ShortPollWait: time.Second},
		Filter:          Filter{PropertyEnabled: true},
		Dedup:           Dedup{Window: 2 * time.Minute, MaxKeys: 2_000_000},
		PullMaxMessages: 256,
		GCPercent:       400,
		EmbeddedNamesrv: DefaultNameserver(),
		TLS:             defaultTLS(),
	}
}

func defaultRemoting() Remoting {
	return Remoting{MaxFrameSize: 16 << 20, FrameTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		MaxConnsPerAddr: 1000}
}

// EmbedNamesrv reports whether the broker runs its own nameserver (no
// namesrv_addr configured).
func (b Broker) EmbedNamesrv() bool { return b.NamesrvAddr == "" }

// NamesrvAddrs splits NamesrvAddr into its host:port entries; nil when the
// nameserver is embedded. Call it on a validated Broker.
func (b Broker) NamesrvAddrs() []string {
	if b.NamesrvAddr == "" {
		return nil
	}
	return strings.Split(b.NamesrvAddr, ";")
}
