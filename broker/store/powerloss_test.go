package store

import (
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
	"github.com/sluicemq/sluice/consumequeue/keyindex"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// TestStore_PowerLoss runs the store's promises through crashFS: writers put
// keyed messages, the power goes at a random moment, and the image it leaves
// must open to a store where, in sync mode, every acknowledged message is
// there; in both modes the log is a clean prefix (each writer's messages
// present form a prefix of what it sent), every record of the log is
// reachable by its queue offset and by its key, and no queue entry points
// past the log (a checkpoint that claimed more than was fsynced leaves
// records unreachable). SLUICE_POWERLOSS_ROUNDS sets the crashes per case.
func TestStore_PowerLoss(t *testing.T) {
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("SLUICE_POWERLOSS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, mode := range []string{"sync", "async"} {
		for _, torn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s torn=%v", mode, torn), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(len(mode))*2+map[bool]uint64{true: 1}[torn]))
				dir := t.TempDir()
				c := powerConf(dir, mode)
				// NB: directories made by MkdirAll are not modelled; make them.
				s := mustOpen(t, c, powerOpts(nil))
				for q := range int32(4) {
					mustPut(t, s, msg("t", q, "init", message.PropKeys, "init"))
				}
				require.NoError(t, s.Close())
				for round := range rounds {
					dir = powerRound(t, r, dir, mode, torn, round)
				}
			})
		}
	}
}

func powerConf(dir, mode string) conf.Store {
	c := crashConf(dir)
	c.Dir = dir
	c.Flush = mode
	c.FlushInterval = 20 * time.Millisecond
	return c
}

func powerOpts(c *crashFS) Options {
	o := testOpts()
	o.CheckpointInterval = 10 * time.Millisecond
	o.KeyIndex = keyindex.Options{SlotsPerFile: 64, EntriesPerFile: 300}
	o.ConsumeQueue.WriteBufferEntries = 4
	if c != nil {
		o.OpenFile = c.open
	}
	return o
}

// powerRound runs one crash on dir and checks the image, which it returns.
func powerRound(t *testing.T, r *rand.Rand, dir, mode string, torn bool, round int) string {
	cfs := newCrashFS(dir, filepath.Join(dir, "commitlog"))
	s := mustOpen(t, powerConf(dir, mode), powerOpts(cfs))
	var mu sync.Mutex
	var acks []ack
	stop, crashNow := make(chan struct{}), make(chan struct{})
	crashAt := 1 + r.IntN(1000)
	crashed := false // guarded by mu
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := 0; i < 400; i++ { // NB: bounds the checks' work
				select {
				case <-stop:
					return
				default:
				}
				if g == 2 { // a batch producer: a checkpoint may end with its batch
					b := &Batch{Template: *msg("t", int32(i%4), "")}
					for n := 2 + i%4; n > 0 && i < 400; n-- {
						body := fmt.Sprintf("r%d-g%d-%d", round, g, i)
						b.Items = append(b.Items, message.BatchItem{Body: []byte(body),
							Properties: string(message.AppendProperties(nil, map[string]string{message.PropKeys: body}))})
						i++
					}
					i--
					res := s.PutBatch(context.Background(), b)
					if res.Status != PutOK {
						return
					}
					mu.Lock()
					for j, it := range b.Items {
						acks = append(acks, ack{topic: "t", qid: b.Template.QueueID, qo: res.QueueOffset + int64(j), pos: res.Positions[j], body: string(it.Body)})
					}
					if len(acks) >= crashAt && !crashed {
						crashed = true
						close(crashNow)
					}
					mu.Unlock()
					continue
				}
				body := fmt.Sprintf("r%d-g%d-%d", round, g, i)
				m := msg("t", int32(i%4), body, message.PropKeys, body)
				res := s.Put(context.Background(), m)
				if res.Status != PutOK {
					return // the store is closing
				}
				mu.Lock()
				acks = append(acks, ack{topic: "t", qid: m.QueueID, qo: res.QueueOffset, pos: res.Pos, body: body})
				if len(acks) >= crashAt && !crashed {
					crashed = true
					close(crashNow)
				}
				mu.Unlock()
			}
		})
	}
	// The power goes after a random number of acknowledged puts.
	select {
	case <-crashNow:
	case <-time.After(5 * time.Second):
	}
	mu.Lock()
	acked := len(acks) // all fsynced before the crash in sync mode
	mu.Unlock()
	img := cfs.crash(t, r, torn)
	close(stop)
	wg.Wait()
	_ = s.Close() // the old store, on the real directory
	checkImage(t, img, mode, acks[:acked])
	return img
}

