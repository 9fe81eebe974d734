// Command mqbench is Sluice's load generator and latency meter, built on the
// client package.
//
//	mqbench produce -n 127.0.0.1:9876 -t bench --size 1024 --producers 4 --duration 10s [--rate 10000] [--batch 32] [--sync]
//	mqbench consume -n 127.0.0.1:9876 -t bench --consumers 2 --duration 10s [-g group]
//	mqbench e2e     -n 127.0.0.1:9876 -t bench --rate 10000 --duration 10s
//	mqbench produce|consume --protocol v5 --grpc 127.0.0.1:8081 -n 127.0.0.1:9876 -t bench ...
//
// produce reports sends per second, MB/s and the send latency (request to
// acknowledgement); consume reports messages per second; e2e produces and
// consumes at once and reports the end-to-end latency (send to delivery).
// Latencies come from an HDR-style histogram (p50, p99, p999, max). A live
// progress line goes to stderr every second; --json prints the final report
// as JSON. --protocol v5 produces and consumes with the RocketMQ 5 protocol
// (gRPC) on the broker's v5 endpoint instead (see v5.go); its consume is a
// SimpleConsumer's receive and ack, and reports the redeliveries seen.
package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/cli"
	"github.com/sluicemq/sluice/internal/filter"
)

type options struct {
	mode      string
	namesrv   string
	creds     cli.Credentials
	tls       cli.ClientTLS
	tlsConfig *tls.Config
	topic     string
	group     string
	size      int
	producers int
	consumers int
	batch     int
	duration  time.Duration
	rate      int
	count     int64
	sync      bool
	inflight  int
	jsonOut   bool
	cpuprof   string
	tracef    string
	memprof   string
	pullBatch int
	senders   int
	autoBatch int
	sql       string
	// probeWait is how long e2e's probe waits for the consumers to get a
	// probe from every queue (0: 30 s).
	probeWait time.Duration
	protocol  string // remoting or v5
	grpcAddr  string // --protocol v5: the broker's v5 endpoint
	// hold: consume --protocol v5 receives this many messages per
	// consumer with auto_renew and holds them unacked until the run ends.
	hold int
}

// Report is mqbench's result.
type Report struct {
	Mode        string  `json:"mode"`
	Seconds     float64 `json:"seconds"`
	Messages    int64   `json:"messages"`
	Errors      int64   `json:"errors"`
	MsgsPerSec  float64 `json:"msgs_per_sec"`
	MBPerSec    float64 `json:"mb_per_sec"`
	LatencyP50  float64 `json:"latency_p50_ms"`
	LatencyP99  float64 `json:"latency_p99_ms"`
	LatencyP999 float64 `json:"latency_p999_ms"`
	LatencyMax  float64 `json:"latency_max_ms"`
	// e2e: the latency's breakdown (see stages).
	Stages *Stages `json:"stages,omitempty"`
	// Statuses counts the messages stored, by send status: SEND_OK, and
	// those stored but not flushed or replicated as configured (a
	// SYNC_MASTER with no slave answers SEND_SLAVE_NOT_AVAILABLE). produce
	// only.
	Statuses map[string]int64 `json:"statuses,omitempty"`
	// Redeliveries counts the messages received with a delivery attempt
	// above 1 (consume --protocol v5 only).
	Redeliveries *int64 `json:"redeliveries,omitempty"`
}

