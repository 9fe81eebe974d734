package broker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/nameserver"
)

// Replication benchmarks (issue 17's figures):
//
//	go test -run='^$' -bench=Replication -benchtime=20000x ./broker/
//
// Durable: 128 senders, each on its own connection, 1 KiB, flush sync: a
// single broker against a SYNC_MASTER whose slave must have every send.
// AsyncLag: an ASYNC_MASTER at a fixed rate; the time from a send's answer
// to its record being whole on the slave. CatchUp: an empty slave copying
// the master's log against a plain sequential read of the same files.

func benchNamesrv(b *testing.B) string {
	cfg := conf.DefaultNameserver()
	cfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(cfg, quiet())
	if err != nil {
		b.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Close() })
	return ns.Addr()
}

// benchGroup starts a master with role (and, unless role is "", a slave).
func benchGroup(b *testing.B, role, flush string) (master, slave *Broker) {
	ns := benchNamesrv(b)
	start := func(c conf.Broker) *Broker {
		c.NamesrvAddr, c.RegisterInterval = ns, 50*time.Millisecond
		c.Store.SegmentSize, c.Store.SendQueueSize, c.Store.Flush = 1<<30, 100000, flush
		br, err := New(c, Options{Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		if err := br.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { br.Close() })
		return br
	}
	mc := testConfig(b.TempDir())
	mc.Role = conf.RoleAsyncMaster
	if role != "" {
		mc.Role = role
	}
	master = start(mc)
	if role == "" {
		return master, nil
	}
	sc := testConfig(b.TempDir())
	sc.Role, sc.BrokerID = conf.RoleSlave, 1
	slave = start(sc)
	deadline := time.Now().Add(10 * time.Second)
	for len(master.repl.master.Load().Status().Slaves) == 0 || master.repl.master.Load().Status().Slaves[0].Acked < 0 {
		if time.Now().After(deadline) {
			b.Fatal("the slave did not connect")
		}
		time.Sleep(time.Millisecond)
	}
	return master, slave
}

var benchSendExt = protocol.Ext(&protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "bench", DefaultTopic: "TBW102",
	DefaultTopicQueueNums: 8, QueueID: -1, Properties: "TAGS\x01T\x02"})

// sendParallel sends n 1 KiB messages from conns connections, one sender
// each, and returns sends per second; each answer goes to onAck.
func sendParallel(b *testing.B, addr string, conns, n int, onAck func(*remoting.Command, time.Time)) float64 {
	body := make([]byte, 1024)
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				resp, err := c.Invoke(context.Background(), addr, remoting.NewRequest(protocol.SendMessage, benchSendExt, body))
				if err != nil || resp.Code != protocol.Success {
					b.Error(err, resp)
					return
				}
				if onAck != nil {
					onAck(resp, time.Now())
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

func BenchmarkReplication_Durable(b *testing.B) {
	for _, role := range []string{"", conf.RoleSyncMaster} {
		name := "single"
		if role != "" {
			name = "sync_master"
		}
		b.Run(name, func(b *testing.B) {
			master, _ := benchGroup(b, role, conf.FlushSync)
			sendParallel(b, master.Addr(), 8, 1000, nil) // warm up, creates the topic
			b.ResetTimer()
			b.ReportMetric(sendParallel(b, master.Addr(), 128, b.N, nil), "sends/s")
		})
	}
}

// BenchmarkReplication_Controller3: durable produce (flush sync, 128
// senders) to a controller-mode group of three, each send acknowledged
// once the SyncStateSet's three replicas have it, against one broker.
func BenchmarkReplication_Controller3(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		master, _ := benchGroup(b, "", conf.FlushSync)
		sendParallel(b, master.Addr(), 8, 1000, nil)
		b.ResetTimer()
		b.ReportMetric(sendParallel(b, master.Addr(), 128, b.N, nil), "sends/s")
	})
	b.Run("replicas=3", func(b *testing.B) {
		ns, ctl := benchNamesrv(b), startController(b)
		var bs []*Broker
		for range 3 {
			c := ctlConfig(b.TempDir(), ns, ctl.Addr())
			c.Store.SegmentSize, c.Store.SendQueueSize, c.Store.Flush = 1<<30, 100000, conf.FlushSync
			br, err := New(c, Options{Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { br.Close() })
			bs = append(bs, br)
		}
		var m *Broker
		for deadline := time.Now().Add(30 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("no master with three in-sync replicas")
			}
			for _, br := range bs {
				if ss := br.ctl.syncSet.Load(); roleOf(br) == roleMaster && ss != nil && len(ss.ids) == 3 {
					m = br
				}
			}
		}
		sendParallel(b, m.Addr(), 8, 1000, nil)
		b.ResetTimer()
		b.ReportMetric(sendParallel(b, m.Addr(), 128, b.N, nil), "sends/s")
	})
}

