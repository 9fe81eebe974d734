package broker

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestSend_ClientThatStopsReading: a client that sends and never reads
// fills its socket with answers; a flush to it then waits for it (up to the
// write timeout, 30 s), and its connection's reader waits behind that
// flush, while netpoll goes on reading what the client sends into memory.
// The connection must be closed for its input backlog (64 MiB, four
// frames), not after the write timeout with gigabytes read (before: 2.2 GB
// of the broker's memory after 45 s), and another client's durable sends
// must be answered meanwhile and after.
func TestSend_ClientThatStopsReading(t *testing.T) {
	c := testConfig(t.TempDir())
	c.Store.Flush = conf.FlushSync
	c.Store.SegmentSize = 64 << 20
	b := startBroker(t, c, Options{})
	cl := newClient(t, remoting.SerializeJSON)
	mustSend(t, cl, b.Addr(), "stall", 0, "first", nil)
	conn := testutil.DialReceiveBuffer(t, b.Addr(), 4096)
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "stall", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 2, BornTimestamp: time.Now().UnixMilli()}
	// NB: at most 512 MiB, so that a broker that never closes the
	// connection fails the test instead of the machine.
	sent := 0
	for i := 0; sent < 512<<20; i++ {
		req := remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte("s"+strconv.Itoa(i)))
		req.Opaque = int32(i)
		frame, err := remoting.EncodeFrame(req)
		require.NoError(t, err)
		require.NoError(t, conn.SetWriteDeadline(time.Now().Add(time.Minute))) // NB: a bound for a hang
		if _, err = conn.Write(frame); err != nil {
			require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the broker neither read nor closed the connection for a minute")
			break
		}
		sent += len(frame)
		if i%1000 == 0 {
			// NB: the other client's sends are answered meanwhile.
			mustSend(t, cl, b.Addr(), "stall", 1, "during-"+strconv.Itoa(i), nil)
		}
	}
	require.Less(t, sent, 512<<20, "512 MiB sent to a connection that reads none of its answers, and it is still open")
	require.Equal(t, uint64(1), b.server.Stats().BacklogClosed, "closed for its input backlog")
	for i := range 20 {
		mustSend(t, cl, b.Addr(), "stall", 1, "after-"+strconv.Itoa(i), nil)
	}
}
