package controller

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordHandler keeps every record it is given.
type recordHandler struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.recs = append(*h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// TestRaftLogsAreRecords: Raft's log lines reach the process's slog as
// records of their own, at their level, with their fields as attributes
// (they came as one Warn record whose msg held hclog's whole line:
// `msg="2026-… [WARN]  raft: heartbeat timeout reached …"`).
func TestRaftLogsAreRecords(t *testing.T) {
	var mu sync.Mutex
	var recs []slog.Record
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.Logger = slog.New(recordHandler{&mu, &recs})
	})
	c.leader()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if strings.Contains(r.Message, "entering leader state") {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "raft's election is logged")
	mu.Lock()
	defer mu.Unlock()
	var raft, withFields int
	for _, r := range recs {
		comp := ""
		fields := 0
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" {
				comp = a.Value.String()
			} else {
				fields++
			}
			return true
		})
		if comp != "raft" {
			continue
		}
		raft++
		if fields > 0 {
			withFields++
		}
		require.NotContains(t, r.Message, "[INFO]", "one record per line, not a line inside a record")
		require.NotContains(t, r.Message, "[WARN]")
		require.NotContains(t, r.Message, "raft: ")
		if strings.Contains(r.Message, "entering leader state") {
			require.Equal(t, slog.LevelInfo, r.Level)
		}
	}
	require.Positive(t, raft)
	require.Positive(t, withFields, "raft's fields are attributes")
}
