package failover

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kindStats are one fault kind's figures.
type kindStats struct {
	count    int
	failover []time.Duration // from the fault to the first acknowledged send after it
	acked    int             // sends acknowledged from the fault to the end of its check
	lost     int
	refused  int64 // cuts refused (and then allowed by the harness, nothing acknowledged lost)
}

// ledger collects the figures of a run, by fault kind.
type ledger struct {
	order []string
	kinds map[string]*kindStats
}

func (l *ledger) add(kind string, failover time.Duration, acked, lost int, refused int64) {
	if l.kinds == nil {
		l.kinds = map[string]*kindStats{}
	}
	k := l.kinds[kind]
	if k == nil {
		k = &kindStats{}
		l.kinds[kind] = k
		l.order = append(l.order, kind)
	}
	k.count++
	k.failover = append(k.failover, failover)
	k.acked += acked
	k.lost += lost
	k.refused += refused
}

// report logs the summary table, one "summary:" line each.
func (l *ledger) report(t *testing.T, seed uint64, reads int64) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	t.Logf("summary: %-38s %6s %10s %10s %13s %5s %8s", "fault", "count", "p50", "max", "acknowledged", "lost", "refused")
	var n, acked, lost int
	var refused int64
	for _, kind := range l.order {
		k := l.kinds[kind]
		d := slices.Sorted(slices.Values(k.failover))
		t.Logf("summary: %-38s %6d %10s %10s %13d %5d %8d", kind, k.count, ms(d[len(d)/2]), ms(d[len(d)-1]), k.acked, k.lost, k.refused)
		n, acked, lost, refused = n+k.count, acked+k.acked, lost+k.lost, refused+k.refused
	}
	t.Logf("summary: %d faults, %d acknowledged, %d lost, %d cuts refused, %d acknowledged messages read back (seed %d)",
		n, acked, lost, refused, reads, seed)
}

// run is one harness run: the cluster, its producer, the current master
// and the figures.
type run struct {
	t      *testing.T
	c      *cluster
	h      *hosts
	pr     *producer
	r      *rand.Rand
	seed   uint64
	master int
	epoch  int
	led    ledger
	v5     *v5consumer // nil: none (TestClockSteps)
	v5fifo *v5consumer // the orderly group's, of fifo's messages
	fifo   *fifoSender
	v5dups []int // the v5 consumers' duplicates in each round
}

func newRun(t *testing.T, h *hosts) *run {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SLUICE_FAILOVER_SEED"); v != "" {
		_, err := fmt.Sscan(v, &seed)
		require.NoError(t, err)
	}
	t.Logf("seed %d (SLUICE_FAILOVER_SEED)", seed)
	return &run{t: t, h: h, r: rand.New(rand.NewPCG(seed, 1)), seed: seed}
}

// start starts the cluster and the producer.
func (x *run) start() {
	x.c = startCluster(x.t, x.h)
	x.master, x.epoch = x.c.healthy()
	x.pr = startProducer(x.t, x.c.nsAddr)
	x.pr.ackedBy(x.t, "", time.Now())
	x.v5 = startV5Consumer(x.t, x.c.grpcAddrs, "v5failover", "orders", false)
	x.c.createFIFO(x.t)
	x.v5fifo = startV5Consumer(x.t, x.c.grpcAddrs, "v5fifo", "fifo", true)
	x.fifo = startFIFOSender(x.t, x.v5fifo.clients, x.pr)
}

// fault is a kind of fault: inject injects it at the current moment, heals
// it, and returns the failover time.
type fault struct {
	kind   string
	inject func() time.Duration
}

// pick returns the faults to run in turn: all, or the one
// SLUICE_FAILOVER_FAULT names.
func pick(t *testing.T, all []fault) []fault {
	only := os.Getenv("SLUICE_FAILOVER_FAULT")
	if only == "" {
		return all
	}
	for _, f := range all {
		if f.kind == only {
			return []fault{f}
		}
	}
	var kinds []string
	for _, f := range all {
		kinds = append(kinds, f.kind)
	}
	t.Skipf("SLUICE_FAILOVER_FAULT=%q is none of this test's faults: %s", only, strings.Join(kinds, ", "))
	return nil
}

