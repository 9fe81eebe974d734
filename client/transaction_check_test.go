package client

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// txFake is a name server and broker in one that stores half messages
// (answering SEND_OK), records END_TRANSACTION, and sends checks when the
// test says.
type txFake struct {
	addr string
	mu   sync.Mutex
	conn *remoting.Conn // the producer's connection, from its first END_TRANSACTION
	ends []protocol.EndTransactionRequestHeader
	got  chan struct{} // a token per END_TRANSACTION
}

func startTxFake(t *testing.T) *txFake {
	f := &txFake{got: make(chan struct{}, 16)}
	s := remoting.NewServer("127.0.0.1:0", remoting.ServerOptions{Logger: quiet()})
	s.Handle(protocol.GetRouteInfoByTopic, func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		resp := remoting.NewResponse(req, protocol.Success, "")
		resp.Body, _ = remoting.EncodeBody(req.SerializeType, fakeRoute(f.addr))
		_ = w.Write(resp)
	})
	s.HandleDefault(func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		switch req.Code {
		case protocol.EndTransaction:
			var h protocol.EndTransactionRequestHeader
			require.NoError(t, h.FromExt(req.ExtMap()))
			f.mu.Lock()
			f.ends = append(f.ends, h)
			if f.conn == nil {
				f.conn = w.Conn()
			}
			f.mu.Unlock()
			f.got <- struct{}{}
			_ = w.Write(remoting.NewResponse(req, protocol.Success, ""))
		case protocol.SendMessage, protocol.SendMessageV2:
			h, err := protocol.DecodeSendMessageRequestHeader(req.Code, req.ExtMap())
			require.NoError(t, err)
			resp := remoting.NewResponse(req, protocol.Success, "")
			resp.ExtFields = protocol.Ext(&protocol.SendMessageResponseHeader{
				MsgID:   message.OffsetMsgID(netip.MustParseAddrPort("127.0.0.1:10911"), 4096),
				QueueID: h.QueueID, QueueOffset: 7})
			_ = w.Write(resp)
		default:
			_ = w.Write(remoting.NewResponse(req, protocol.Success, ""))
		}
	})
	require.NoError(t, s.Start())
	f.addr = s.Addr().String()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return f
}

// waitEnd waits for the next END_TRANSACTION and returns it.
func (f *txFake) waitEnd(t *testing.T) protocol.EndTransactionRequestHeader {
	t.Helper()
	select {
	case <-f.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no END_TRANSACTION within 10 s")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ends[len(f.ends)-1]
}

// check asks the producer about the half message id (with body) of
// group, as a broker does.
func (f *txFake) check(t *testing.T, group, id, body string) {
	t.Helper()
	m := message.Message{Topic: "tx", SysFlag: message.TxPrepared, Body: []byte(body),
		BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"),
		Properties: string(message.AppendProperties(nil, map[string]string{message.PropUniqKey: id,
			message.PropProducerGroup: group, message.PropTranMsg: "true"}))}
	rec := make([]byte, m.EncodedSize())
	require.NoError(t, m.Encode(rec, 7, 4096))
	h := protocol.CheckTransactionStateRequestHeader{TranStateTableOffset: 7, CommitLogOffset: 4096, MsgID: id, TransactionID: id}
	req := remoting.NewRequest(protocol.CheckTransactionState, protocol.Ext(&h), rec)
	req.Language = protocol.LanguageJava
	f.mu.Lock()
	conn := f.conn
	f.mu.Unlock()
	_, err := conn.Invoke(ctxT(t, 5*time.Second), req, remoting.Oneway())
	require.NoError(t, err)
}

// TestTransaction_LateCheckGetsTheDecision: a check of a half message
// that reaches the producer after it decided (the broker asked before the
// decision reached it) is answered with that decision, not with
// CheckLocal; nor is a message CheckLocal decided asked about again.
// Before, such a check called CheckLocal (TestTransaction failed under
// load: "slow", decided by ExecuteLocal, was checked).
func TestTransaction_LateCheckGetsTheDecision(t *testing.T) {
	f := startTxFake(t)
	// NB: CheckLocal answers the opposite of ExecuteLocal: an answer from
	// it shows.
	l := &txListener{ids: map[string]string{}, checks: map[string]TransactionState{
		"commit": TransactionRollback, "rollback": TransactionCommit, "unknown": TransactionCommit}}
	p, err := NewProducer(WithNameServers(f.addr), WithLogger(quiet()), WithGroup("tx-late"), WithTransactionListener(l),
		WithHeartbeatInterval(time.Hour))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Close() })

	for body, want := range map[string]int32{"commit": message.TxCommit, "rollback": message.TxRollback} {
		res, err := p.SendInTransaction(ctxT(t, 10*time.Second), &Message{Topic: "tx", Body: []byte(body)})
		require.NoError(t, err)
		require.Equal(t, want, f.waitEnd(t).CommitOrRollback, body)
		f.check(t, "tx-late", res.MsgID, body)
		end := f.waitEnd(t)
		require.True(t, end.FromTransactionCheck, body)
		require.Equal(t, res.MsgID, end.MsgID, body)
		require.Equal(t, want, end.CommitOrRollback, "%s: the check gets the producer's decision", body)
	}

	res, err := p.SendInTransaction(ctxT(t, 10*time.Second), &Message{Topic: "tx", Body: []byte("unknown")})
	require.NoError(t, err)
	require.Equal(t, TransactionUnknown, res.State)
	require.Equal(t, message.TxNot, f.waitEnd(t).CommitOrRollback)
	for range 2 {
		f.check(t, "tx-late", res.MsgID, "unknown")
		end := f.waitEnd(t)
		require.True(t, end.FromTransactionCheck)
		require.Equal(t, message.TxCommit, end.CommitOrRollback, "CheckLocal's answer, and then again without asking it")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Equal(t, []string{"unknown"}, l.checked, "CheckLocal asked once, about the message nobody had decided")
}
