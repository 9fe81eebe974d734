package broker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

// logLines keeps the log lines at WARN and above.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// matching returns the lines that contain every word.
func (l *logLines) matching(words ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, s := range l.lines {
		for _, w := range words {
			if !strings.Contains(s, w) {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// acked is a message the broker acknowledged.
type acked struct {
	q    client.MessageQueue
	off  int64
	body string
}

// diskFullRig is a broker whose store lives on a small loop file system,
// with a nameserver and a producer.
type diskFullRig struct {
	t    *testing.T
	mnt  string
	cfg  conf.Broker
	opts broker.Options
	logs *logLines
	b    *broker.Broker
	p    *client.Producer
	seq  atomic.Int64

	mu    sync.Mutex
	acked []acked
}

func newDiskFullRig(t *testing.T, policy string) *diskFullRig {
	r := &diskFullRig{t: t, mnt: testutil.LoopFS(t, 48<<20), logs: &logLines{}}
	c := withNamesrv(t)
	c.Store.Dir = filepath.Join(r.mnt, "store")
	c.Store.SegmentSize = 1 << 20
	c.Store.MaxMessageSize = 64 << 10
	c.Store.ConsumeQueueEntries = 10_000
	c.Store.RetentionInterval = 50 * time.Millisecond
	c.Store.DiskHighWatermark = 0.8
	c.Store.DiskFullWatermark = 0.9
	c.Store.DiskReserve = 2 << 20
	c.Store.OnDiskPressure = policy
	r.cfg = c
	r.opts = broker.Options{Logger: slog.New(r.logs), Store: store.Options{DiskCheckInterval: 50 * time.Millisecond}}
	// The disk starts 70% full: 5 MiB to the high watermark, 10 to the full one.
	testutil.FillTo(t, filepath.Join(r.mnt, "filler"), 48<<20*30/100)
	r.start()
	r.cfg.Listen = r.b.Addr() // NB: a restart keeps the address the routes name
	var err error
	r.p, err = client.NewProducer(client.WithNameServers(c.NamesrvAddr), client.WithLogger(slog.New(slog.DiscardHandler)),
		client.WithGroup("pg"), client.WithRetries(0), client.WithSendTimeout(10*time.Second))
	require.NoError(t, err)
	require.NoError(t, r.p.Start())
	t.Cleanup(func() { r.p.Close() })
	require.Eventually(t, func() bool { return r.send(t.Context()) == nil }, 10*time.Second, 20*time.Millisecond,
		"the first send, once the broker is registered")
	return r
}

func (r *diskFullRig) start() {
	b, err := broker.New(r.cfg, r.opts)
	require.NoError(r.t, err, "the broker starts, also on a full disk")
	require.NoError(r.t, b.Start())
	r.t.Cleanup(func() { b.Close() })
	r.b = b
}

// send sends one 1 KiB message and records it if acknowledged.
func (r *diskFullRig) send(ctx context.Context) error {
	i := r.seq.Add(1)
	body := fmt.Sprintf("%08d-%s", i, strings.Repeat("x", 1015))
	res, err := r.p.Send(ctx, &client.Message{Topic: "orders", Body: []byte(body)})
	if err == nil {
		r.mu.Lock()
		r.acked = append(r.acked, acked{q: res.Queue, off: res.QueueOffset, body: body})
		r.mu.Unlock()
	}
	return err
}

// requireRefusal checks a refused send: SERVICE_NOT_AVAILABLE, with a
// remark that says the disk is full, how full, and what to do.
func requireRefusal(t *testing.T, err error) {
	t.Helper()
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, client.CodeServiceNotAvailable, be.Code, be.Remark)
	require.Contains(t, be.Remark, "disk full")
	require.Contains(t, be.Remark, "% used")
	require.Contains(t, be.Remark, "free space on the broker's disk")
	require.Contains(t, be.Remark, "store.disk_full_watermark")
}

// fillUntilRefused sends from 8 goroutines until every one of them was
// refused, and returns one refusal; at most max messages are acknowledged.
func (r *diskFullRig) fillUntilRefused(max int64) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for range 8 {
		wg.Go(func() {
			for r.count() < max {
				if err := r.send(r.t.Context()); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// count is how many sends were acknowledged.
// NB: not len(snapshot()): 8 senders copying the list before each send
// made filling the disk quadratic (65 s of the race run).
func (r *diskFullRig) count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.acked))
}

func (r *diskFullRig) snapshot() []acked {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]acked(nil), r.acked...)
}

// metrics returns the broker's Prometheus text.
func (r *diskFullRig) metrics() string {
	resp, err := http.Get("http://" + r.b.MetricsAddr() + "/metrics")
	require.NoError(r.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(r.t, err)
	return string(b)
}

// consume pulls every queue of the topic from its first offset and returns
// the bodies by queue and offset, and each queue's first offset.
func (r *diskFullRig) consume() (map[client.MessageQueue]map[int64]string, map[client.MessageQueue]int64) {
	t := r.t
	c, err := client.NewPullConsumer("reader", client.WithNameServers(r.cfg.NamesrvAddr),
		client.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	defer c.Close()
	qs, err := c.Queues(t.Context(), "orders")
	require.NoError(t, err)
	got := map[client.MessageQueue]map[int64]string{}
	mins := map[client.MessageQueue]int64{}
	for _, q := range qs {
		got[q] = map[int64]string{}
		res, err := c.Pull(t.Context(), q, 0, 1) // NB: to learn the queue's first offset
		require.NoError(t, err)
		off := res.MinOffset
		mins[q] = off
		for {
			res, err := c.Pull(t.Context(), q, off, 256)
			require.NoError(t, err)
			if res.Status != client.PullFound {
				break
			}
			for _, m := range res.Messages {
				got[q][m.QueueOffset] = string(m.Body)
			}
			off = res.NextOffset
		}
	}
	return got, mins
}

// TestDiskFull_LoopFS fills a real 48 MiB file system through the broker
// (1 KiB messages from 8 goroutines), checks the refusals and the status,
// restarts the broker while the disk is full, frees space, checks that
// sends resume by themselves, and reads every queue back: with "refuse"
// every acknowledged message is there; with "delete_oldest" every one that
// is not was counted, for the group that had not consumed it, in the
// metric and in one ERROR line per deletion.
func TestDiskFull_LoopFS(t *testing.T) {
	for _, policy := range []string{conf.DiskPressureRefuse, conf.DiskPressureDeleteOldest} {
		t.Run(policy, func(t *testing.T) {
			r := newDiskFullRig(t, policy)
			// The group "cg" has consumed nothing of the first queue: what
			// delete_oldest deletes there is its loss.
			first := r.snapshot()[0].q
			cg, err := client.NewPullConsumer("cg", client.WithNameServers(r.cfg.NamesrvAddr),
				client.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			require.NoError(t, cg.Start())
			defer cg.Close()
			require.NoError(t, cg.CommitOffset(t.Context(), first, 0))

			err = r.fillUntilRefused(8_000)
			if policy == conf.DiskPressureDeleteOldest {
				// Deletion (of what is fsynced and indexed) makes room, before
				// a refusal or after it (on the disk loop's next check): fill
				// the disk by other means too, until a send is refused with
				// nothing left to delete, the log down to its newest segment.
				// NB: a CI run took a refusal for the end, read the loss
				// metric before the deletion, or restarted a broker that then
				// deleted its way under the full watermark.
				log := r.b.Store().Log()
				onlyNewest := func() bool { return log.Next()-log.Min() <= commitlog.Offset(log.SegmentSize()) }
				for i := 0; err == nil || !onlyNewest(); i++ {
					require.Less(t, i, 20, "the disk never stayed full")
					if err != nil {
						require.Eventually(t, func() bool { return onlyNewest() || r.send(t.Context()) == nil },
							10*time.Second, 10*time.Millisecond, "deletion goes down to the newest segment or makes room")
						err = r.send(t.Context())
						continue
					}
					testutil.FillTo(t, filepath.Join(r.mnt, fmt.Sprintf("filler-%d", i)), 512<<10)
					err = r.fillUntilRefused(r.count() + 3000)
				}
			}
			requireRefusal(t, err)
			// NB: an ENOSPC may have refused the send before the disk loop's
			// next check.
			require.Eventually(t, func() bool {
				st := r.b.Store().DiskStatus()
				return st.Refusing && st.AboveHigh && !st.ReserveHeld
			}, 10*time.Second, 10*time.Millisecond, "refusing, above the high watermark, the reserve given to the indexes")
			m := r.metrics()
			require.Contains(t, m, "sluice_disk_sends_refused 1\n")
			require.Contains(t, m, "sluice_disk_above_high_watermark 1\n")
			require.Contains(t, m, "sluice_disk_reserve_bytes 0\n")
			require.Contains(t, m, `sluice_disk_pressure_policy{policy="`+policy+`"} 1`)
			warned := len(r.logs.matching("WARN", "above the high watermark"))
			if policy == conf.DiskPressureRefuse {
				require.Equal(t, 1, warned, "one warning per crossing, not per check")
			} else {
				require.Positive(t, warned, "deletion brings use back under: one warning per crossing")
			}
			require.Eventually(t, func() bool { return r.b.Store().DispatchLag() == 0 }, 10*time.Second, 10*time.Millisecond,
				"the indexes catch up on the full disk")

			if policy == conf.DiskPressureDeleteOldest {
				// NB: a deletion's loss is counted once its segments are gone.
				lost := regexp.MustCompile(`sluice_deleted_unconsumed_messages_total\{group="cg",topic="orders"\} [1-9]`)
				require.Eventually(t, func() bool { return lost.MatchString(r.metrics()) }, 10*time.Second, 10*time.Millisecond,
					"the group's loss counted")
			}

			// Restart while the disk is full. Losses are counted per broker
			// process (a Prometheus counter).
			if policy == conf.DiskPressureDeleteOldest {
				// NB: the deletions left megabytes free above the full
				// watermark, and a broker that starts frees what it had
				// precreated and takes its reserve back: a CI run's restarted
				// broker found the disk under the full watermark.
				testutil.FillTo(t, filepath.Join(r.mnt, "filler-last"), 512<<10)
			}
			freeFull := testutil.FreeBytes(t, r.mnt)
			require.NoError(t, r.b.Close())
			key := store.LossKey{Group: "cg", Topic: "orders"}
			lostBefore := r.b.Store().Losses()[key]
			r.start()
			requireRefusal(t, r.send(t.Context()))
			t.Logf("%s: free bytes on the full disk once indexed: %d; after the restart: %d (reserve %d)",
				policy, freeFull, testutil.FreeBytes(t, r.mnt), r.cfg.Store.DiskReserve)

			// Free the space: sends resume by themselves.
			fillers, err := filepath.Glob(filepath.Join(r.mnt, "filler*"))
			require.NoError(t, err)
			for _, f := range fillers {
				require.NoError(t, os.Remove(f))
			}
			require.Eventually(t, func() bool { return r.send(t.Context()) == nil }, 10*time.Second, 20*time.Millisecond,
				"sends accepted again")
			require.Eventually(t, func() bool { return r.b.Store().DiskStatus().ReserveHeld }, 10*time.Second, 10*time.Millisecond)
			require.Eventually(t, func() bool { return r.b.Store().DispatchLag() == 0 }, 10*time.Second, 10*time.Millisecond)

			got, mins := r.consume()
			all := r.snapshot()
			var missing int64
			for _, a := range all {
				if a.off < mins[a.q] {
					missing++
					continue
				}
				require.Equal(t, a.body, got[a.q][a.off], "acknowledged message %s at %d", a.q, a.off)
			}
			lost := lostBefore + r.b.Store().Losses()[key]
			t.Logf("%s: %d acknowledged, %d no longer stored, %d of them counted lost for cg", policy, len(all), missing, lost)
			if policy == conf.DiskPressureRefuse {
				require.Zero(t, missing, "nothing acknowledged is lost")
				require.Zero(t, lost)
				require.Empty(t, r.logs.matching("ERROR", "had not consumed"))
				return
			}
			require.Positive(t, missing)
			require.Equal(t, mins[first], lost, "cg lost exactly what was deleted below its offset 0 in its queue")
			require.NotEmpty(t, r.logs.matching("ERROR", "had not consumed", "groups=cg"))
		})
	}
}
