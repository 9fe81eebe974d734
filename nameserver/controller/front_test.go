package controller

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// front is n standalone controllers (remoting front + node) in this
// process.
type front struct {
	t     *testing.T
	c     *cluster // for configs; its nodes stay empty
	srvs  []*Standalone
	addrs []string
}

func newFront(t *testing.T, n int) *front { return newFrontWith(t, n, nil) }

// newFrontWith is newFront with tune applied to each node's config.
func newFrontWith(t *testing.T, n int, tune func(*Config)) *front {
	c, lns := newPeers(t, n, tune)
	f := &front{t: t, c: c, srvs: make([]*Standalone, n)}
	for i := range n {
		cfg := c.config(i, lns[i])
		cfg.Advertise = ""
		s, err := StartStandalone("127.0.0.1:0", remoting.ServerOptions{Logger: quietLogger()}, cfg)
		require.NoError(t, err)
		f.srvs[i] = s
		f.addrs = append(f.addrs, s.Addr())
	}
	t.Cleanup(func() {
		for i := range f.srvs {
			f.stop(i)
		}
	})
	return f
}

func (f *front) stop(i int) {
	if f.srvs[i] != nil {
		require.NoError(f.t, f.srvs[i].Close())
		f.srvs[i] = nil
	}
}

func (f *front) leader() int {
	idx := -1
	require.Eventually(f.t, func() bool {
		for i, s := range f.srvs {
			if s != nil && s.Node().IsLeader() {
				idx = i
				return true
			}
		}
		return false
	}, waitFor, 10*time.Millisecond)
	return idx
}

// broker is a broker's controller side: a client, its heartbeats, and the
// role notices it received.
type broker struct {
	cl       *Client
	role     Role
	roles    chan Role
	lastBeat atomic.Int64 // unix nanos: when the last heartbeat was sent
	stop     chan struct{}
	done     chan struct{}
}

func (f *front) broker(name, addr string) *broker { return f.leasedBroker(name, addr, 0) }

// leasedBroker is broker with a lease as master announced in its
// heartbeats; lastBeat is when it last sent one.
func (f *front) leasedBroker(name, addr string, lease time.Duration) *broker {
	b := &broker{roles: make(chan Role, 64), stop: make(chan struct{}), done: make(chan struct{})}
	cl, err := NewClient(ClientConfig{Addrs: f.addrs, Timeout: time.Second, Logger: quietLogger(),
		OnRoleChange: func(r Role) { b.roles <- r }})
	require.NoError(f.t, err)
	b.cl = cl
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	b.role, err = cl.Register(ctx, Registration{Cluster: "c", Name: name, ID: NoMaster, Addr: addr, HAAddr: addr + "1", Lease: lease})
	require.NoError(f.t, err)
	go func() {
		defer close(b.done)
		t := time.NewTicker(testBeatEvery)
		defer t.Stop()
		for {
			hctx, cancel := context.WithTimeout(context.Background(), time.Second)
			// NB: a long timeout, so that a starved goroutine does not
			// kill the broker; kill closes its connection instead.
			b.lastBeat.Store(time.Now().UnixNano())
			_, _ = cl.Heartbeat(hctx, Heartbeat{Cluster: "c", Name: name, ID: b.role.BrokerID, Addr: addr, Timeout: aliveFor,
				Epoch: b.role.MasterEpoch, Lease: lease})
			cancel()
			select {
			case <-b.stop:
				return
			case <-t.C:
			}
		}
	}()
	f.t.Cleanup(b.kill)
	return b
}

// kill stops the broker's heartbeats and closes its connections, as a
// broker process dying does.
func (b *broker) kill() {
	select {
	case <-b.stop:
		return
	default:
	}
	close(b.stop)
	<-b.done
	b.cl.Close()
}

