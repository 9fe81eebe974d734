package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPeakShave runs the demo at a small scale: a burst at 10x the
// consumer's rate is absorbed with no loss and no producer error, the
// backlog rises during the burst and drains to zero afterwards, and the
// chart is written.
func TestPeakShave(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "peak.png")
	cfg := Config{Burst: 500 * time.Millisecond, BurstRate: 1000, ConsumeRate: 100, Chart: chart, MaxDrain: 60 * time.Second}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, int64(500), s.Sent)
	require.Equal(t, int64(0), s.ProducerErrors, "a burst never turns into producer errors")
	require.Equal(t, s.Sent, s.Acked)
	require.Equal(t, int64(0), s.Lost)
	require.Equal(t, s.Acked, s.Consumed)
	require.Greater(t, s.PeakBacklog, int64(200), "the backlog rises during the burst")
	last := s.Samples[len(s.Samples)-1]
	require.Equal(t, last.Acked, last.Consumed, "the backlog drains")
	require.Greater(t, s.DrainTime, time.Duration(0))
	fi, err := os.Stat(chart)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(1000))
	t.Logf("peak backlog %d, drain %.1fs, duplicates %d", s.PeakBacklog, s.DrainTime.Seconds(), s.Duplicates)
}
