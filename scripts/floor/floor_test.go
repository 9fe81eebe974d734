package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

func file(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// TestDurable: every send is answered once on disk, and the file holds
// every one.
func TestDurable(t *testing.T) {
	ln, f := listen(t), file(t)
	d := startDurable(ln, f)
	defer d.Close()
	rep, err := durableClient(ln.Addr().String(), 4, 400, 1024)
	require.NoError(t, err)
	require.EqualValues(t, 400, rep.Messages)
	require.Positive(t, rep.MsgsPerSec)
	st, err := f.Stat()
	require.NoError(t, err)
	require.EqualValues(t, 400*1024, st.Size())
}

// TestDurable_Preallocated: the sends go into the fallocated space, which
// the file keeps.
func TestDurable_Preallocated(t *testing.T) {
	f, err := openFile(filepath.Join(t.TempDir(), "log"), 4<<20)
	require.NoError(t, err)
	defer f.Close()
	ln := listen(t)
	d := startDurable(ln, f)
	defer d.Close()
	rep, err := durableClient(ln.Addr().String(), 2, 100, 1024)
	require.NoError(t, err)
	require.EqualValues(t, 100, rep.Messages)
	st, err := f.Stat()
	require.NoError(t, err)
	require.EqualValues(t, 4<<20, st.Size())
	d.mu.Lock()
	defer d.mu.Unlock()
	require.EqualValues(t, 100*1024, d.next, "the frames go from the file's start")
}

// TestDurable_EarlyAnswer: the client refuses an answer that says its send
// was not synced yet.
func TestDurable_EarlyAnswer(t *testing.T) {
	ln := listen(t)
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := readFrame(c, nil); err != nil {
			return
		}
		ans := make([]byte, 16)
		binary.BigEndian.PutUint64(ans, 1024)  // the frame's end
		binary.BigEndian.PutUint64(ans[8:], 0) // synced: nothing
		_, _ = c.Write(ans)
		_, _ = io.Copy(io.Discard, c)
	}()
	_, err := durableClient(ln.Addr().String(), 1, 1, 1024)
	require.ErrorIs(t, err, errEarly)
	<-done
}

// TestE2E: every message is delivered once, in order, and appended to the
// relay's file; the percentiles are ordered.
func TestE2E(t *testing.T) {
	ln, f := listen(t), file(t)
	r := startRelay(ln, f)
	defer r.Close()
	for range 2 { // NB: sessions one after another, as the script's rounds
		rep, err := e2eClient(ln.Addr().String(), 2000, 300*time.Millisecond, 64)
		require.NoError(t, err)
		require.Equal(t, 600, rep.Messages)
		require.True(t, 0 <= rep.P50 && rep.P50 <= rep.P99 && rep.P99 <= rep.P999 && rep.P999 <= rep.Max, "%+v", rep)
	}
	require.Eventually(t, func() bool {
		st, err := f.Stat()
		return err == nil && st.Size() == 2*600*64
	}, 5*time.Second, time.Millisecond)
}

// TestE2E_Lost: a relay that drops a message fails the run.
func TestE2E_Lost(t *testing.T) {
	ln := listen(t)
	defer ln.Close()
	done := make(chan struct{})
	go func() { // a relay that forwards every message but the third
		defer close(done)
		var p, c net.Conn
		for p == nil || c == nil {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			var role [1]byte
			if _, err := io.ReadFull(conn, role[:]); err != nil {
				return
			}
			if role[0] == 'p' {
				p = conn
			} else {
				c = conn
			}
		}
		for i := 0; ; i++ {
			b, err := readFrame(p, nil)
			if err != nil {
				return
			}
			_, _ = p.Write(make([]byte, 8))
			if i != 2 {
				out := frame(len(b))
				copy(out[4:], b)
				_, _ = c.Write(out)
			}
		}
	}()
	_, err := e2eClient(ln.Addr().String(), 1000, 10*time.Millisecond, 64)
	require.Error(t, err)
	require.Contains(t, err.Error(), "message 3 arrived as number 2")
	<-done
}

func TestReadFrame_TooLong(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], maxFrame+1)
	_, err := readFrame(bytes.NewReader(hdr[:]), nil)
	require.Error(t, err)
	require.False(t, errors.Is(err, io.EOF))
}
