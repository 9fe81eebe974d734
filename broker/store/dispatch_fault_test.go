package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// diskFault fails writes of the files under one subdirectory of the store:
// the next failNext of them, and all of them while full is set.
type diskFault struct {
	under    string
	failNext atomic.Int64
	full     atomic.Bool
}

func (d *diskFault) open(path string, flag int, perm os.FileMode) (commitlog.File, error) {
	f, err := commitlog.OSOpenFile(path, flag, perm)
	if err != nil || !strings.Contains(path, string(filepath.Separator)+d.under+string(filepath.Separator)) {
		return f, err
	}
	return faultyFile{f, d}, nil
}

type faultyFile struct {
	commitlog.File
	d *diskFault
}

func (f faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if f.d.full.Load() || f.d.failNext.Add(-1) >= 0 {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.d.failNext.Store(0)
	return f.File.WriteAt(p, off)
}

// logCount counts the log records whose message contains a word.
type logCount struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }

// all returns the messages logged so far.
func (l *logCount) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs)
}

func (l *logCount) count(word string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, word) {
			n++
		}
	}
	return n
}

// requireQueue checks that queue t/qid holds exactly the bodies want, at
// contiguous offsets from 0.
func requireQueue(t *testing.T, s *Store, qid int32, want []string) {
	t.Helper()
	require.Equal(t, int64(len(want)), s.MaxOffset("t", qid))
	var got []string
	for off := int64(0); off < int64(len(want)); {
		res := get(t, s, "t", qid, off, 32)
		require.Equal(t, GetFound, res.Status, "t/%d at %d", qid, off)
		for _, r := range records(t, res.Body) {
			require.Equal(t, off, r.QueueOffset)
			got = append(got, string(r.Body))
			off++
		}
	}
	require.Equal(t, want, got)
}

// TestDispatch_QueueWriteRetried: a consume queue write that fails (ENOSPC)
// five times makes the dispatcher retry the same record after a doubling
// delay, with one log line when it starts failing and one when it resumes;
// no record is skipped and every queue entry is there.
func TestDispatch_QueueWriteRetried(t *testing.T) {
	d := &diskFault{under: "consumequeue"}
	logs := &logCount{}
	o := testOpts()
	o.Logger = slog.New(logs)
	o.OpenFile = d.open
	o.ConsumeQueue.WriteBufferEntries = 1 // every entry is one write
	s := mustOpen(t, testConf(t.TempDir()), o)
	defer s.Close()
	want := map[int32][]string{}
	put := func(from, to int) {
		for i := from; i < to; i++ {
			qid := int32(i % 2)
			body := fmt.Sprint("m", i)
			mustPut(t, s, msg("t", qid, body))
			want[qid] = append(want[qid], body)
		}
	}
	put(0, 10)
	waitDispatched(t, s)
	d.failNext.Store(5)
	put(10, 40)
	waitDispatched(t, s)
	requireQueue(t, s, 0, want[0])
	requireQueue(t, s, 1, want[1])
	require.Equal(t, int64(5), s.DispatchRetries())
	// NB: the pass that succeeds logs "resumed" after it has dispatched:
	// waitDispatched may return first.
	require.Eventually(t, func() bool { return logs.count("dispatch resumed") > 0 }, 10*time.Second, time.Millisecond, logs.all())
	require.Equal(t, 1, logs.count("dispatch failed"), logs.all())
	require.Equal(t, 1, logs.count("dispatch resumed"), logs.all())
}

// TestDispatch_KeyIndexDegraded: a key index that cannot write does not stop
// the consume queues: it is marked degraded (one log line), the queues are
// dispatched, and once it can write again it catches up and every key is
// found; its checkpoint never covers what it lacked.
func TestDispatch_KeyIndexDegraded(t *testing.T) {
	dir := t.TempDir()
	d := &diskFault{under: "index"}
	logs := &logCount{}
	o := testOpts()
	o.Logger = slog.New(logs)
	o.OpenFile = d.open
	o.CheckpointInterval = 10 * time.Millisecond
	s := mustOpen(t, testConf(dir), o)
	defer s.Close()
	mustPut(t, s, msg("t", 0, "first", message.PropKeys, "first"))
	waitDispatched(t, s)
	d.full.Store(true)
	var want []string
	for i := range 600 { // more than the index's write buffer
		body := fmt.Sprint("m", i)
		mustPut(t, s, msg("t", 0, body, message.PropKeys, fmt.Sprint("k", i)))
		want = append(want, body)
	}
	waitDispatched(t, s)
	requireQueue(t, s, 0, append([]string{"first"}, want...))
	require.Eventually(t, s.KeyIndexDegraded, 10*time.Second, time.Millisecond)
	// NB: the flag is set before the line is logged.
	require.Eventually(t, func() bool { return logs.count("key index degraded") > 0 }, 10*time.Second, time.Millisecond, logs.all())
	require.Equal(t, 1, logs.count("key index degraded"), logs.all())
	time.Sleep(50 * time.Millisecond) // NB: room for checkpoints, which must not cover the index
	cp := s.loadCheckpoint(filepath.Join(dir, "index"))
	require.Less(t, cp, s.Dispatched(), "the index checkpoint stays behind")

	d.full.Store(false)
	require.Eventually(t, func() bool { return !s.KeyIndexDegraded() }, 20*time.Second, time.Millisecond)
	require.Equal(t, 1, logs.count("key index healthy again"), logs.all())
	for i := range 600 {
		recs, err := s.QueryByKey("t", fmt.Sprint("k", i), 0, time.Now().UnixMilli()+1000, 10)
		require.NoError(t, err)
		require.Len(t, recs, 1, "key k%d", i)
	}
}
