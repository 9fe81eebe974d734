package client

import (
	"crypto/tls"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// Option configures a Producer, PushConsumer, PullConsumer or Admin.
// Options that do not concern the kind of client they are given to are
// ignored (WithSendTimeout on a consumer, for example).
type Option func(*config)

// MessageModel says how a consumer group shares messages.
type MessageModel int

const (
	// Clustering gives each queue to one member of the group; offsets live
	// on the brokers and failed messages are retried through
	// %RETRY%<group>.
	Clustering MessageModel = iota
	// Broadcasting gives every member every queue; offsets live in a local
	// file and failed messages are dropped.
	Broadcasting
)

func (m MessageModel) String() string {
	if m == Broadcasting {
		return "BROADCASTING"
	}
	return "CLUSTERING"
}

// ConsumeFrom says where a group without a committed offset starts.
//
// NB: like RocketMQ, a broker answers "offset 0" for a group that has no
// offset on a queue that still holds its first message (spec §3.6), so a
// new group on a young topic starts at the beginning whatever this says.
type ConsumeFrom int

const (
	// ConsumeFromLast starts at the end of each queue (the default).
	ConsumeFromLast ConsumeFrom = iota
	// ConsumeFromFirst starts at the first message still stored.
	ConsumeFromFirst
	// ConsumeFromTimestamp starts at the first message stored at or
	// after WithConsumeTimestamp (default: 30 minutes before Start).
	ConsumeFromTimestamp
)

func (f ConsumeFrom) String() string {
	switch f {
	case ConsumeFromFirst:
		return "CONSUME_FROM_FIRST_OFFSET"
	case ConsumeFromTimestamp:
		return "CONSUME_FROM_TIMESTAMP"
	}
	return "CONSUME_FROM_LAST_OFFSET"
}

// config holds every option; each client reads the ones it needs.
type config struct {
	slaveNotice  func(broker, addr string) // WithSlaveReadNotice
	nameServers  []string
	instance     string
	logger       *slog.Logger
	forceJSON    bool
	callTimeout  time.Duration // route queries, heartbeats, offsets, admin
	hbInterval   time.Duration
	routeRefresh time.Duration
	subRefresh   time.Duration // routes of the topics consumers subscribe to
	accessKey    string        // ACL credentials (WithCredentials); "" = unsigned
	secretKey    string
	tls          *tls.Config // WithTLS; nil = plaintext

	// producer
	group             string
	sendTimeout       time.Duration
	retries           int
	compressOver      int
	compressLevel     int
	maxBodySize       int
	selector          QueueSelector
	asyncInflight     int
	defaultQueueNums  int
	createTopicKey    string
	busyBackoff       time.Duration
	faultIsolation    time.Duration
	faultAvoidance    bool
	busyMaxBackoff    time.Duration
	busyRetryDeadline time.Duration // when ctx has none
	autoBatchMessages int           // 0: off
	txListener        TransactionListener
	autoBatchBytes    int

	// consumer
	model              MessageModel
	from               ConsumeFrom
	fromTime           time.Time
	orderly            bool
	allocate           AllocateStrategy
	consumeGoroutines  int
	consumeBatch       int
	pullBatch          int
	pullThresholdCount int
	pullThresholdBytes int64
	rebalanceInterval  time.Duration
	commitInterval     time.Duration
	lockInterval       time.Duration
	lockExpiry         time.Duration
	suspendTimeout     time.Duration
	pullTimeout        time.Duration
	pullBackoff        time.Duration
	maxReconsume       int // -1: 16 for concurrent, unlimited for orderly
	orderlyRetryDelay  time.Duration
	offsetDir          string
}

func defaultConfig() *config {
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return &config{
		callTimeout:        3 * time.Second,
		hbInterval:         30 * time.Second,
		routeRefresh:       30 * time.Second,
		subRefresh:         time.Second,
		sendTimeout:        3 * time.Second,
		retries:            2,
		compressOver:       4096,
		compressLevel:      5,
		maxBodySize:        DefaultMaxBodySize,
		asyncInflight:      1024,
		defaultQueueNums:   4,
		createTopicKey:     "TBW102",
		busyBackoff:        20 * time.Millisecond,
		busyMaxBackoff:     500 * time.Millisecond,
		busyRetryDeadline:  10 * time.Second,
		faultIsolation:     30 * time.Second,
		faultAvoidance:     true,
		allocate:           averagely{},
		consumeGoroutines:  20,
		consumeBatch:       1,
		pullBatch:          32,
		pullThresholdCount: 1024,
		pullThresholdBytes: 100 << 20,
		rebalanceInterval:  20 * time.Second,
		commitInterval:     5 * time.Second,
		lockInterval:       20 * time.Second,
		lockExpiry:         30 * time.Second,
		suspendTimeout:     20 * time.Second,
		pullTimeout:        30 * time.Second,
		pullBackoff:        3 * time.Second,
		maxReconsume:       -1,
		orderlyRetryDelay:  time.Second,
		offsetDir:          filepath.Join(home, ".sluice", "offsets"),
	}
}

// validate checks the options every client shares.
func (c *config) validate() error {
	if len(c.nameServers) == 0 {
		return invalidOption("no name server: use WithNameServers")
	}
	for _, a := range c.nameServers {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return invalidOption("name server %q is not ip:port", a)
		}
	}
	switch {
	case c.callTimeout <= 0, c.sendTimeout <= 0, c.hbInterval <= 0, c.routeRefresh <= 0, c.subRefresh <= 0:
		return invalidOption("timeouts and intervals must be positive")
	case c.retries < 0:
		return invalidOption("retries %d is negative", c.retries)
	case c.consumeGoroutines < 1, c.consumeBatch < 1, c.pullBatch < 1:
		return invalidOption("consume goroutines, consume batch and pull batch must be at least 1")
	case c.pullThresholdCount < 1, c.pullThresholdBytes < 1:
		return invalidOption("pull thresholds must be at least 1")
	case c.rebalanceInterval <= 0, c.commitInterval <= 0, c.lockInterval <= 0, c.pullTimeout <= c.suspendTimeout:
		return invalidOption("consumer intervals must be positive and the pull timeout above the suspend timeout")
	}
	if err := checkStrategy(c.allocate); err != nil {
		return err
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return nil
}

// WithNameServers sets the name server addresses, each a literal ip:port.
// Required.
func WithNameServers(addrs ...string) Option {
	return func(c *config) { c.nameServers = append([]string(nil), addrs...) }
}

// WithSlaveReadNotice calls fn each time the client's reads of a broker
// (pulls, consumer offsets, queue offsets) move to one of its slaves
// because the routes list no master for it: the master is down, and the
// client reads from the slave of the lowest id meanwhile, as RocketMQ's
// consumers do. Without it the client logs a warning.
func WithSlaveReadNotice(fn func(broker, addr string)) Option {
	return func(c *config) { c.slaveNotice = fn }
}

// WithInstanceName sets the instance part of the client id (ip@instance;
// the default instance is the process id). Consumers of one group in one
// process need distinct names; broadcasting consumers also keep their
// offset file under it.
func WithInstanceName(name string) Option { return func(c *config) { c.instance = name } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithJSONHeaders makes the client speak JSON headers (serialize type 0)
// from the first request on, as the official clients do. Without it the
// client speaks msgpack and falls back to JSON, per address, when a server
// rejects msgpack.
func WithJSONHeaders() Option { return func(c *config) { c.forceJSON = true } }

// WithCallTimeout bounds route queries, heartbeats, offset and admin calls
// (default 3 s).
func WithCallTimeout(d time.Duration) Option { return func(c *config) { c.callTimeout = d } }

// WithHeartbeatInterval sets how often the client heartbeats every broker
// (default 30 s).
func WithHeartbeatInterval(d time.Duration) Option { return func(c *config) { c.hbInterval = d } }

// WithRouteRefreshInterval sets how often every cached route is polled
// from the name servers (default 30 s). Routes are also refreshed at once
// after a connection error or a TOPIC_NOT_EXIST answer, and the topics
// consumers subscribe to more often (WithSubscriptionRefreshInterval).
func WithRouteRefreshInterval(d time.Duration) Option {
	return func(c *config) { c.routeRefresh = d }
}

// WithSubscriptionRefreshInterval sets how often the routes of the topics
// this client's consumers subscribe to are polled (default 1 s: one route
// query per subscribed topic and second). A push consumer rebalances as
// soon as a refresh finds a subscribed topic's queues or brokers changed,
// so this interval bounds how long a new queue or broker group waits for
// its consumers, and how long a gone one keeps them.
func WithSubscriptionRefreshInterval(d time.Duration) Option {
	return func(c *config) { c.subRefresh = d }
}

// WithGroup sets the producer group (default "DEFAULT_PRODUCER").
func WithGroup(group string) Option { return func(c *config) { c.group = group } }

// WithSendTimeout bounds one send attempt (default 3 s). The context given
// to Send bounds the whole send, retries included.
func WithSendTimeout(d time.Duration) Option { return func(c *config) { c.sendTimeout = d } }

// WithRetries sets how many times a failed send is retried on another
// queue, preferably of another broker (default 2). SYSTEM_BUSY answers
// are retried with backoff on top of these, until the context's deadline.
func WithRetries(n int) Option { return func(c *config) { c.retries = n } }

// WithCompression sets the body size from which single messages are zlib
// compressed, and the zlib level (defaults 4096 bytes, level 5). A
// threshold <= 0 disables compression.
func WithCompression(threshold, level int) Option {
	return func(c *config) { c.compressOver, c.compressLevel = threshold, level }
}

// DefaultMaxBodySize is the largest body a producer accepts unless
// WithMaxBodySize says otherwise: 4 MiB, the broker's default.
const DefaultMaxBodySize = 4 << 20

// WithMaxBodySize sets the largest body a producer accepts (default
// DefaultMaxBodySize).
func WithMaxBodySize(n int) Option { return func(c *config) { c.maxBodySize = n } }

// WithQueueSelector sets how a producer picks a queue (default
// RoundRobinSelector, which also avoids slow or failing brokers).
func WithQueueSelector(s QueueSelector) Option { return func(c *config) { c.selector = s } }

// WithAsyncInflight bounds the SendAsync calls in flight (default 1024);
// SendAsync blocks while the bound is reached.
func WithAsyncInflight(n int) Option { return func(c *config) { c.asyncInflight = n } }

// WithAutoBatch makes SendAsync combine messages bound for the same queue
// into batch requests of at most maxMessages messages and maxBytes bytes,
// as a Kafka producer does, with no linger: a message goes out at once
// when its queue has no batch in flight, and the messages sent meanwhile
// wait for that answer (or until they fill a batch) and go together.
// Each callback still gets its own result (id, offset id, queue offset).
// A batch's messages reach the broker in the order they were sent. A
// message whose context ends while it waits is answered with that error;
// once sent, a batch is bounded by the latest deadline of its messages
// (and the send timeout and retries), not cut short by an earlier one.
// Messages with a delay level, a delivery time, a compressed body or a
// retry topic are sent alone. Off by default; RocketMQ 5's autoBatch is
// the same idea.
func WithAutoBatch(maxMessages, maxBytes int) Option {
	return func(c *config) { c.autoBatchMessages, c.autoBatchBytes = maxMessages, maxBytes }
}

// WithFaultAvoidance turns latency-based broker avoidance on or off
// (default on) and sets how long a broker that failed is avoided (default
// 30 s). Avoidance only prefers other brokers; when every broker is
// avoided, sends still go out.
func WithFaultAvoidance(on bool, isolation time.Duration) Option {
	return func(c *config) { c.faultAvoidance, c.faultIsolation = on, isolation }
}

// WithBusyBackoff sets the first and the longest wait between attempts after
// SYSTEM_BUSY (defaults 20 ms and 500 ms, doubling).
func WithBusyBackoff(first, longest time.Duration) Option {
	return func(c *config) { c.busyBackoff, c.busyMaxBackoff = first, longest }
}

// WithMessageModel sets clustering (default) or broadcasting.
func WithMessageModel(m MessageModel) Option { return func(c *config) { c.model = m } }

// WithConsumeFrom sets where a new group starts (default ConsumeFromLast).
func WithConsumeFrom(f ConsumeFrom) Option { return func(c *config) { c.from = f } }

// WithConsumeTimestamp sets the start time for ConsumeFromTimestamp.
func WithConsumeTimestamp(t time.Time) Option { return func(c *config) { c.fromTime = t } }

// WithOrderly makes a push consumer orderly: each queue is locked on its
// broker before it is consumed and its messages are handled one batch at a
// time, in queue order; a failed batch is retried in place.
func WithOrderly(on bool) Option { return func(c *config) { c.orderly = on } }

// WithConsumeGoroutines sets the number of handler goroutines of a
// concurrent push consumer (default 20).
func WithConsumeGoroutines(n int) Option { return func(c *config) { c.consumeGoroutines = n } }

// WithConsumeBatchSize sets the most messages handed to one handler call
// (default 1).
func WithConsumeBatchSize(n int) Option { return func(c *config) { c.consumeBatch = n } }

// WithPullBatchSize sets the most messages one pull asks for (default 32).
func WithPullBatchSize(n int) Option { return func(c *config) { c.pullBatch = n } }

// WithPullThreshold sets the flow control of a push consumer: a queue is not
// pulled while it holds this many unacknowledged messages or body bytes
// (defaults 1024 and 100 MiB), so it holds at most one pull batch more
// than the threshold less one. Pulling resumes on the acknowledgement that
// brings it below both.
func WithPullThreshold(count int, bytes int64) Option {
	return func(c *config) { c.pullThresholdCount, c.pullThresholdBytes = count, bytes }
}

// WithRebalanceInterval sets how often a push consumer rebalances on its
// own (default 20 s); it also rebalances when the broker says the group
// changed.
func WithRebalanceInterval(d time.Duration) Option {
	return func(c *config) { c.rebalanceInterval = d }
}

// WithCommitInterval sets how often consumed offsets are committed
// (default 5 s).
func WithCommitInterval(d time.Duration) Option { return func(c *config) { c.commitInterval = d } }

// WithLockInterval sets how often an orderly consumer renews its queue
// locks (default 20 s). A lock not renewed for 30 s is treated as lost.
func WithLockInterval(d time.Duration) Option { return func(c *config) { c.lockInterval = d } }

// WithLongPolling sets how long the broker may hold an empty pull and the
// pull's own timeout (defaults 20 s and 30 s).
func WithLongPolling(suspend, timeout time.Duration) Option {
	return func(c *config) { c.suspendTimeout, c.pullTimeout = suspend, timeout }
}

// WithPullBackoff sets the wait after a failed pull (default 3 s).
func WithPullBackoff(d time.Duration) Option { return func(c *config) { c.pullBackoff = d } }

// WithMaxReconsumeTimes sets how often a message is redelivered before it
// goes to %DLQ%<group>. Default 16 for concurrent consumers and unlimited
// (-1) for orderly ones.
func WithMaxReconsumeTimes(n int) Option { return func(c *config) { c.maxReconsume = n } }

// WithOrderlyRetryDelay sets how long an orderly queue is suspended after a
// failed batch before it is retried (default 1 s).
func WithOrderlyRetryDelay(d time.Duration) Option {
	return func(c *config) { c.orderlyRetryDelay = d }
}

// WithOffsetDir sets where broadcasting consumers keep their offsets
// (default $HOME/.sluice/offsets): <dir>/<group>/<instance>/offsets.json.
func WithOffsetDir(dir string) Option { return func(c *config) { c.offsetDir = dir } }
