package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

// The store's kill -9 test: a child process puts to many queues in sync
// flush mode (Put, and Submit answered by the durable notifier) and
// prints each acknowledged put; the parent kills it at a
// random moment, reopens the store and checks every consume queue entry,
// the contiguity of queue offsets, every acknowledged message, and that new
// puts continue. SLUICE_CRASH_ITER sets the number of kills.

const (
	storeCrashEnv      = "SLUICE_STORE_CRASH_DIR"
	storeCrashBatchEnv = "SLUICE_STORE_CRASH_BATCH" // "1": every put is a batch
)

func crashConf(dir string) conf.Store {
	c := testConf(dir)
	c.Flush = "sync"
	c.SegmentSize = 256 << 10
	c.ConsumeQueueEntries = 100
	return c
}

type ack struct {
	topic string
	qid   int32
	qo    int64
	pos   int64
	body  string
}

func TestStoreCrashChild(t *testing.T) {
	dir := os.Getenv(storeCrashEnv)
	if dir == "" {
		return
	}
	opts := testOpts()
	opts.CheckpointInterval = 50 * time.Millisecond
	s, err := Open(crashConf(dir), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	seed, _ := strconv.ParseUint(os.Getenv("SLUICE_STORE_CRASH_SEED"), 10, 64)
	batchOnly := os.Getenv(storeCrashBatchEnv) == "1"
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	var outMu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for g := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; time.Now().Before(deadline); i++ {
				topic, qid := fmt.Sprint("t", r.IntN(5)), int32(r.IntN(10))
				if g == 4 || batchOnly { // a batch producer's sends
					b := &Batch{Template: *msg(topic, qid, "")}
					for j := range 2 + r.IntN(15) {
						body := fmt.Sprintf("%d-%d-%d-%d-%s", seed, g, i, j, bytes.Repeat([]byte{'y'}, r.IntN(500)))
						b.Items = append(b.Items, message.BatchItem{Body: []byte(body)})
					}
					res := submit(s, PutRequest{Batch: b})[0]
					if res.Status != PutOK {
						fmt.Fprintln(os.Stderr, "put batch:", res.Status, res.Remark)
						os.Exit(3)
					}
					outMu.Lock()
					for j, it := range b.Items { // NB: pos -1: found by queue offset
						fmt.Fprintf(out, "ack %s %d %d -1 %s\n", topic, qid, res.QueueOffset+int64(j), it.Body)
					}
					out.Flush()
					outMu.Unlock()
					continue
				}
				body := fmt.Sprintf("%d-%d-%d-%s", seed, g, i, bytes.Repeat([]byte{'x'}, r.IntN(2000)))
				m := msg(topic, qid, body, message.PropKeys, fmt.Sprint("k", g, "-", i))
				var res PutResult
				if g%2 == 1 {
					// The broker's send path: Submit, answered by the
					// durable notifier.
					res = submit(s, PutRequest{Msg: m})[0]
				} else {
					res = s.Put(context.Background(), m)
				}
				if res.Status != PutOK {
					fmt.Fprintln(os.Stderr, "put:", res.Status, res.Remark)
					os.Exit(3)
				}
				outMu.Lock()
				fmt.Fprintf(out, "ack %s %d %d %d %s\n", topic, qid, res.QueueOffset, res.Pos, body)
				out.Flush()
				outMu.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

func TestStoreCrash_Kill9(t *testing.T) { storeCrashKill9(t, false) }

// Batches only: every checkpoint the child saves ends with a batch. Its
// tail named the batch's first record, so each crash rescanned the whole log.
func TestStoreCrash_Kill9Batches(t *testing.T) { storeCrashKill9(t, true) }

func storeCrashKill9(t *testing.T, batchOnly bool) {
	iters := 3
	if v, err := strconv.Atoi(os.Getenv("SLUICE_CRASH_ITER")); err == nil && v > 0 {
		iters = v
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	var acks []ack
	for it := range iters {
		killed := killStoreChild(t, dir, seed+uint64(it), batchOnly, time.Duration(100+r.IntN(400))*time.Millisecond)
		require.NotEmpty(t, killed, "kill %d: a kill before any acknowledgement checks nothing", it)
		acks = append(acks, killed...)
		// NB: a checkpoint the child saved (batches included) or the
		// last reopen's Close saved is used, never rescanned past.
		_, cpErr := os.Stat(filepath.Join(dir, "commitlog", "checkpoint"))
		s := mustOpen(t, crashConf(dir), testOpts())
		if ri := s.Log().Recovery(); cpErr == nil || it > 0 {
			require.True(t, ri.FromCheckpoint, "kill %d: recovery ignored the checkpoint: %s", it, ri.CheckpointProblem)
		}
		byPos := map[int64]message.Record{}
		byQueue := map[string]message.Record{}
		queues := 0
		s.Topics(func(topic string, qid int32, min, max int64) bool {
			queues++
			for off := min; off < max; {
				res := get(t, s, topic, qid, off, 32)
				require.Equal(t, GetFound, res.Status, "%s/%d at %d", topic, qid, off)
				for _, rec := range records(t, res.Body) {
					require.Equal(t, topic, string(rec.Topic))
					require.Equal(t, qid, rec.QueueID)
					require.Equal(t, off, rec.QueueOffset, "queue offsets are contiguous")
					byPos[rec.PhysicalOffset] = rec
					byQueue[fmt.Sprint(topic, "/", qid, "@", off)] = rec
					off++
				}
			}
			return true
		})
		for _, a := range acks {
			rec, ok := byPos[a.pos]
			if a.pos < 0 {
				rec, ok = byQueue[fmt.Sprint(a.topic, "/", a.qid, "@", a.qo)]
			}
			require.True(t, ok, "acknowledged %s/%d@%d at %d is indexed", a.topic, a.qid, a.qo, a.pos)
			require.Equal(t, a.qo, rec.QueueOffset)
			require.Equal(t, a.body, string(rec.Body))
		}
		for q := range int32(10) {
			max := s.MaxOffset("t0", q)
			res := mustPut(t, s, msg("t0", q, "after"))
			require.Equal(t, max, res.QueueOffset, "new puts continue the queue")
		}
		t.Logf("kill %d: %d acknowledged in all, %d queues, %d records indexed", it, len(acks), queues, len(byPos))
		require.NoError(t, s.Close())
	}
}

func killStoreChild(t *testing.T, dir string, seed uint64, batchOnly bool, d time.Duration) []ack {
	t.Helper()
	var acks []ack
	env := []string{storeCrashEnv + "=" + dir, "SLUICE_STORE_CRASH_SEED=" + strconv.FormatUint(seed, 10)}
	if batchOnly {
		env = append(env, storeCrashBatchEnv+"=1")
	}
	for _, line := range testutil.KillChild(t, "TestStoreCrashChild", env, d) {
		var a ack
		if _, err := fmt.Sscanf(line, "ack %s %d %d %d %s\n", &a.topic, &a.qid, &a.qo, &a.pos, &a.body); err == nil {
			acks = append(acks, a)
		}
	}
	return acks
}
