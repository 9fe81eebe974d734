package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/message"
)

// ScheduleTopic holds delayed messages; its consume queue tags codes are
// delivery times (spec 7.9).
const ScheduleTopic = "SCHEDULE_TOPIC_XXXX"

// DefaultDelayLevels are RocketMQ's 18 delay levels.
var DefaultDelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// Options configure a Store beyond its conf.Store section.
type Options struct {
	// StoreHost is written into records that do not carry one (the
	// broker's address; part of every offset message id).
	StoreHost netip.AddrPort
	// DelayLevels are the delays of levels 1..n. Default DefaultDelayLevels.
	DelayLevels []time.Duration
	// KeyIndex sets the key index geometry (tests use small files).
	KeyIndex keyindex.Options
	// ConsumeQueue sets the consume queue geometry; EntriesPerFile defaults
	// to conf's consume_queue_entries.
	ConsumeQueue consumequeue.Options
	// OpenFile opens every file of the store: commitlog segments, consume
	// queues and the key index (unless ConsumeQueue.OpenFile or
	// KeyIndex.OpenFile is set). DiskUsage is the commitlog's. Test seams.
	OpenFile  commitlog.OpenFileFunc
	DiskUsage func(dir string) (float64, error)
	// OnSync observes commitlog fsyncs (metrics).
	OnSync func(d time.Duration, bytes int64)
	// CheckpointInterval is how often the checkpoints are saved: the
	// indexes' and the commitlog's (at its next fsync). Default 1s.
	CheckpointInterval time.Duration
	// Cut, when set, cuts the log at CutAt on open (a record boundary),
	// and the consume queues and key index with it: a replica drops the
	// tail its new master does not have.
	Cut   bool
	CutAt int64
	// Dedup configures the duplicate window; off when Dedup.Window is 0.
	Dedup DedupOptions
	// Now is the clock of store timestamps and of the duplicate window
	// (tests). Default time.Now.
	Now func() time.Time
	// DiskCheckInterval is how often the disk loop measures disk use
	// (watermarks, refusal, reserve; see disk.go). Default 1s.
	DiskCheckInterval time.Duration
	Logger            *slog.Logger
}