// waitRole waits for a notice satisfying ok.
func (b *broker) waitRole(t *testing.T, ok func(Role) bool) Role {
	deadline := time.After(waitFor)
	for {
		select {
		case r := <-b.roles:
			if ok(r) {
				return r
			}
		case <-deadline:
			t.Fatal("no such role change notice")
		}
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func TestFront_FailoverOverRemoting(t *testing.T) {
	f := newFront(t, 3)
	b1 := f.broker("b", "127.0.0.1:10911")
	b2 := f.broker("b", "127.0.0.1:10921")
	b3 := f.broker("b", "127.0.0.1:10931")
	require.True(t, b1.role.IsMaster())
	require.Equal(t, "127.0.0.1:109111", b2.role.MasterHAAddr)
	require.Equal(t, []int64{1, 2, 3}, []int64{b1.role.BrokerID, b2.role.BrokerID, b3.role.BrokerID})

	ctx := ctxFor(t)
	epoch, err := b1.cl.AlterSyncStateSet(ctx, "b", 1, 1, []int64{1, 2}, b1.role.SyncStateSetEpoch)
	require.NoError(t, err)
	require.Equal(t, int32(2), epoch)
	b2.waitRole(t, func(r Role) bool { return r.SyncStateSetEpoch == 2 })

	info, err := b3.cl.SyncStateData(ctx, []string{"b"})
	require.NoError(t, err)
	ri := info.ReplicasInfoTable["b"]
	require.Equal(t, int64(1), ri.MasterBrokerID)
	require.Len(t, ri.InSyncReplicas, 2)
	require.Len(t, ri.NotInSyncReplicas, 1)
	require.Equal(t, int64(3), ri.NotInSyncReplicas[0].BrokerID)

	// The master dies: its connections close, the in-sync replica takes
	// over in a new epoch, and the others are told.
	b1.kill()
	r := b2.waitRole(t, func(r Role) bool { return r.MasterEpoch == 2 })
	require.Equal(t, int64(2), r.MasterID)
	require.Equal(t, "127.0.0.1:10921", r.MasterAddr)
	require.Equal(t, []int64{2}, r.SyncStateSet)
	b3.waitRole(t, func(r Role) bool { return r.MasterEpoch == 2 && r.MasterID == 2 })

	got, err := b3.cl.ReplicaInfo(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, int64(2), got.MasterID)
	require.Equal(t, []int64{2}, got.SyncStateSet)

	// The deposed master's view is fenced.
	_, err = b3.cl.AlterSyncStateSet(ctx, "b", 1, 1, []int64{1, 3}, epoch)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerFencedMasterEpoch), ce.Code)

	// Planned switchover back to 3 fails (not in sync), then to 3 after it
	// joined the set.
	_, err = b3.cl.ElectMaster(ctx, "b", 3)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int16(protocol.ControllerElectMasterFailed), ce.Code)
	_, err = b2.cl.AlterSyncStateSet(ctx, "b", 2, 2, []int64{2, 3}, r.SyncStateSetEpoch)
	require.NoError(t, err)
	sw, err := b3.cl.ElectMaster(ctx, "b", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), sw.MasterID)
	require.Equal(t, int32(3), sw.MasterEpoch)
	b2.waitRole(t, func(r Role) bool { return r.MasterEpoch == 3 && r.MasterID == 3 })
}

func TestFront_LeaderStopKeepsServing(t *testing.T) {
	f := newFront(t, 3)
	b1 := f.broker("b", "127.0.0.1:10911")
	f.broker("b", "127.0.0.1:10921")
	l := f.leader()
	md, err := b1.cl.Metadata(ctxFor(t), f.addrs[(l+1)%3])
	require.NoError(t, err)
	require.False(t, md.IsLeader)
	require.Equal(t, f.addrs[l], md.ControllerLeaderAddress)
	require.Equal(t, GroupName, md.Group)

	ack, err := b1.cl.Heartbeat(ctxFor(t), Heartbeat{Cluster: "c", Name: "b", ID: 1, Timeout: aliveFor})
	require.NoError(t, err)
	require.Equal(t, 3, ack.Answered)
	require.True(t, ack.LeaderAck)
	require.True(t, ack.Known)
	require.Equal(t, int64(1), ack.Role.MasterID)

	f.stop(l)
	require.Eventually(t, func() bool {
		ack, err = b1.cl.Heartbeat(ctxFor(t), Heartbeat{Cluster: "c", Name: "b", ID: 1, Timeout: aliveFor})
		return err == nil && ack.Answered == 2 && ack.LeaderAck
	}, waitFor, 20*time.Millisecond, "the two left never acknowledged as leader")
	// The client finds the new leader by itself; the state survived.
	got, err := b1.cl.ReplicaInfo(ctxFor(t), "b")
	require.NoError(t, err)
	require.Equal(t, int64(1), got.MasterID)
	require.Equal(t, int32(1), got.MasterEpoch)
	b3 := f.broker("b", "127.0.0.1:10931")
	require.Equal(t, int64(3), b3.role.BrokerID)

	// One node alone is a minority: it takes heartbeats but no leader
	// acknowledges them, which is what fences a cut-off master.
	f.stop(f.leader())
	require.Eventually(t, func() bool {
		ack, err = b1.cl.Heartbeat(ctxFor(t), Heartbeat{Cluster: "c", Name: "b", ID: 1, Timeout: aliveFor})
		return err == nil && ack.Answered == 1 && !ack.LeaderAck
	}, waitFor, 20*time.Millisecond, "a lone node still acknowledged as leader")
}

