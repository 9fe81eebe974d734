package main

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot"

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
	f, err := os.Open(chart)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "a PNG")
	require.Equal(t, image.Pt(864, 576), img.Bounds().Size(), "9x6 in at 96 dpi: two panels")
	t.Logf("peak backlog %d, drain %.1fs, duplicates %d", s.PeakBacklog, s.DrainTime.Seconds(), s.Duplicates)
}

// TestConfig_Out: the chart goes where the README shows it
// (scripts/peakshave/peakshave.png, whatever the current directory; the
// current directory's peakshave.png for a build with -trimpath, which
// scripts/test.sh uses), or to -out.
func TestConfig_Out(t *testing.T) {
	here, err := os.Getwd() // NB: go test runs in the package's directory
	require.NoError(t, err)
	want := filepath.Join(here, "peakshave.png")
	if sourceDir() == "" { // NB: built with -trimpath: no source path is known
		want = "peakshave.png"
	}
	t.Chdir(t.TempDir())
	cfg, err := parseConfig(nil, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, want, cfg.Chart)
	cfg, err = parseConfig([]string{"--out", "/tmp/x.png", "-rate", "10"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, "/tmp/x.png", cfg.Chart)
	require.Equal(t, 10, cfg.BurstRate)
	_, err = parseConfig([]string{"-chart", "x.png"}, io.Discard)
	require.Error(t, err)
}

// TestSecondTicks: labels at round seconds from 0, at most 12 of them,
// whatever the span.
func TestSecondTicks(t *testing.T) {
	labels := func(hi float64) []string {
		var l []string
		for _, tk := range (secondTicks{}).Ticks(0, hi) {
			if tk.Label != "" {
				l = append(l, tk.Label)
			}
		}
		return l
	}
	require.Equal(t, []string{"0", "1", "2", "3", "4"}, labels(4.7))
	require.Equal(t, []string{"0", "5", "10", "15", "20", "25", "30", "35", "40", "45"}, labels(46.3))
	require.Equal(t, []string{"0", "30", "60", "90", "120", "150", "180", "210", "240", "270", "300"}, labels(300))
	require.Equal(t, []string{"0", "60", "120", "180", "240", "300", "360", "420", "480", "540", "600", "660"}, labels(700))
	all := (secondTicks{}).Ticks(0, 46.3)
	require.Len(t, all, 47, "a tick each second")
	for i, tk := range all {
		require.Equal(t, plot.Tick{Value: float64(i), Label: map[bool]string{true: fmt.Sprint(i)}[i%5 == 0]}, tk)
	}
}