// do runs n faults in turn, each at a random moment mid-stream, each
// followed by the checks, and logs the summary.
func (x *run) do(n int, faults []fault) {
	for round := range n {
		// NB: a round's v5 figures run from its start to the next's: a
		// message in flight at a fault comes again after its invisible
		// time, often after the round's checks.
		var v0, f0 v5figures
		if x.v5 != nil {
			v0, f0 = x.v5.figures(), x.v5fifo.figures()
		}
		time.Sleep(time.Duration(100+x.r.IntN(400)) * time.Millisecond) // NB: a random moment mid-stream
		f := faults[round%len(faults)]
		acked0, refused0, master0 := x.pr.count(), x.c.refused.Load(), x.master
		d := f.inject()
		if d > 10*time.Second {
			for _, p := range x.c.brokers {
				if p == nil {
					continue // NB: in process (TestClockSteps)
				}
				x.t.Logf("---- slow round: %s (%s)\n%s", p.name, p.logPath, tail(p.logPath))
			}
		}
		lost := x.c.check(x.pr)
		x.master, x.epoch = x.c.healthy()
		acked := x.pr.count() - acked0
		x.led.add(f.kind, d, acked, lost, x.c.refused.Load()-refused0)
		x.t.Logf("round %d: %s: acknowledged send after %v; %d acknowledged, %d lost; master broker%d, then broker%d",
			round, f.kind, d.Round(time.Millisecond), acked, lost, master0, x.master)
		if x.v5 != nil {
			v1, f1 := x.v5.figures(), x.v5fifo.figures()
			x.v5dups = append(x.v5dups, v1.dups-v0.dups+f1.dups-f0.dups)
			x.t.Logf("round %d: v5 consumers: %d received, %d duplicates, %d acked delivered again; FIFO: %d received, %d duplicates, %d acked delivered again, %d out of order",
				round, v1.received-v0.received, v1.dups-v0.dups, v1.ackedAgain-v0.ackedAgain,
				f1.received-f0.received, f1.dups-f0.dups, f1.ackedAgain-f0.ackedAgain, f1.disorder-f0.disorder)
		}
	}
	x.led.report(x.t, x.seed, x.pr.reads.Load())
	x.v5report()
}

// v5report waits until the v5 consumer received every acknowledged send
// (the producer paused), then logs its summary: duplicates per failover
// (goal: at most the messages in flight), acked delivered again (0), lost
// (0); the last two fail the test.
func (x *run) v5report() {
	if x.v5 == nil {
		return
	}
	x.pr.paused.Store(true)
	defer x.pr.paused.Store(false)
	require.Eventually(x.t, func() bool { return x.pr.flying.Load() == 0 }, patience, time.Millisecond, "the sends in flight")
	x.pr.mu.Lock()
	ids := make([]string, 0, len(x.pr.acks))
	for _, a := range x.pr.acks {
		ids = append(ids, a.id)
	}
	x.pr.mu.Unlock()
	lost := x.v5.lost(ids)
	fids := x.fifo.ids()
	flost := x.v5fifo.lost(fids)
	f, ff := x.v5.figures(), x.v5fifo.figures()
	if n := len(x.v5dups); n > 0 {
		// NB: the duplicates since the last round's figures (its messages
		// in flight came again during the drain) are the last round's.
		sum := 0
		for _, d := range x.v5dups {
			sum += d
		}
		x.v5dups[n-1] += f.dups + ff.dups - sum
	}
	d := slices.Sorted(slices.Values(x.v5dups))
	if len(d) == 0 {
		d = []int{0}
	}
	x.t.Logf("summary: v5 consumers: %d received, %d duplicates (per failover p50 %d, max %d), %d acked delivered again, %d of %d acknowledged sends lost",
		f.received+ff.received, f.dups+ff.dups, d[len(d)/2], d[len(d)-1], f.ackedAgain+ff.ackedAgain, len(lost)+len(flost), len(ids)+len(fids))
	x.t.Logf("summary: v5 FIFO consumer (8 message groups): %d received, %d duplicates, %d out of order, %d of %d acknowledged sends lost",
		ff.received, ff.dups, ff.disorder, len(flost), len(fids))
	if f.ackedAgain+ff.ackedAgain > 0 || len(lost)+len(flost) > 0 || ff.disorder > 0 {
		_, again := x.v5.disordered()
		disorder, fagain := x.v5fifo.disordered()
		x.t.Errorf("v5 consumers: %d acked messages delivered again (%v %v), %d acknowledged sends never received (first: %v %v), %d FIFO messages before their predecessor (%v)",
			f.ackedAgain+ff.ackedAgain, again, fagain, len(lost)+len(flost), lost[:min(len(lost), 5)], flost[:min(len(flost), 5)], ff.disorder,
			disorder)
	}
}