func BenchmarkReplication_AsyncLag(b *testing.B) {
	master, slave := benchGroup(b, conf.RoleAsyncMaster, conf.FlushAsync)
	sendParallel(b, master.Addr(), 8, 1000, nil)
	// The slave's published end over time.
	type mark struct {
		end int64
		at  time.Time
	}
	var marks []mark
	var mu sync.Mutex
	done := make(chan struct{})
	watcher := sync.WaitGroup{}
	watcher.Add(1)
	go func() {
		defer watcher.Done()
		l := slave.Store().Log()
		for {
			ch := l.NextChanged()
			mu.Lock()
			marks = append(marks, mark{int64(l.Next()), time.Now()})
			mu.Unlock()
			select {
			case <-ch:
			case <-done:
				return
			}
		}
	}()
	const rate = 50000 // sends per second
	type ack struct {
		pos int64
		at  time.Time
	}
	acks := make([]ack, 0, b.N)
	var amu sync.Mutex
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	body := make([]byte, 1024)
	for range 32 {
		c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if d := time.Until(start.Add(time.Duration(i) * time.Second / rate)); d > 0 {
					time.Sleep(d)
				}
				resp, err := c.Invoke(context.Background(), master.Addr(), remoting.NewRequest(protocol.SendMessage, benchSendExt, body))
				if err != nil || resp.Code != protocol.Success {
					b.Error(err, resp)
					return
				}
				var h protocol.SendMessageResponseHeader
				if err := h.FromExt(resp.ExtFields); err != nil {
					b.Error(err)
					return
				}
				_, pos, err := message.ParseOffsetMsgID(h.MsgID)
				if err != nil {
					b.Error(err)
					return
				}
				amu.Lock()
				acks = append(acks, ack{pos, time.Now()})
				amu.Unlock()
			}
		}()
	}
	wg.Wait()
	sent := time.Since(start)
	for deadline := time.Now().Add(10 * time.Second); slave.Store().Log().Next() < master.Store().Log().Next() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(done)
	watcher.Wait()
	b.StopTimer()
	lags := make([]time.Duration, 0, len(acks))
	for _, a := range acks {
		i := sort.Search(len(marks), func(i int) bool { return marks[i].end > a.pos })
		if i == len(marks) {
			b.Fatalf("record at %d never reached the slave", a.pos)
		}
		lags = append(lags, max(marks[i].at.Sub(a.at), 0))
	}
	slices.Sort(lags)
	q := func(p float64) float64 { return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(acks))/sent.Seconds(), "sends/s")
	b.ReportMetric(q(0.5), "lag-p50-ms")
	b.ReportMetric(q(0.99), "lag-p99-ms")
	b.ReportMetric(q(1), "lag-max-ms")
}

// BenchmarkReplication_CatchUp: b.N MiB stored, then read back plainly
// (the disk's sequential read) and copied by an empty slave, with the page
// cache dropped before each when running as root. It also measures the
// master's send latency while the slave copies against an idle master.
func BenchmarkReplication_CatchUp(b *testing.B) {
	master, _ := benchGroup(b, "", conf.FlushAsync)
	fillMaster(b, master, "big", int64(b.N)<<20)
	if err := master.Store().Log().Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	bytes := float64(master.Store().Log().Next() - master.Store().Log().Min())
	dropCaches := func() {
		_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0)
	}
	dropCaches()
	files, _ := filepath.Glob(filepath.Join(master.cfg.Store.Dir, "commitlog", "0*"))
	buf := make([]byte, 1<<20)
	start := time.Now()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			b.Fatal(err)
		}
		for {
			n, err := fh.Read(buf)
			if n == 0 || err != nil {
				break
			}
		}
		fh.Close()
	}
	readRate := bytes / time.Since(start).Seconds()
	idle := sendLatencies(b, master, 2000)
	dropCaches()
	sc := testConfig(b.TempDir())
	sc.NamesrvAddr, sc.RegisterInterval, sc.Role, sc.BrokerID = master.cfg.NamesrvAddr, 50*time.Millisecond, conf.RoleSlave, 1
	sc.Store.SegmentSize = 1 << 30
	start = time.Now()
	slave, err := New(sc, Options{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	if err := slave.Start(); err != nil {
		b.Fatal(err)
	}
	defer slave.Close()
	busy := sendLatencies(b, master, 2000)
	for slave.Store().Log().Next() < master.Store().Log().Next() {
		time.Sleep(time.Millisecond)
	}
	copyRate := bytes / time.Since(start).Seconds()
	b.ReportMetric(readRate/(1<<20), "read-MiB/s")
	b.ReportMetric(copyRate/(1<<20), "catchup-MiB/s")
	b.ReportMetric(copyRate/readRate, "catchup/read")
	b.ReportMetric(idle, "send-p99-idle-ms")
	b.ReportMetric(busy, "send-p99-catchup-ms")
}

// sendLatencies sends n 1 KiB messages one at a time and returns the
// p99 round trip in milliseconds.
func sendLatencies(b *testing.B, br *Broker, n int) float64 {
	c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
	defer c.Close()
	body := make([]byte, 1024)
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		resp, err := c.Invoke(context.Background(), br.Addr(), remoting.NewRequest(protocol.SendMessage, benchSendExt, body))
		if err != nil || resp.Code != protocol.Success {
			b.Fatal(err, resp)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return float64(lat[len(lat)*99/100].Microseconds()) / 1000
}
