package commitlog

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

// The kill -9 test runs this file's helper in a child process that appends
// in sync mode from several goroutines and prints one line per acknowledged
// record (after WaitDurable), kills it with SIGKILL at a random moment,
// reopens the log and checks that every acknowledged record is intact.
// scripts/crash.sh runs it in a loop: SLUICE_CRASH_ITER sets the number of
// kills, SLUICE_CRASH_SEED the seed.

const crashChildEnv = "SLUICE_CRASH_CHILD_DIR"

func crashOptions() Options {
	opts := testOptions(64 << 10)
	opts.SyncFlush = true
	opts.WarmAhead = 2 << 20 // each new segment is warmed whole while records go in
	return opts
}

// TestCrashChild is the child process body; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		return
	}
	l, err := Open(dir, crashOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	seed, _ := strconv.ParseUint(os.Getenv("SLUICE_CRASH_CHILD_SEED"), 10, 64)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	var outMu, appendMu sync.Mutex
	deadline := time.Now().Add(20 * time.Second) // the parent kills us long before
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := uint64(0); time.Now().Before(deadline); i++ {
				size := testHeader + r.IntN(3000)
				s := seed<<32 | uint64(g)<<24 | i
				appendMu.Lock()
				at, err := l.Append(size, fillTest(s))
				appendMu.Unlock()
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(3)
				}
				if err := l.WaitDurable(context.Background(), at+Offset(size)); err != nil {
					fmt.Fprintln(os.Stderr, "wait:", err)
					os.Exit(4)
				}
				outMu.Lock()
				fmt.Fprintf(out, "ack %d %d %d\n", at, size, s)
				out.Flush()
				outMu.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

func TestCrash_Kill9(t *testing.T) {
	iters := 3
	if v, err := strconv.Atoi(os.Getenv("SLUICE_CRASH_ITER")); err == nil && v > 0 {
		iters = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SLUICE_CRASH_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d, %d kills", seed, iters)
	r := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	var all []want
	for it := range iters {
		acks := runAndKill(t, dir, seed+uint64(it), time.Duration(50+r.IntN(400))*time.Millisecond)
		require.NotEmpty(t, acks, "kill %d: a kill before any acknowledgement checks nothing", it)
		all = append(all, acks...)
		l := mustOpen(t, dir, crashOptions())
		got := map[Offset]int{}
		s := l.NewScanner(l.Min(), false)
		for s.Scan() {
			at, rec := s.Record()
			got[at] = len(rec)
		}
		require.NoError(t, s.Err(), "iteration %d: the recovered log scans cleanly", it)
		for _, w := range all {
			require.Equal(t, w.size, got[w.at], "iteration %d: acknowledged record at %d", it, w.at)
			buf := make([]byte, w.size)
			_, err := l.ReadAt(buf, w.at)
			require.NoError(t, err)
			require.True(t, bytes.Equal(w.bytes(), buf), "iteration %d: record at %d intact", it, w.at)
		}
		info := l.Recovery()
		t.Logf("kill %d: %d acknowledged (%d total), recovered end %d, scanned %d bytes from %d, truncated=%v",
			it, len(acks), len(all), info.End, info.Scanned, info.ScanFrom, info.Truncated)
		require.False(t, info.Clean, "a killed process leaves the abort file")
		require.True(t, info.FromCheckpoint, "kill %d: %s", it, info.CheckpointProblem)
		require.Empty(t, info.Corrupt)
		require.NoError(t, l.Close())
	}
}

// runAndKill starts the child on dir, kills it after d, and returns the
// records it acknowledged.
func runAndKill(t *testing.T, dir string, seed uint64, d time.Duration) []want {
	t.Helper()
	var ws []want
	for _, line := range testutil.KillChild(t, "TestCrashChild", []string{crashChildEnv + "=" + dir,
		"SLUICE_CRASH_CHILD_SEED=" + strconv.FormatUint(seed, 10)}, d) {
		var w want
		if _, err := fmt.Sscanf(line, "ack %d %d %d\n", &w.at, &w.size, &w.seed); err == nil {
			ws = append(ws, w)
		}
	}
	return ws
}