func main() {
	if os.Getenv("GOGC") == "" {
		// NB: a load generator allocates a body per message; collecting
		// less often leaves more of the machine to the broker measured.
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// connect returns the options every client of the run gets: the
// nameservers and the ACL credentials.
func (o options) connect() client.Option {
	opts := []client.Option{client.WithNameServers(nameservers(o.namesrv)...),
		client.WithCredentials(o.creds.AccessKey, o.creds.SecretKey)}
	if o.tlsConfig != nil {
		opts = append(opts, client.WithTLS(o.tlsConfig))
	}
	return client.Combine(opts...)
}

// parseOptions reads the mode and flags; false means a usage error, which
// it has written to stderr.
func parseOptions(args []string, stderr io.Writer) (options, bool) {
	if len(args) == 0 || (args[0] != "produce" && args[0] != "consume" && args[0] != "e2e") {
		switch {
		case len(args) == 0:
			fmt.Fprintln(stderr, "mqbench: no mode given")
		case strings.HasPrefix(args[0], "-"):
			fmt.Fprintf(stderr, "mqbench: the mode comes first, before %s\n", args[0])
		default:
			fmt.Fprintf(stderr, "mqbench: unknown mode %q\n", args[0])
		}
		fmt.Fprintln(stderr, "usage: mqbench produce|consume|e2e [-n NAMESRV] [-t TOPIC] [--size N] [--producers N] [--consumers N] [--batch N] [--pull-batch N] [--duration D] [--rate N] [--sync] [--sql EXPR] [--json] [--cpuprofile FILE] [--memprofile FILE] [--trace FILE] [--access-key KEY --secret-key SECRET] [--tls] [--tls-ca FILE] [--tls-insecure]")
		return options{}, false
	}
	o := options{mode: args[0]}
	fs := flag.NewFlagSet("mqbench "+o.mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.namesrv, "n", envOr("NAMESRV_ADDR", "127.0.0.1:9876"), "nameservers, ip:port;ip:port")
	fs.StringVar(&o.topic, "t", "BenchmarkTopic", "topic")
	fs.StringVar(&o.group, "g", "mqbench", "consumer group")
	fs.IntVar(&o.size, "size", 1024, "message body size in bytes")
	fs.IntVar(&o.producers, "producers", 1, "producer clients")
	fs.IntVar(&o.consumers, "consumers", 1, "consumer clients")
	fs.IntVar(&o.batch, "batch", 1, "messages per send (batch send when > 1)")
	fs.IntVar(&o.senders, "senders", 1, "with --sync: goroutines sending concurrently through each producer")
	fs.IntVar(&o.pullBatch, "pull-batch", 32, "messages per pull for consumers (the broker caps it at pull_max_messages)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to run")
	fs.IntVar(&o.rate, "rate", 0, "target messages per second over all producers (0 = flat out)")
	fs.Int64Var(&o.count, "count", 0, "stop after this many messages (produced, or consumed in consume/e2e mode); 0 = run for --duration")
	fs.BoolVar(&o.sync, "sync", false, "one synchronous send at a time per producer instead of pipelined async sends")
	fs.IntVar(&o.inflight, "inflight", 256, "messages in flight per producer (async sends, or --inflight/--batch batches)")
	fs.IntVar(&o.autoBatch, "auto-batch", 0, "async sends: let the producer combine up to this many messages per queue into one batch request (client.WithAutoBatch); 0 = off")
	fs.StringVar(&o.sql, "sql", "", "consume: subscribe with this SQL92 expression over message properties instead of the tag bench (client.SQL92)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of mqbench itself to this file")
	fs.StringVar(&o.memprof, "memprofile", "", "write mqbench's allocations over the run (a heap profile: go tool pprof -sample_index=alloc_space) to this file")
	fs.StringVar(&o.tracef, "trace", "", "write an execution trace of mqbench itself to this file (go tool trace)")
	fs.StringVar(&o.creds.AccessKey, "access-key", "", cli.CredentialsUsage)
	fs.StringVar(&o.creds.SecretKey, "secret-key", "", cli.SecretUsage)
	fs.BoolVar(&o.tls.Enabled, "tls", false, cli.TLSUsage)
	fs.StringVar(&o.tls.CAFile, "tls-ca", "", cli.TLSCAUsage)
	fs.BoolVar(&o.tls.Insecure, "tls-insecure", false, cli.TLSInsecureUsage)
	fs.StringVar(&o.protocol, "protocol", "remoting", "remoting (4.x clients) or v5 (RocketMQ 5's gRPC protocol on --grpc; produce and consume)")
	fs.StringVar(&o.grpcAddr, "grpc", "127.0.0.1:8081", "--protocol v5: the broker's v5 (gRPC) endpoint, host:port")
	fs.IntVar(&o.hold, "hold", 0, "consume --protocol v5: receive this many messages per consumer with auto_renew, as a PushConsumer does, and hold them unacked until --duration ends (the broker renews them); 0 = off")
	if err := fs.Parse(args[1:]); err != nil {
		return o, false
	}
	if problem := o.creds.Resolve(); problem != "" {
		fmt.Fprintln(stderr, "mqbench: "+problem)
		return o, false
	}
	var err error
	if o.tlsConfig, err = o.tls.Config(); err != nil {
		fmt.Fprintln(stderr, "mqbench:", err)
		return o, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.count > 0 && !set["duration"] {
		o.duration = time.Hour // --count decides; a --duration given stays a safety bound
	}
	for _, c := range []struct {
		bad  bool
		flag string
		want string
	}{
		{o.size < 8 || o.size > client.DefaultMaxBodySize, "--size", fmt.Sprintf("8 to %d bytes (the client's largest body)", client.DefaultMaxBodySize)},
		{o.producers < 1, "--producers", "at least 1"},
		{o.consumers < 1, "--consumers", "at least 1"},
		{o.batch < 1, "--batch", "at least 1"},
		{o.inflight < 1, "--inflight", "at least 1"},
		{o.pullBatch < 1, "--pull-batch", "at least 1"},
		{o.senders < 1, "--senders", "at least 1"},
		{o.autoBatch < 0 || o.autoBatch == 1, "--auto-batch", "0 (off) or at least 2"},
		{o.duration <= 0, "--duration", "more than 0"},
		{o.rate < 0, "--rate", "0 (flat out) or more"},
		{o.count < 0, "--count", "0 (run for --duration) or more"},
		{o.hold < 0, "--hold", "0 (off) or more"},
	} {
		if c.bad {
			v := "?"
			if f := fs.Lookup(strings.TrimPrefix(c.flag, "--")); f != nil {
				v = f.Value.String()
			}
			fmt.Fprintf(stderr, "mqbench: %s %s: give %s\n", c.flag, v, c.want)
			return o, false
		}
	}
	if o.protocol != "remoting" && o.protocol != "v5" {
		fmt.Fprintf(stderr, "mqbench: --protocol %s: give remoting or v5\n", o.protocol)
		return o, false
	}
	if o.protocol == "v5" {
		// NB: e2e --protocol v5 produces with the 4.x client (--rate and
		// --auto-batch are its) and consumes by POP: the consumers compare
		for _, f := range []string{"rate", "auto-batch", "sql"} {
			if set[f] && (f == "sql" || o.mode != "e2e") {
				fmt.Fprintf(stderr, "mqbench: --%s is not served with --protocol v5\n", f)
				return o, false
			}
		}
	}
	if o.hold > 0 && (o.protocol != "v5" || o.mode != "consume" || set["count"]) {
		fmt.Fprintln(stderr, "mqbench: --hold is for consume --protocol v5, without --count (it runs for --duration)")
		return o, false
	}
	if set["sql"] {
		if o.mode != "consume" {
			fmt.Fprintln(stderr, "mqbench: --sql is for consume (e2e consumes the tags bench and probe)")
			return o, false
		}
		if _, err := filter.Compile(o.sql); err != nil {
			fmt.Fprintf(stderr, "mqbench: --sql %q: %v\n", o.sql, err)
			return o, false
		}
	}
	return o, true
}

func run(args []string, stdout, stderr io.Writer) int {
	o, ok := parseOptions(args, stderr)
	if !ok {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var allocs allocsProfile
	for _, p := range []struct {
		flag, file string
		start      func(io.Writer) error
		stop       func()
	}{
		{"--cpuprofile", o.cpuprof, pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"--trace", o.tracef, trace.Start, trace.Stop},
		{"--memprofile", o.memprof, allocs.start, allocs.stop},
	} {
		if p.file == "" {
			continue
		}
		f, err := os.Create(p.file)
		if err == nil {
			err = p.start(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "mqbench: "+p.flag+":", err)
			return 1
		}
		defer f.Close()
		defer p.stop()
	}

	rep, err := bench(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "mqbench:", err)
		return 1
	}
	if o.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		fmt.Fprintf(stdout, "%s: %d msgs in %.1fs = %.0f msgs/s, %.1f MB/s, %d errors\n", rep.Mode, rep.Messages, rep.Seconds, rep.MsgsPerSec, rep.MBPerSec, rep.Errors)
		if line := notOK(rep.Statuses); line != "" {
			fmt.Fprintln(stdout, line)
		}
		if rep.Redeliveries != nil {
			fmt.Fprintf(stdout, "redeliveries (delivery attempt > 1): %d\n", *rep.Redeliveries)
		}
		if rep.LatencyMax > 0 {
			fmt.Fprintf(stdout, "latency ms: p50 %.3f  p99 %.3f  p999 %.3f  max %.3f\n", rep.LatencyP50, rep.LatencyP99, rep.LatencyP999, rep.LatencyMax)
		}
		if st := rep.Stages; st != nil {
			fmt.Fprintf(stdout, "send to store ms: p99 %.3f  p999 %.3f  max %.3f; store to delivery ms: p99 %.3f  p999 %.3f  max %.3f "+
				"(store timestamps are in ms: each side is off by up to 1 ms)\n",
				st.ToStoreP99, st.ToStoreP999, st.ToStoreMax, st.FromStoreP99, st.FromStoreP999, st.FromStoreMax)
			fmt.Fprintf(stdout, "mqbench itself: %d GC pauses, max %.3f ms; goroutines waited to run p99 %.3f ms, p999 %.3f ms\n",
				st.GCPauses, st.GCPauseMax, st.SchedP99, st.SchedP999)
			if st.Stale > 0 {
				fmt.Fprintf(stdout, "left out: %d messages an earlier run sent to the topic\n", st.Stale)
			}
		}
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func nameservers(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// monoEpoch is the origin of monoNow.
var monoEpoch = time.Now()

// monoNow reads the monotonic clock alone: half the cost of time.Now (~60
// ns on this VM), which counts when it is read twice per message sent.
func monoNow() time.Duration { return time.Since(monoEpoch) }

type counters struct {
	msgs, bytes, errs atomic.Int64
	statuses          [client.SendSlaveNotAvailable + 1]atomic.Int64 // messages stored, by send status
	sent              atomic.Int64                                   // messages handed to the producer
	last              atomic.Int64                                   // monoNow() of the last counted message
	done              func()                                         // called once the --count is reached
	lat               histogram
	firstErr          atomic.Pointer[error]
	probed            sync.Map     // e2e: queues that delivered a probe
	probedQueues      atomic.Int64 // their count
	toStore           histogram    // e2e: send to the broker's store timestamp
	fromStore         histogram    // e2e: the store timestamp to delivery
	begun             time.Time    // e2e: the run's start; a message born before is an earlier run's
	stale             atomic.Int64 // e2e: such messages, left out
	redelivered       atomic.Int64 // consume --protocol v5: deliveries with attempt > 1
}

func (c *counters) failed(err error) {
	c.errs.Add(1)
	c.firstErr.CompareAndSwap(nil, &err)
}

func bench(ctx context.Context, o options, stderr io.Writer) (Report, error) {
	c := counters{begun: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	c.done = cancel
	var wg sync.WaitGroup
	var errs []error
	var errMu sync.Mutex
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
		cancel()
	}
	if o.mode != "consume" {
		// Create the topic first, so that the consumers find a route and
		// the producers' time is sending, not creating it.
		if err := warmUp(ctx, o); err != nil {
			return Report{}, err
		}
	}
	if o.mode == "e2e" {
		// NB: latency is measured in steady state. The consumers start
		// first, and the producers once every queue has delivered a probe
		// to them: otherwise the first sends wait for consumers that are
		// still starting (route, rebalance, first pulls), and those few
		// set the p999 and the max of a whole run. With several consumers
		// a rebalance may still follow. --duration includes the probing;
		// msgs/s count from the clock's start.
		for i := range o.consumers {
			wg.Add(1)
			go func() { defer wg.Done(); consume(ctx, o, i, &c, fail) }()
		}
		if err := probe(ctx, o, &c); err != nil {
			cancel()
			wg.Wait()
			// NB: a consumer that failed to start is the cause; say so.
			return Report{}, errors.Join(append(errs, err)...)
		}
	}
	// NB: the clock starts once every producer is started (connected and
	// registered), as nats bench starts its clients before its clock.
	var ready sync.WaitGroup
	goSend := make(chan struct{})
	if o.mode != "consume" {
		for i := range o.producers {
			wg.Add(1)
			ready.Add(1)
			go func() { defer wg.Done(); produce(ctx, o, i, &c, fail, ready.Done, goSend) }()
		}
	}
	ready.Wait()
	start, startMono := time.Now(), monoNow()
	rt0 := readRuntime()
	if o.mode == "consume" {
		for i := range o.consumers {
			wg.Add(1)
			go func() { defer wg.Done(); consume(ctx, o, i, &c, fail) }()
		}
	}
	close(goSend)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-ctx.Done():
				fmt.Fprintln(stderr)
				return
			case <-t.C:
				n := c.msgs.Load()
				fmt.Fprintf(stderr, "\r%s: %8d msgs/s  total %10d  errors %d  p99 %.2f ms   ", o.mode, n-last, n, c.errs.Load(),
					float64(c.lat.quantile(0.99).Microseconds())/1000)
				last = n
			}
		}
	}()
	wg.Wait()
	cancel()
	<-progressDone
	el := time.Since(start).Seconds()
	if o.count > 0 && c.last.Load() > 0 {
		// With --count the run ends at the last message, not at teardown.
		el = (time.Duration(c.last.Load()) - startMono).Seconds()
	}
	if c.msgs.Load() == 0 {
		if e := c.firstErr.Load(); e != nil {
			errs = append(errs, fmt.Errorf("%d sends failed, none got through; first: %w", c.errs.Load(), *e))
		}
		if len(errs) > 0 {
			return Report{}, fewErrors(errs)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rep := Report{Mode: o.mode, Seconds: el, Messages: c.msgs.Load(), Errors: c.errs.Load(),
		MsgsPerSec: float64(c.msgs.Load()) / el, MBPerSec: float64(c.bytes.Load()) / el / 1e6,
		LatencyP50: ms(c.lat.quantile(0.5)), LatencyP99: ms(c.lat.quantile(0.99)), LatencyP999: ms(c.lat.quantile(0.999)),
		LatencyMax: ms(c.lat.max)}
	if o.mode == "e2e" {
		rep.Stages = stages(&c, rt0, readRuntime())
	}
	if o.protocol == "v5" && o.mode == "consume" {
		n := c.redelivered.Load()
		rep.Redeliveries = &n
	}
	if o.mode == "produce" {
		rep.Statuses = map[string]int64{}
		for st := range c.statuses {
			if n := c.statuses[st].Load(); n > 0 || st == int(client.SendOK) {
				rep.Statuses[client.SendStatus(st).String()] = n
			}
		}
	}
	return rep, nil
}

// notOK says how many messages were stored but not as configured (not
// SEND_OK), or "" when none.
func notOK(statuses map[string]int64) string {
	var parts []string
	for st := client.SendFlushDiskTimeout; st <= client.SendSlaveNotAvailable; st++ {
		if n := statuses[st.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "warning: stored but not flushed or replicated as configured (not SEND_OK): " + strings.Join(parts, ", ")
}

// maxShown bounds the different errors a failed run reports.
const maxShown = 3

// fewErrors joins errs with each message once, with its count, and at
// most maxShown different ones: 100,000 producers that all failed to
// reach the name server printed 100,000 lines.
func fewErrors(errs []error) error {
	counts := map[string]int{}
	var distinct []error
	for _, e := range errs {
		m := e.Error()
		if counts[m] == 0 {
			distinct = append(distinct, e)
		}
		counts[m]++
	}
	var out []error
	for i, e := range distinct {
		if i == maxShown {
			out = append(out, fmt.Errorf("and %d more different errors", len(distinct)-maxShown))
			break
		}
		if n := counts[e.Error()]; n > 1 {
			e = fmt.Errorf("%w (%d times)", e, n)
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// produce sends until ctx ends, at its share of --rate when set. In e2e
// mode the body starts with the send time, for the consumer's latency.
// It calls ready once started and warmed up (or failed) and sends once
// goSend closes.
func produce(ctx context.Context, o options, i int, c *counters, fail func(error), ready func(), goSend <-chan struct{}) {
	if o.protocol == "v5" && o.mode != "e2e" {
		produceV5(ctx, o, i, c, fail, ready, goSend)
		return
	}
	opts := []client.Option{o.connect(), client.WithGroup("mqbench-producer"),
		client.WithInstanceName(fmt.Sprintf("mqbench-p%d-%d", os.Getpid(), i)), client.WithAsyncInflight(max(o.inflight/o.batch, 1))}
	if o.autoBatch > 0 {
		opts = append(opts, client.WithAutoBatch(o.autoBatch, min(max(o.autoBatch*(o.size+256), 1024), client.DefaultMaxBodySize)))
	}
	p, err := client.NewProducer(opts...)
	if err == nil {
		err = p.Start()
	}
	if err == nil {
		// NB: one send outside the clock opens the connection and fetches
		// the route; consumers filter it out by its tag.
		_, err = p.Send(ctx, &client.Message{Topic: o.topic, Body: make([]byte, 8), Tags: "warmup"})
	}
	ready()
	if err != nil {
		fail(err)
		return
	}
	defer p.Close()
	select {
	case <-goSend:
	case <-ctx.Done():
		return
	}
	start := time.Now()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	if o.sync && o.senders > 1 {
		// NB: each sender paces itself at its share of the rate.
		so := o
		so.senders, so.producers = 1, o.producers*o.senders
		for range o.senders {
			inflight.Add(1)
			go func() { defer inflight.Done(); sendLoop(ctx, so, p, c, start) }()
		}
		return
	}
	sendLoop(ctx, o, p, c, start)
}

// sendLoop sends through p until ctx ends or the count is reached.
func sendLoop(ctx context.Context, o options, p *client.Producer, c *counters, start time.Time) {
	var interval time.Duration
	if o.rate > 0 {
		interval = time.Second * time.Duration(o.producers*o.batch) / time.Duration(o.rate)
	}
	var inflight sync.WaitGroup
	defer inflight.Wait()
	// NB: outside e2e mode every message shares one body, as nats bench
	// publishes one payload: the client never writes to a body.
	shared := make([]byte, o.size)
	for n := 0; ctx.Err() == nil; n++ {
		size := o.batch
		if o.count > 0 {
			// NB: the last batch is cut to reach --count exactly.
			after := c.sent.Add(int64(o.batch))
			if after-int64(o.batch) >= o.count {
				return
			}
			size -= int(max(after-o.count, 0))
		}
		if interval > 0 {
			if d := time.Until(start.Add(time.Duration(n) * interval)); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
		}
		msgs := make([]*client.Message, size)
		for k := range msgs {
			body := shared
			if o.mode == "e2e" {
				body = make([]byte, o.size)
				binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
			}
			msgs[k] = &client.Message{Topic: o.topic, Body: body, Tags: "bench"}
		}
		sent := monoNow()
		done := func(res client.SendResult, err error) {
			if err != nil {
				if ctx.Err() == nil {
					c.failed(err)
				}
				return
			}
			if int(res.Status) < len(c.statuses) {
				c.statuses[res.Status].Add(int64(len(msgs)))
			}
			if o.mode == "produce" {
				now := monoNow()
				c.lat.record(now - sent)
				c.bytes.Add(int64(len(msgs) * o.size))
				c.last.Store(int64(now))
				if n := c.msgs.Add(int64(len(msgs))); o.count > 0 && n >= o.count {
					c.done()
				}
			}
		}
		switch {
		case o.batch > 1 && o.sync:
			done(p.SendBatch(context.WithoutCancel(ctx), msgs))
		case o.batch > 1:
			inflight.Add(1)
			p.SendBatchAsync(context.WithoutCancel(ctx), msgs, func(r client.SendResult, err error) { defer inflight.Done(); done(r, err) })
		case o.sync:
			done(p.Send(context.WithoutCancel(ctx), msgs[0]))
		default:
			inflight.Add(1)
			p.SendAsync(context.WithoutCancel(ctx), msgs[0], func(r client.SendResult, err error) { defer inflight.Done(); done(r, err) })
		}
	}
}

// probeSelector sends to every queue of the topic in turn and remembers
// how many there are.
type probeSelector struct{ next, queues atomic.Int64 }

func (s *probeSelector) Select(_ *client.Message, queues []client.MessageQueue) client.MessageQueue {
	s.queues.Store(int64(len(queues)))
	return queues[(s.next.Add(1)-1)%int64(len(queues))]
}

// probe sends a probe (tag "probe") to each queue of the topic, again every
// 200 ms, until the consumers have had one from every queue.
func probe(ctx context.Context, o options, c *counters) error {
	sel := &probeSelector{}
	p, err := client.NewProducer(o.connect(), client.WithGroup("mqbench-producer"),
		client.WithInstanceName(fmt.Sprintf("mqbench-q%d", os.Getpid())), client.WithQueueSelector(sel))
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		return err
	}
	defer p.Close()
	wait := o.probeWait
	if wait == 0 {
		wait = 30 * time.Second
	}
	giveUp := time.Now().Add(wait)
	// stopped says how far probing got when it stops short.
	stopped := func(why error) error {
		return fmt.Errorf("e2e probe: consumers ready on %d of %d queues: %w", c.probedQueues.Load(), sel.queues.Load(), why)
	}
	for {
		for k := int64(0); k < max(sel.queues.Load(), 1); k++ {
			if _, err := p.Send(ctx, &client.Message{Topic: o.topic, Body: make([]byte, 8), Tags: "probe"}); err != nil {
				if ctx.Err() != nil {
					// NB: the run's time ran out during a probe's send:
					// say how far probing got, as when it ends waiting.
					return stopped(ctx.Err())
				}
				return fmt.Errorf("e2e probe: %w", err)
			}
		}
		for wait := time.Now().Add(200 * time.Millisecond); time.Now().Before(wait); {
			if c.probedQueues.Load() >= sel.queues.Load() {
				return nil
			}
			select {
			case <-ctx.Done():
				return stopped(ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		if time.Now().After(giveUp) {
			return stopped(fmt.Errorf("gave up after %v", wait))
		}
	}
}

// warmUp sends one message (tag "warmup", which consumers do not
// subscribe to) so that the topic exists before consumers look it up.
func warmUp(ctx context.Context, o options) error {
	p, err := client.NewProducer(o.connect(), client.WithGroup("mqbench-producer"),
		client.WithInstanceName(fmt.Sprintf("mqbench-w%d", os.Getpid())))
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = p.Send(ctx, &client.Message{Topic: o.topic, Body: make([]byte, 8), Tags: "warmup"})
	return err
}

// consume counts delivered messages until ctx ends; in e2e mode it records
// the latency from the send time carried in the body.
func consume(ctx context.Context, o options, i int, c *counters, fail func(error)) {
	if o.protocol == "v5" {
		if o.hold > 0 {
			holdV5(ctx, o, i, c, fail)
			return
		}
		consumeV5(ctx, o, i, c, fail)
		return
	}
	from := client.ConsumeFromFirst
	if o.mode == "e2e" {
		from = client.ConsumeFromLast
	}
	cons, err := client.NewPushConsumer(o.group, o.connect(),
		client.WithInstanceName(fmt.Sprintf("mqbench-c%d-%d", os.Getpid(), i)), client.WithConsumeFrom(from),
		client.WithConsumeBatchSize(32), client.WithPullBatchSize(o.pullBatch))
	if err == nil {
		sel := client.Tag("bench")
		switch {
		case o.sql != "":
			sel = client.SQL92(o.sql)
		case o.mode == "e2e":
			sel = client.Tag("bench || probe")
		}
		err = cons.SubscribeSelector(o.topic, sel, func(_ context.Context, msgs []*client.Message) client.ConsumeResult {
			now := time.Now()
			n := 0
			for _, m := range msgs {
				if m.Tags == "probe" {
					if _, seen := c.probed.LoadOrStore(m.Queue, true); !seen {
						c.probedQueues.Add(1)
					}
					continue
				}
				var born time.Time
				if o.mode == "e2e" && len(m.Body) >= 8 {
					born = time.Unix(0, int64(binary.BigEndian.Uint64(m.Body)))
					if born.Before(c.begun) {
						// NB: sent by an earlier run to the same topic and
						// left unconsumed (or uncommitted): its latency
						// spans the runs.
						c.stale.Add(1)
						continue
					}
				}
				n++
				if !born.IsZero() {
					c.lat.record(now.Sub(born))
					c.toStore.record(max(m.StoreTimestamp.Sub(born), 0))
					c.fromStore.record(max(now.Sub(m.StoreTimestamp), 0))
				}
				c.bytes.Add(int64(len(m.Body)))
			}
			if n == 0 {
				return client.ConsumeSuccess
			}
			c.last.Store(int64(monoNow()))
			if n := c.msgs.Add(int64(n)); o.count > 0 && n >= o.count {
				c.done()
			}
			return client.ConsumeSuccess
		})
	}
	if err == nil {
		err = cons.Start()
	}
	if err != nil {
		fail(err)
		return
	}
	<-ctx.Done()
	cons.Close()
}

// allocsProfile brackets the run for --memprofile: the runtime samples
// allocations all along, and the profile is written at the end.
type allocsProfile struct{ w io.Writer }

func (a *allocsProfile) start(w io.Writer) error {
	a.w = w
	// NB: a sample every 4 KiB rather than 512: a short run's allocations
	// show, at a cost to the run that is the point of the flag to see.
	runtime.MemProfileRate = 4096
	return nil
}

func (a *allocsProfile) stop() {
	runtime.GC() // NB: the profile shows allocations up to the last GC
	_ = pprof.Lookup("allocs").WriteTo(a.w, 0)
}