// hold keeps a fault on for a random while within [lo, hi).
func (x *run) hold(lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(x.r.Int64N(int64(hi-lo)))) // NB: the fault's length, not a wait for a condition
}

// slave returns a random broker other than the master.
func (x *run) slave() int { return (x.master + 1 + x.r.IntN(2)) % 3 }

// The faults of TestFailover_Faults.

func (x *run) killMaster() time.Duration {
	c, m := x.c, x.master
	at := time.Now()
	c.brokers[m].kill()
	nm := c.newMaster(m, x.epoch)
	d := x.pr.ackedBy(x.t, c.brokerAddrs[nm], at)
	c.brokers[m].start(x.t)
	return d
}

func (x *run) killCtlLeader() time.Duration {
	c := x.c
	l := c.ctlLeader()
	at := time.Now()
	c.controllers[l].kill()
	d := x.pr.ackedBy(x.t, "", at)
	c.controllers[l].start(x.t)
	return d
}

func (x *run) stopMaster() time.Duration {
	c, m := x.c, x.master
	at := time.Now()
	c.brokers[m].signal(syscall.SIGSTOP)
	nm := c.newMaster(m, x.epoch)
	d := x.pr.ackedBy(x.t, c.brokerAddrs[nm], at)
	c.brokers[m].signal(syscall.SIGCONT)
	return d
}

// termMaster: a graceful stop of the master (it hands over: refuses sends,
// answers those in flight, resigns), then a restart on its store.
func (x *run) termMaster() time.Duration {
	c, m := x.c, x.master
	at := time.Now()
	c.brokers[m].stop(x.t)
	nm := c.newMaster(m, x.epoch)
	d := x.pr.ackedBy(x.t, c.brokerAddrs[nm], at)
	c.brokers[m].start(x.t)
	return d
}

// rollingRestart stops (SIGTERM) and restarts each broker in a random
// order, each rejoining in sync before the next stops. The failover time
// is the longest of the three.
func (x *run) rollingRestart() time.Duration {
	c := x.c
	var worst time.Duration
	for _, i := range x.r.Perm(3) {
		at := time.Now()
		wasMaster := i == x.master
		c.brokers[i].stop(x.t)
		by := ""
		if wasMaster {
			by = c.brokerAddrs[c.newMaster(i, x.epoch)]
		}
		worst = max(worst, x.pr.ackedBy(x.t, by, at))
		c.brokers[i].start(x.t)
		x.master, x.epoch = c.healthy()
	}
	return worst
}

// killCtlLeaderMidChange: a slave stops, and the controller leader is
// killed (kill -9, restarted at once) or hung (SIGSTOP for a random while,
// as if partitioned) the moment the master asks it to take the slave out
// of the SyncStateSet; the slave restarts, and the (new) leader is killed
// or hung the moment the master asks to take it back. The failover time
// runs from the first fault.
func (x *run) killCtlLeaderMidChange() time.Duration {
	c, m := x.c, x.master
	s := x.slave()
	if x.r.IntN(2) == 0 {
		c.brokers[s].stop(x.t)
	} else {
		c.brokers[s].kill()
	}
	at := x.killLeaderWhenChanging(m, 3)
	d := x.pr.ackedBy(x.t, "", at)
	c.brokers[s].start(x.t)
	x.killLeaderWhenChanging(m, 2)
	return d
}