// Store is the broker's message store.
type Store struct {
	cfg    conf.Store
	opts   Options
	logger *slog.Logger
	dir    string
	lock   *os.File

	log    *commitlog.Log
	cq     *consumequeue.Store
	index  *keyindex.Index
	stages OpenStages // written by Open

	// putMu is the write serialization point: queue offset assignment and
	// commitlog append happen together under it.
	putMu     sync.Mutex
	queueNext queueNexts // topic → queue id → next queue offset
	putClosed bool
	// dedup is the duplicate window (nil: off); see dedup.go. dedupFeed
	// says the dispatcher feeds it (see SetDedupFeed).
	dedup     *dedupWindow
	dedupFeed atomic.Bool
	// dedupRebuilding is set from Open until the window holds the keys
	// of the records stored before it (rebuildDedupLoop): meanwhile a
	// key the window lacks is looked up in the key index (storedDup).
	dedupRebuilding atomic.Bool

	replicaState
	dispatched atomic.Int64 // every record below is indexed
	health     dispatchHealth
	disk       diskState

	// dispMu is held by whoever dispatches (dispatchLoop, dispatchInline):
	// the fields below it and the dispatcher-owned ones are its.
	dispMu           sync.Mutex
	dispSc           *commitlog.Scanner // the loop's; nil before it starts and once it stopped
	dispFails        int                // failed passes in a row (the loop backs off)
	inlineDispatches atomic.Int64       // passes run by puts (tests)
	loopPasses       atomic.Int64       // passes run by dispatchLoop, counted once each has released dispMu (tests)
	// Dispatcher-owned.
	indexFrom int64                                    // records below are already in the key index
	scanned   message.DispatchInfo                     // read by the loop's scanner's check (validateForDispatch); Size 0: none
	reparsed  int                                      // records dispatched without scanned (tests)
	queues    map[string]map[int32]*consumequeue.Queue // cache of consume queues by topic and id

	listenMu  sync.RWMutex
	listeners []Listener

	kick chan struct{}
	quit chan struct{}

	// Puts answered when durable (Submit), in sync flush mode.
	waitMu    sync.Mutex
	waiters   []durableWaiter // guarded by waitMu
	waitKick  chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the store in cfg.Dir and recovers it; see
// the package documentation for the order. The store is ready for Put and
// Get when Open returns; Close stops it.
func Open(cfg conf.Store, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if len(opts.DelayLevels) == 0 {
		opts.DelayLevels = DefaultDelayLevels
	}
	if !opts.StoreHost.IsValid() {
		opts.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DiskCheckInterval <= 0 {
		opts.DiskCheckInterval = time.Second
	}
	if opts.ConsumeQueue.EntriesPerFile == 0 {
		opts.ConsumeQueue.EntriesPerFile = cfg.ConsumeQueueEntries
	}
	if opts.ConsumeQueue.Logger == nil {
		opts.ConsumeQueue.Logger = opts.Logger
	}
	opts.shareOpenFile(cfg.SyncFlush())
	s := &Store{
		cfg: cfg, opts: opts, logger: opts.Logger, dir: cfg.Dir,
		queueNext: queueNexts{m: map[string]map[int32]*atomic.Int64{}},
		queues:    map[string]map[int32]*consumequeue.Queue{},
		kick:      make(chan struct{}, 1),
		waitKick:  make(chan struct{}, 1),
		quit:      make(chan struct{}),
		dedup:     newDedupWindow(opts.Dedup, opts.Now),
	}
	s.disk.used.Store(math.Float64bits(-1))
	if err := s.open(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.checkDisk() // NB: refuses puts before the first one if the disk is full
	if s.dedupRebuilding.Load() {
		s.wg.Add(1)
		go s.rebuildDedupLoop()
	}
	s.wg.Add(3)
	go s.dispatchLoop()
	go s.checkpointLoop()
	go s.diskLoop()
	if cfg.SyncFlush() {
		s.wg.Add(1)
		go s.durableLoop()
	}
	if cfg.RetentionInterval > 0 {
		s.wg.Add(1)
		go s.retentionLoop()
	}
	return s, nil
}

// OpenStages says how long each stage of Open took: what a restart after
// a crash spends before the broker serves.
type OpenStages struct {
	ConsumeQueues time.Duration // open the consume queues, drop torn tails
	KeyIndex      time.Duration // open the key index
	Commitlog     time.Duration // the log's recovery (commitlog.RecoveryInfo)
	Truncate      time.Duration // index entries past the recovered end dropped
	Dispatch      time.Duration // index what the indexes' checkpoints do not cover
	DispatchBytes int64
	Dedup         time.Duration // rebuild the duplicate window, when Open waited for it (see rebuildDedupLoop)
	DedupBytes    int64
	Total         time.Duration
}

// OpenStages returns the stages of this store's Open.
func (s *Store) OpenStages() OpenStages { return s.stages }

func (s *Store) open() error {
	began := time.Now()
	st := &s.stages
	stage := func(d *time.Duration) func() {
		t := time.Now()
		return func() { *d = time.Since(t) }
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("store: create %s: %w", s.dir, err)
	}
	lock, err := lockDir(s.dir)
	if err != nil {
		return err
	}
	s.lock = lock
	s.initReserve()
	done := stage(&st.ConsumeQueues)
	if s.cq, err = consumequeue.OpenStore(filepath.Join(s.dir, "consumequeue"), s.opts.ConsumeQueue); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	done()
	done = stage(&st.KeyIndex)
	if s.index, err = keyindex.Open(filepath.Join(s.dir, "index"), s.opts.KeyIndex); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	done()
	done = stage(&st.Commitlog)
	if s.log, err = commitlog.Open(filepath.Join(s.dir, "commitlog"), s.logOptions()); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	done()
	done = stage(&st.Truncate)
	end := int64(s.log.Next())
	if err := s.cq.TruncateAfterPos(end); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := s.index.TruncateAfterPos(end); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	// Consume queue minimums are not stored: raise them to the log's.
	s.trimIndexes(s.log.Min())
	done()
	cqFrom := s.loadCheckpoint(filepath.Join(s.dir, "consumequeue"))
	s.indexFrom = s.loadCheckpoint(filepath.Join(s.dir, "index"))
	from := min(cqFrom, s.indexFrom)
	from = max(from, int64(s.log.Min()))
	from = min(from, end)
	s.dispatched.Store(from)
	// Catch up before any Put: queue offsets come from the consume queues.
	done = stage(&st.Dispatch)
	// NB: thorough: the previous process wrote these records, and the log's
	// recovery checked CRCs only past its own checkpoint.
	sc := s.log.NewScanner(commitlog.Offset(from), false).Thorough()
	if err := s.dispatch(sc); err != nil {
		return err
	}
	done()
	st.DispatchBytes = s.dispatched.Load() - from
	s.cq.Queues(func(topic string, id int32, q *consumequeue.Queue) bool {
		s.queueNext.counter(topic, id).Store(q.Next())
		return true
	})
	if s.dedup != nil {
		if s.health.indexDegraded.Load() {
			// NB: the key index cannot answer for the records it
			// lacks: the window is rebuilt before any put.
			done = stage(&st.Dedup)
			n, err := s.rebuildDedup()
			if err != nil {
				return err
			}
			done()
			st.DedupBytes = n
		} else {
			s.dedupRebuilding.Store(true) // Open starts rebuildDedupLoop
		}
	}
	st.Total = time.Since(began)
	ri := s.log.Recovery()
	s.logger.Info("store: opened", "took", st.Total.Round(time.Millisecond),
		"consumequeues", st.ConsumeQueues.Round(time.Millisecond), "keyindex", st.KeyIndex.Round(time.Millisecond),
		"commitlog", st.Commitlog.Round(time.Millisecond), "commitlog_scanned", ri.Scanned,
		"from_checkpoint", ri.FromCheckpoint, "clean", ri.Clean,
		"truncate", st.Truncate.Round(time.Millisecond),
		"dispatch", st.Dispatch.Round(time.Millisecond), "dispatch_bytes", st.DispatchBytes,
		"dedup", st.Dedup.Round(time.Millisecond), "dedup_bytes", st.DedupBytes)
	return nil
}

func (s *Store) logOptions() commitlog.Options {
	c := s.cfg
	maxRecord := int64(c.MaxMessageSize) + conf.MaxRecordOverhead
	maxRecord = min(maxRecord, c.SegmentSize-8)
	var warmAhead int64
	if c.SyncFlush() {
		warmAhead = c.WarmAhead // NB: async fsyncs are few; warming costs a second write
	}
	var high float64
	if c.OnDiskPressure == conf.DiskPressureDeleteOldest {
		high = c.DiskHighWatermark // NB: otherwise nothing goes before its age
	}
	return commitlog.Options{
		SegmentSize: c.SegmentSize,
		MinRecord:   message.MinRecordSize,
		MaxRecord:   int32(maxRecord),
		// NB: as RocketMQ's dispatcher, a live scan checks a record's
		// structure, not its body CRC (the record was written by this
		// process, with that CRC); recovery and the catch-up after open
		// check the CRC too.
		Validate:           s.validateRecord,
		SyncFlush:          c.SyncFlush(),
		FlushInterval:      c.FlushInterval,
		CheckpointInterval: s.opts.CheckpointInterval,
		GroupCommitWindow:  c.GroupCommitWindow,
		NoPreallocate:      !c.Preallocate,
		PrecreateNext:      true, // NB: the put path never waits to create a segment
		WarmAhead:          warmAhead,
		ReadAhead:          c.ReadAhead,
		DiskFullHint:       diskHint(c),
		Retention: commitlog.RetentionOptions{
			MaxAge:        c.FileReservedTime,
			HighWatermark: high,
			DiskUsage:     s.opts.DiskUsage,
		},
		OpenFile: s.opts.OpenFile,
		SyncFile: syncFile,
		OnSync:   s.opts.OnSync,
		Cut:      s.opts.Cut,
		CutAt:    commitlog.Offset(s.opts.CutAt),
		Logger:   s.logger,
	}
}

// Listener is told of each message indexed: its queue, the queue's new
// max offset, the message's consume queue tags code and its properties
// string (valid only during the call).
type Listener func(topic string, queueID int32, next int64, tagsCode int64, props []byte)

// Subscribe registers fn to be called by the dispatcher after each entry
// is indexed. fn must not block.
func (s *Store) Subscribe(fn Listener) {
	s.listenMu.Lock()
	s.listeners = append(s.listeners, fn)
	s.listenMu.Unlock()
}

// Log returns the commitlog (for metrics and admin).
func (s *Store) Log() *commitlog.Log { return s.log }

// Dispatched returns the commitlog offset below which every record is
// indexed.
func (s *Store) Dispatched() int64 { return s.dispatched.Load() }

// DiskUsage returns the share of the store's disk in use.
func (s *Store) DiskUsage() (float64, error) {
	if s.opts.DiskUsage != nil {
		return s.opts.DiskUsage(s.dir)
	}
	return commitlog.StatfsUsage(s.dir)
}

// DispatchLag returns how many commitlog bytes are not yet indexed.
func (s *Store) DispatchLag() int64 { return int64(s.log.Next()) - s.dispatched.Load() }

// Close stops accepting puts, lets the dispatcher reach the end of the log,
// checkpoints the indexes, and closes everything. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.StopPuts()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.log.Sync(ctx)
		cancel()
		close(s.quit)
		s.wg.Wait() // the dispatcher drains to the end before it returns
		if cerr := s.saveCheckpoints(); err == nil {
			err = cerr
		}
		if cerr := s.closeFiles(); err == nil {
			err = cerr
		}
		s.closeErr = err
	})
	return s.closeErr
}

func (s *Store) closeFiles() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	if s.cq != nil {
		errs = append(errs, s.cq.Close())
	}
	if s.index != nil {
		errs = append(errs, s.index.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close()) // releases the flock
	}
	if s.dedup != nil {
		s.dedup.close() // NB: off the heap: freed here, not by the collector
	}
	return errors.Join(errs...)
}

// lockDir takes an exclusive flock on dir/lock.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("store: lock %s: %w", dir, err)
	}
	return f, nil
}

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