func TestFront_Refusals(t *testing.T) {
	f := newFront(t, 1)
	f.leader()
	f.broker("b", "127.0.0.1:10911")
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quietLogger()})
	defer rc.Close()
	for _, tc := range []struct {
		name string
		code int16
		ext  map[string]string
		body []byte
		want int16
		in   string
	}{
		{"register without a name", protocol.ControllerRegisterBroker,
			map[string]string{"clusterName": "c", "brokerAddress": "1.2.3.4:5"}, nil, protocol.ControllerInvalidRequest, "brokerName"},
		{"register with a bad address", protocol.ControllerRegisterBroker,
			map[string]string{"clusterName": "c", "brokerName": "b", "brokerAddress": "nowhere"}, nil, protocol.ControllerInvalidRequest, "not ip:port"},
		{"register with a bad id", protocol.ControllerRegisterBroker,
			map[string]string{"clusterName": "c", "brokerName": "b", "brokerAddress": "1.2.3.4:5", "brokerId": "x"}, nil,
			protocol.ControllerInvalidRequest, "brokerId"},
		{"heartbeat without an id", protocol.BrokerHeartbeat, map[string]string{"brokerName": "b"}, nil,
			protocol.ControllerInvalidRequest, "brokerId"},
		{"alter without a body", protocol.ControllerAlterSyncStateSet,
			map[string]string{"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"}, nil, protocol.ControllerInvalidRequest, "empty body"},
		{"alter with garbage", protocol.ControllerAlterSyncStateSet,
			map[string]string{"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"}, []byte("{{"), protocol.ControllerInvalidRequest, "not a SyncStateSet"},
		{"alter with a negative id", protocol.ControllerAlterSyncStateSet,
			map[string]string{"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"},
			[]byte(`{"syncStateSet":[1,-2],"syncStateSetEpoch":1}`), protocol.ControllerInvalidRequest, "negative"},
		{"alter adding a dead broker", protocol.ControllerAlterSyncStateSet,
			map[string]string{"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"},
			[]byte(`{"syncStateSet":[1,7],"syncStateSetEpoch":1}`), protocol.ControllerInvalidReplicas, "not a member"},
		{"designated election without an id", protocol.ControllerElectMaster,
			map[string]string{"brokerName": "b", "designateElect": "true"}, nil, protocol.ControllerInvalidRequest, "brokerId"},
		{"elect while the master lives", protocol.ControllerElectMaster,
			map[string]string{"brokerName": "b"}, nil, protocol.ControllerMasterStillExist, "already"},
		{"replica info of a stranger", protocol.ControllerGetReplicaInfo, map[string]string{"brokerName": "zz"}, nil,
			protocol.ControllerBrokerMetadataNotExist, "zz"},
		{"sync state data with garbage", protocol.ControllerGetSyncStateData, nil, []byte("[1,"),
			protocol.ControllerInvalidRequest, "broker names"},
		{"apply an id held by another address", protocol.ControllerApplyBrokerID,
			map[string]string{"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1", "registerCheckCode": "1.2.3.4:5;1700000000000"},
			nil, protocol.ControllerBrokerIDInvalid, "127.0.0.1:10911"},
		{"apply without a check code", protocol.ControllerApplyBrokerID,
			map[string]string{"clusterName": "c", "brokerName": "b", "appliedBrokerId": "2"}, nil,
			protocol.ControllerInvalidRequest, "registerCheckCode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := rc.Invoke(ctxFor(t), f.addrs[0], remoting.NewRequest(tc.code, tc.ext, tc.body))
			require.NoError(t, err)
			require.Equal(t, tc.want, resp.Code, resp.Remark)
			require.Contains(t, resp.Remark, tc.in)
		})
	}
	// A Java broker's way in: the next id, apply it, then register with it.
	resp, err := rc.Invoke(ctxFor(t), f.addrs[0], remoting.NewRequest(protocol.ControllerGetNextBrokerID,
		map[string]string{"clusterName": "c", "brokerName": "b"}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Equal(t, "2", resp.ExtFields["nextBrokerId"])
	resp, err = rc.Invoke(ctxFor(t), f.addrs[0], remoting.NewRequest(protocol.ControllerApplyBrokerID,
		map[string]string{"clusterName": "c", "brokerName": "b", "appliedBrokerId": "2", "registerCheckCode": "127.0.0.1:10921;1700000000000"}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	resp, err = rc.Invoke(ctxFor(t), f.addrs[0], remoting.NewRequest(protocol.ControllerRegisterBroker,
		map[string]string{"clusterName": "c", "brokerName": "b", "brokerId": "2", "brokerAddress": "127.0.0.1:10921"}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	require.Equal(t, "1", resp.ExtFields["masterBrokerId"])
	require.Equal(t, "2", resp.ExtFields["brokerId"])

	// JSON, as a Java broker sends: the answer is JSON with Java's names.
	resp, err = rc.Invoke(ctxFor(t), f.addrs[0], remoting.NewRequest(protocol.ControllerGetReplicaInfo,
		map[string]string{"brokerName": "b"}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code)
	require.Equal(t, "1", resp.ExtFields["masterBrokerId"])
	require.Equal(t, "127.0.0.1:10911", resp.ExtFields["masterAddress"])
	require.JSONEq(t, `{"syncStateSet":[1],"syncStateSetEpoch":1}`, string(resp.Body))

}

func TestFront_NotLeaderNamesTheLeader(t *testing.T) {
	f := newFront(t, 3)
	l := f.leader()
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quietLogger()})
	defer rc.Close()
	follower := (l + 1) % 3
	require.Eventually(t, func() bool {
		_, addr := f.srvs[follower].Node().Leader()
		return addr == f.addrs[l]
	}, waitFor, 10*time.Millisecond)
	resp, err := rc.Invoke(ctxFor(t), f.addrs[follower], remoting.NewRequest(protocol.ControllerGetReplicaInfo,
		map[string]string{"brokerName": "b"}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.ControllerNotLeader), resp.Code)
	require.Equal(t, f.addrs[l], resp.ExtFields["controllerLeaderAddress"])
	require.Contains(t, resp.Remark, f.addrs[l])
}

// FuzzDecodeBodies feeds both request body decoders fuzzed bytes in each
// codec: an error or a value within bounds, never a panic.
func FuzzDecodeBodies(f *testing.F) {
	f.Add(byte(0), []byte(`{"syncStateSet":[1,2],"syncStateSetEpoch":3}`))
	f.Add(byte(0), []byte(`["a","b"]`))
	f.Add(byte(2), []byte{0x92, 0xa1, 'a', 0xa1, 'b'})
	f.Fuzz(func(t *testing.T, st byte, body []byte) {
		typ := remoting.SerializeType(st % 3)
		if s, err := DecodeSyncStateSet(typ, body); err == nil {
			require.LessOrEqual(t, len(s.SyncStateSet), maxSetSize)
			for _, id := range s.SyncStateSet {
				require.GreaterOrEqual(t, id, int64(0))
			}
		}
		if names, err := DecodeBrokerNames(typ, body); err == nil {
			require.LessOrEqual(t, len(names), maxNames)
		}
	})
}

// TestDecodeBodies_Flood: a body of a million ids or names is refused
// before it is decoded, by a bound on its values: decoding first and
// checking the length after took what a million Go values take (a
// msgpack byte each: 16 MiB of body decoded into 400 MiB of strings).
func TestDecodeBodies_Flood(t *testing.T) {
	const n = 1 << 20
	array32 := []byte{0xdd, 0x00, 0x10, 0x00, 0x00} // n elements
	set := map[remoting.SerializeType][]byte{
		remoting.SerializeMsgpack: append(append([]byte{0x81, 0xac}, "syncStateSet"...), append(array32, bytes.Repeat([]byte{0x00}, n)...)...),
		remoting.SerializeJSON:    append(append([]byte(`{"syncStateSet":[`), bytes.Repeat([]byte(`0,`), n-1)...), `0]}`...),
	}
	names := map[remoting.SerializeType][]byte{
		remoting.SerializeMsgpack: append(array32, bytes.Repeat([]byte{0xa0}, n)...),
		remoting.SerializeJSON:    append(append([]byte(`[`), bytes.Repeat([]byte(`"",`), n-1)...), `""]`...),
	}
	allocs := func(f func()) uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		f()
		runtime.ReadMemStats(&ms)
		return ms.TotalAlloc - before
	}
	for _, st := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeMsgpack} {
		var err error
		n := allocs(func() { _, err = DecodeSyncStateSet(st, set[st]) })
		require.Error(t, err, st)
		require.Less(t, n, uint64(1<<20), "%s: a SyncStateSet allocated", st)
		n = allocs(func() { _, err = DecodeBrokerNames(st, names[st]) })
		require.Error(t, err, st)
		require.Less(t, n, uint64(1<<20), "%s: broker names allocated", st)
	}
	s, err := DecodeSyncStateSet(remoting.SerializeJSON, []byte(`{"syncStateSet":[`+strings.Repeat("1,", maxSetSize-1)+`1],"syncStateSetEpoch":3}`))
	require.NoError(t, err, "a set of maxSetSize ids")
	require.Len(t, s.SyncStateSet, maxSetSize)
	nm, err := DecodeBrokerNames(remoting.SerializeMsgpack, append([]byte{0xdc, byte(maxNames >> 8), byte(maxNames & 0xff)}, bytes.Repeat([]byte{0xa1, 'b'}, maxNames)...))
	require.NoError(t, err, "maxNames names")
	require.Len(t, nm, maxNames)
}