// checkImage opens the store a power loss left in dir and checks it.
func checkImage(t *testing.T, dir, mode string, acks []ack) {
	t.Helper()
	_, cpErr := os.Stat(filepath.Join(dir, "commitlog", "checkpoint"))
	s := mustOpen(t, powerConf(dir, mode), powerOpts(nil))
	defer s.Close()
	if ri := s.log.Recovery(); cpErr == nil {
		// NB: the checkpoint is written after the fsync it names, so a
		// power loss cannot leave one that claims lost data: it is used.
		require.True(t, ri.FromCheckpoint, "recovery ignored the checkpoint: %s", ri.CheckpointProblem)
	}
	// Every record of the log, in order.
	byPos := map[int64]message.Record{}
	last := map[string]int{} // writer → index of its last message seen
	sc := s.log.NewScanner(s.log.Min(), false)
	for sc.Scan() {
		at, rec := sc.Record()
		d, err := message.Decode(append([]byte(nil), rec...)) // NB: rec is the scanner's buffer
		require.NoError(t, err)
		byPos[int64(at)] = d
		var r, g, i int
		if _, err := fmt.Sscanf(string(d.Body), "r%d-g%d-%d", &r, &g, &i); err == nil {
			w := fmt.Sprintf("r%d-g%d", r, g)
			prev, seen := last[w]
			if !seen {
				prev = -1
			}
			require.Equal(t, prev+1, i, "writer %s: the log is a prefix of what it sent", w)
			last[w] = i
		}
	}
	require.NoError(t, sc.Err(), "the recovered log is clean")
	// Every record is reachable by its queue offset and by its key.
	for pos, d := range byPos {
		res := get(t, s, string(d.Topic), d.QueueID, d.QueueOffset, 1)
		require.Equal(t, GetFound, res.Status, "record at %d (%s/%d@%d) by queue offset", pos, d.Topic, d.QueueID, d.QueueOffset)
		got := records(t, res.Body)
		require.Equal(t, pos, got[0].PhysicalOffset)
		key, _ := message.PropertyValue(string(d.Properties), message.PropKeys)
		recs, err := s.QueryByKey(string(d.Topic), key, 0, time.Now().UnixMilli()+1000, 100)
		require.NoError(t, err)
		found := false
		for _, rec := range recs {
			r, err := message.Decode(rec)
			require.NoError(t, err)
			found = found || r.PhysicalOffset == pos
		}
		require.True(t, found, "record at %d by its key %q", pos, key)
	}
	// Every queue entry points at a record of the log, at its offset.
	entries := 0
	s.Topics(func(topic string, qid int32, min, max int64) bool {
		for off := min; off < max; off++ {
			res := get(t, s, topic, qid, off, 1)
			require.Equal(t, GetFound, res.Status, "%s/%d@%d points into the log", topic, qid, off)
			d := records(t, res.Body)[0]
			require.Contains(t, byPos, d.PhysicalOffset)
			require.Equal(t, off, d.QueueOffset)
			entries++
		}
		return true
	})
	if mode == "sync" {
		for _, a := range acks {
			d, ok := byPos[a.pos]
			require.True(t, ok, "acknowledged %s at %d survives", a.body, a.pos)
			require.Equal(t, a.body, string(d.Body))
		}
	}
	t.Logf("%d records, %d queue entries, %d acknowledged before the crash", len(byPos), entries, len(acks))
}
