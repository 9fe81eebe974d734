package workpool

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// goid returns the calling goroutine's id, from its stack header.
func goid() uint64 {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// workers counts the goroutines in work.
func workers() int {
	b := make([]byte, 1<<20)
	return bytes.Count(b[:runtime.Stack(b, true)], []byte("workpool.work("))
}

// settled waits until the workers of earlier tests have ended: the pool
// is process-wide.
func settled(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return Parked() == 0 && workers() == 0 }, 10*time.Second, time.Millisecond)
}

// runOn runs a task through Go and returns the id of the goroutine it ran on.
func runOn(t *testing.T) uint64 {
	t.Helper()
	ch := make(chan uint64, 1)
	Go(func() { ch <- goid() })
	select {
	case id := <-ch:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("task did not run")
		return 0
	}
}

func TestReusesParkedWorkerWhileAcquired(t *testing.T) {
	settled(t)
	Acquire()
	first := runOn(t)
	// NB: the worker parks after the task; wait until it has.
	require.Eventually(t, func() bool { return Parked() == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, first, runOn(t), "the second task ran on a new goroutine while a worker was parked")
	require.Eventually(t, func() bool { return Parked() == 1 }, 10*time.Second, time.Millisecond)

	Release()
	require.Eventually(t, func() bool { return Parked() == 0 && workers() == 0 }, 10*time.Second, time.Millisecond,
		"a worker stayed parked after the last user left")
}

func TestNoWorkerStaysWithoutUsers(t *testing.T) {
	settled(t)
	first := runOn(t)
	second := runOn(t)
	require.NotEqual(t, first, second, "a task ran on a parked worker although the pool has no user")
	require.Zero(t, Parked())
}

func TestParkedWorkersAreBounded(t *testing.T) {
	settled(t)
	Acquire()
	defer Release()
	const n = 2 * maxIdle
	var started, finished sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	finished.Add(n)
	for range n {
		Go(func() {
			defer finished.Done()
			started.Done()
			<-release // NB: all n run at once, each on a goroutine of its own
		})
	}
	started.Wait()
	close(release)
	finished.Wait()
	// The workers beyond maxIdle end rather than park.
	require.Eventually(t, func() bool { return Parked() == maxIdle && workers() == maxIdle },
		10*time.Second, time.Millisecond, "%d parked, %d workers", Parked(), workers())
}

func TestReacquireAfterRelease(t *testing.T) {
	settled(t)
	Acquire()
	runOn(t)
	require.Eventually(t, func() bool { return Parked() == 1 }, 10*time.Second, time.Millisecond)
	Release()
	settled(t) // the parked worker ended

	Acquire()
	defer Release()
	first := runOn(t)
	require.Eventually(t, func() bool { return Parked() == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, first, runOn(t), "workers do not park again once the pool has a user again")
}

// TestTaskNeverWaitsForABlockedOne: every task queued gets a worker of its
// own on the way, so one that blocks holds up no other, parked workers or
// not.
func TestTaskNeverWaitsForABlockedOne(t *testing.T) {
	settled(t)
	for _, users := range []bool{false, true} {
		if users {
			Acquire()
		}
		block := make(chan struct{})
		Go(func() { <-block })
		runOn(t) // NB: fails the test if it does not run while the first blocks
		close(block)
		if users {
			Release()
		}
		settled(t)
	}
}