// killLeaderWhenChanging waits until broker m, master, asks for a
// SyncStateSet change (syncStateSetPending) or its set is no longer of
// size members, kills or hangs the controller leader at once, restarts or
// resumes it, and returns when the fault began.
func (x *run) killLeaderWhenChanging(m, members int) time.Time {
	c := x.c
	l := c.ctlLeader()
	seen := ""
	require.Eventually(x.t, func() bool {
		rt := c.runtime(m)
		if rt == nil || rt["brokerRole"] != "MASTER" {
			seen = "the master changed"
			return true
		}
		if p := rt["syncStateSetPending"]; p != "" {
			seen = "pending " + p + " (set " + rt["syncStateSet"] + ")"
			return true
		}
		if len(strings.Fields(strings.Trim(rt["syncStateSet"], "[]"))) != members {
			seen = "already changed to " + rt["syncStateSet"]
			return true
		}
		return false
	}, patience, time.Millisecond, "a SyncStateSet change")
	at := time.Now()
	if x.r.IntN(2) == 0 {
		c.controllers[l].kill()
		x.t.Logf("killed controller n%d: %s", l, seen)
		c.controllers[l].start(x.t)
		return at
	}
	c.controllers[l].signal(syscall.SIGSTOP)
	x.t.Logf("hung controller n%d: %s", l, seen)
	x.hold(500*time.Millisecond, 4*time.Second)
	c.controllers[l].signal(syscall.SIGCONT)
	return at
}

// hangController: SIGSTOP of a controller that is not the leader (it
// accepts connections and never answers), then of the leader, one at a
// time, each for a random while, with the others going on. The failover
// time is the longer of the two.
func (x *run) hangController() time.Duration {
	c := x.c
	l := c.ctlLeader()
	other := (l + 1 + x.r.IntN(2)) % 3
	at := time.Now()
	c.controllers[other].signal(syscall.SIGSTOP)
	d1 := x.pr.ackedBy(x.t, "", at)
	x.hold(500*time.Millisecond, 3*time.Second)
	c.controllers[other].signal(syscall.SIGCONT)

	l = c.ctlLeader()
	at = time.Now()
	c.controllers[l].signal(syscall.SIGSTOP)
	d2 := x.pr.ackedBy(x.t, "", at)
	x.hold(500*time.Millisecond, 3*time.Second)
	c.controllers[l].signal(syscall.SIGCONT)
	return max(d1, d2)
}

// cutHALink cuts the master's HA link alone (its slaves cannot reach its
// HA port; controllers, name server and clients still can), silently or
// by resetting the connections, for a random while.
func (x *run) cutHALink() time.Duration {
	px := x.c.haProxies[x.master]
	px.cut(x.r.IntN(2) == 0)
	at := time.Now()
	d := x.pr.ackedBy(x.t, "", at)
	x.hold(0, 2*time.Second)
	px.heal()
	return d
}

// TestFailover_Faults: faults on processes and the HA link, on loopback.
// Each kind once by default (CI); SLUICE_FAILOVER_ROUNDS runs more, in
// turn; SLUICE_FAILOVER_FAULT runs one kind; SLUICE_FAILOVER_SEED replays
// the random moments.
func TestFailover_Faults(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault campaign of real processes (the full run has it; -short is the inner loop)")
	}
	x := newRun(t, nil)
	faults := pick(t, []fault{
		{"kill -9 master", x.killMaster},
		{"kill -9 controller leader", x.killCtlLeader},
		{"SIGSTOP master", x.stopMaster},
		{"SIGTERM master", x.termMaster},
		{"rolling restart (SIGTERM)", x.rollingRestart},
		{"ctl leader killed/hung mid set change", x.killCtlLeaderMidChange},
		{"SIGSTOP controller", x.hangController},
		{"HA link cut", x.cutHALink},
	})
	x.start()
	x.do(rounds(t, len(faults)), faults)
}

// The faults of TestFailover_Partitions, each broker on a network
// namespace of its own.

// partitionMaster cuts the master's link (it reaches neither controllers,
// slaves nor clients) past the controllers' timeout: fenced, replaced,
// back as a slave.
func (x *run) partitionMaster() time.Duration {
	c, m := x.c, x.master
	x.h.partition(x.t, m, true)
	at := time.Now() // NB: once the cut is in place: sends made before may be acknowledged
	nm := c.newMaster(m, x.epoch)
	d := x.pr.ackedBy(x.t, c.brokerAddrs[nm], at)
	x.h.partition(x.t, m, false)
	return d
}

