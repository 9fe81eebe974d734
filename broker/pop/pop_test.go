package pop

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHandle_RoundTrip(t *testing.T) {
	h := Handle{Broker: "broker-a", Topic: "T", Queue: 3, Offset: 1 << 40, Nonce: 99, VisibleAt: 1_800_000_000_000}
	got, err := DecodeHandle(h.Encode())
	require.NoError(t, err)
	require.Equal(t, h, got)
	for _, bad := range []string{"", "1", "2abc", "1!!!", h.Encode()[:len(h.Encode())-2], h.Encode() + "AA"} {
		_, err := DecodeHandle(bad)
		require.ErrorIs(t, err, ErrInvalidHandle, "%q", bad)
	}
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add(Handle{Broker: "b", Topic: "T", Queue: 1, Offset: 5, Nonce: 7, VisibleAt: 9}.Encode())
	f.Add("1AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := DecodeHandle(s)
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidHandle))
			return
		}
		again, err := DecodeHandle(h.Encode())
		require.NoError(t, err)
		require.Equal(t, h, again)
	})
}

// TestTable_PopAckRedeliver: new offsets are delivered once; one not acked
// in time is delivered again with attempt 2 and its old handle is invalid;
// an acked one is not delivered again; a change returns a new handle and
// keeps the old one valid when it fails; the committed offset is the
// lowest not acked.
func TestTable_PopAckRedeliver(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	d := tb.Pop("b", "g", "T", 0, 0, 3, 10, 10*time.Second, now)
	require.Len(t, d, 3)
	for i, x := range d {
		require.Equal(t, int64(i), x.Offset)
		require.Equal(t, int32(1), x.Attempt)
	}
	require.Empty(t, tb.Pop("b", "g", "T", 0, 0, 3, 10, 10*time.Second, now), "all in flight")
	require.NoError(t, tb.Ack("g", d[1].Handle, now))
	require.ErrorIs(t, tb.Ack("g", d[1].Handle, now), ErrInvalidHandle, "acked twice")
	off, ok := tb.Committed("g", "T", 0)
	require.True(t, ok)
	require.Equal(t, int64(0), off)

	nh, err := tb.Change("g", d[2].Handle, time.Minute, now)
	require.NoError(t, err)
	require.NotEqual(t, d[2].Handle, nh)
	require.ErrorIs(t, tb.Ack("g", d[2].Handle, now), ErrInvalidHandle, "the old handle after a change")

	later := now.Add(11 * time.Second)
	again := tb.Pop("b", "g", "T", 0, 0, 3, 10, 10*time.Second, later)
	require.Len(t, again, 1, "offset 0 only: 1 is acked, 2 invisible for a minute")
	require.Equal(t, int64(0), again[0].Offset)
	require.Equal(t, int32(2), again[0].Attempt)
	require.ErrorIs(t, tb.Ack("g", d[0].Handle, later), ErrInvalidHandle, "delivered again: the first handle is stale")
	require.NoError(t, tb.Ack("g", again[0].Handle, later))
	require.NoError(t, tb.Ack("g", nh, later))
	off, _ = tb.Committed("g", "T", 0)
	require.Equal(t, int64(3), off)

	// Another group is independent.
	require.Len(t, tb.Pop("b", "g2", "T", 0, 0, 3, 10, 10*time.Second, now), 3)
	// An expired handle: invalid, and a failed change keeps it as it was.
	e := tb.Pop("b", "g3", "T", 0, 0, 1, 10, 10*time.Second, now)
	h, err := tb.Change("g3", e[0].Handle, time.Minute, now.Add(time.Hour))
	require.ErrorIs(t, err, ErrInvalidHandle)
	require.Equal(t, e[0].Handle, h)
}

// TestOpen_SurvivesRestart: a reopened table keeps what was in flight
// (its handles valid), what was acked (not delivered again) and where new
// offsets start.
func TestOpen_SurvivesRestart(t *testing.T) {
	path := t.TempDir() + "/pop"
	now := time.Unix(1_800_000_000, 0)
	tb, err := Open(path, nil)
	require.NoError(t, err)
	d := tb.Pop("b", "g", "T", 0, 0, 3, 10, time.Minute, now)
	require.Len(t, d, 3)
	require.NoError(t, tb.Ack("g", d[0].Handle, now))
	require.NoError(t, tb.Close())
	require.NoError(t, tb.Close(), "idempotent")

	tb, err = Open(path, nil)
	require.NoError(t, err)
	defer tb.Close()
	require.NoError(t, tb.Ack("g", d[1].Handle, now), "a handle from before the restart")
	require.ErrorIs(t, tb.Ack("g", d[0].Handle, now), ErrInvalidHandle, "acked before the restart")
	later := now.Add(2 * time.Minute)
	again := tb.Pop("b", "g", "T", 0, 0, 4, 10, time.Minute, later)
	require.Len(t, again, 2, "offset 2 again and the new offset 3")
	got := map[int64]int32{}
	for _, x := range again {
		got[x.Offset] = x.Attempt
	}
	require.Equal(t, map[int64]int32{2: 2, 3: 1}, got)
}

func TestTable_InflightBound(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	got := 0
	for range 3 {
		got += len(tb.Pop("b", "g", "T", 0, 0, 1<<20, MaxInflight, time.Minute, now))
	}
	require.Equal(t, MaxInflight, got, "no new offsets past the bound")
}