// partitionSlave: a slave cut off leaves the SyncStateSet, sends go on;
// healed, it catches up and rejoins.
func (x *run) partitionSlave() time.Duration {
	s := x.slave()
	x.h.partition(x.t, s, true)
	at := time.Now()
	d := x.pr.ackedBy(x.t, x.c.brokerAddrs[x.master], at)
	x.hold(0, time.Second)
	x.h.partition(x.t, s, false)
	return d
}

// cutMasterFromControllers: the master reaches no controller while its
// slaves and clients still reach it: its lease runs out, it stops
// acknowledging, and a slave is elected once the lease and the margin
// passed.
func (x *run) cutMasterFromControllers() time.Duration {
	c, m := x.c, x.master
	x.h.blackhole(x.t, m, x.h.ctl, true)
	at := time.Now()
	nm := c.newMaster(m, x.epoch)
	d := x.pr.ackedBy(x.t, c.brokerAddrs[nm], at)
	x.hold(0, time.Second)
	x.h.blackhole(x.t, m, x.h.ctl, false)
	return d
}

// cutAllFromControllers: no broker reaches a controller (broker–broker
// links up) for a random while: the master stops acknowledging once its
// lease ran out and nobody can be elected until healed. Its failover time
// runs from the heal (the master acknowledges on within its lease).
func (x *run) cutAllFromControllers() time.Duration {
	for i := range 3 {
		x.h.blackhole(x.t, i, x.h.ctl, true)
	}
	x.hold(time.Second, 4*time.Second)
	for i := range 3 {
		x.h.blackhole(x.t, i, x.h.ctl, false)
	}
	return x.pr.ackedBy(x.t, "", time.Now())
}

// cutBrokers: the brokers reach each other no more (their controller and
// client links up) for a random while: the master's slaves leave the
// SyncStateSet and it goes on alone; healed, they catch up and rejoin.
func (x *run) cutBrokers() time.Duration {
	x.brokerLinks(true, 0, 1, 2)
	at := time.Now()
	d := x.pr.ackedBy(x.t, "", at)
	x.hold(0, 2*time.Second)
	x.brokerLinks(false, 0, 1, 2)
	return d
}

// cutOneHALink: the link between the master and one slave alone.
func (x *run) cutOneHALink() time.Duration {
	s := x.slave()
	x.brokerLinks(true, x.master, s)
	at := time.Now()
	d := x.pr.ackedBy(x.t, "", at)
	x.hold(0, 2*time.Second)
	x.brokerLinks(false, x.master, s)
	return d
}

// brokerLinks cuts (or heals) the links between every two of brokers.
func (x *run) brokerLinks(cut bool, brokers ...int) {
	for _, i := range brokers {
		for _, j := range brokers {
			if i != j {
				x.h.blackhole(x.t, i, x.h.addr[j], cut)
			}
		}
	}
}

// TestFailover_Partitions: each broker on its own network namespace
// (root); partitions of a broker, and cuts of some links while the others
// stay up. Each kind once by default (CI); SLUICE_FAILOVER_ROUNDS runs a
// third as many rounds as TestFailover_Faults.
func TestFailover_Partitions(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault campaign of real processes (the full run has it; -short is the inner loop)")
	}
	h := netHosts(t)
	x := newRun(t, h)
	faults := pick(t, []fault{
		{"partition master", x.partitionMaster},
		{"partition slave", x.partitionSlave},
		{"cut master-controllers links", x.cutMasterFromControllers},
		{"cut all broker-controller (from heal)", x.cutAllFromControllers},
		{"cut broker-broker links", x.cutBrokers},
		{"cut one master-slave HA link", x.cutOneHALink},
	})
	x.start()
	n := len(faults)
	if v := os.Getenv("SLUICE_FAILOVER_ROUNDS"); v != "" {
		n = max(rounds(t, n)/3, len(faults))
	}
	x.do(n, faults)
}

// count is how many sends were acknowledged so far.
func (pr *producer) count() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.acks)
}
