package conf

import (
	"errors"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// MaxRecordOverhead is the room a segment needs beyond Store.MaxMessageSize:
// the v1 record's fixed fields with IPv6 hosts (115 bytes), the topic (127),
// the properties (32,767) and the 8 bytes that keep a blank record placeable
// at the segment end, rounded up to 36 KiB.
const MaxRecordOverhead = 36 << 10

// Bounds checked by Validate (sizes in bytes).
const (
	minSegmentSize  = 64 << 10
	maxSegmentSize  = 4 << 30
	minFrameSize    = 64 << 10
	maxFrameSize    = 1 << 30
	frameHeaderRoom = 64 << 10 // request header room in a frame beyond the body
	maxNameLen      = 127
	minExpiry       = 10 * time.Millisecond
)

// checker collects FieldErrors so Validate reports every problem at once.
type checker struct{ errs []error }

func (c *checker) fail(key, value, problem string) {
	c.errs = append(c.errs, &FieldError{Key: key, Value: value, Problem: problem})
}

func (c *checker) err() error { return errors.Join(c.errs...) }

// passes runs check and reports whether it added no error. Relations between
// fields are checked only when the field they refer to passed its own bounds,
// so one bad value yields one error.
func (c *checker) passes(check func()) bool {
	n := len(c.errs)
	check()
	return len(c.errs) == n
}

func (c *checker) intRange(key string, v, lo, hi int64) {
	s := strconv.FormatInt(v, 10)
	switch {
	case v < lo:
		c.fail(key, s, "must be >= "+strconv.FormatInt(lo, 10))
	case v > hi:
		c.fail(key, s, "must be <= "+strconv.FormatInt(hi, 10))
	}
}

// sizeRange is intRange for byte sizes; the bound also appears in KiB/MiB/GiB.
func (c *checker) sizeRange(key string, v, lo, hi int64) {
	s := strconv.FormatInt(v, 10)
	switch {
	case v < lo:
		c.fail(key, s, "must be >= "+strconv.FormatInt(lo, 10)+" ("+humanBytes(lo)+")")
	case v > hi:
		c.fail(key, s, "must be <= "+strconv.FormatInt(hi, 10)+" ("+humanBytes(hi)+")")
	}
}

// durRange checks lo <= v <= hi; hi < 0 means no upper bound.
func (c *checker) durRange(key string, v, lo, hi time.Duration) {
	switch {
	case v < lo:
		c.fail(key, v.String(), "must be >= "+lo.String())
	case hi >= 0 && v > hi:
		c.fail(key, v.String(), "must be <= "+hi.String())
	}
}

// name checks a broker or cluster name.
func (c *checker) name(key, v string) {
	q := strconv.Quote(v)
	if v == "" {
		c.fail(key, q, "must not be empty")
		return
	}
	if len(v) > maxNameLen {
		c.fail(key, q, "must be at most "+strconv.Itoa(maxNameLen)+" bytes")
		return
	}
	for _, r := range v {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '-' || r == '_' || r == '.'
		if !ok {
			c.fail(key, q, "may hold only letters, digits, '-', '_' and '.'")
			return
		}
	}
}

// addr checks a host:port. A listen address may leave the host empty (every
// interface) and use port 0 (a free port); a dial address may not.
func (c *checker) addr(key, v string, listen bool) {
	if problem := addrProblem(v, listen); problem != "" {
		c.fail(key, strconv.Quote(v), problem)
	}
}

func addrProblem(v string, listen bool) string {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return `must be "host:port"`
	}
	if !listen && host == "" {
		return "host must not be empty"
	}
	if strings.ContainsAny(host, " \t;") {
		return "host must not hold spaces or ';'"
	}
	p, err := strconv.ParseUint(port, 10, 16)
	lo := uint64(1)
	if listen {
		lo = 0
	}
	if err != nil || p < lo {
		return "port must be a number in " + strconv.FormatUint(lo, 10) + "..65535"
	}
	return ""
}

// remoting checks r and reports whether max_frame_size passed.
func (c *checker) remoting(p string, r Remoting) bool {
	ok := c.passes(func() { c.sizeRange(p+"max_frame_size", int64(r.MaxFrameSize), minFrameSize, maxFrameSize) })
	c.durRange(p+"frame_timeout", r.FrameTimeout, time.Millisecond, time.Hour)
	c.durRange(p+"idle_timeout", r.IdleTimeout, 0, -1)
	c.intRange(p+"max_connections_per_address", int64(r.MaxConnsPerAddr), 1, 1_000_000)
	return ok
}

// Validate reports every field out of bounds, each as a *FieldError naming
// its key path, joined with errors.Join; nil when b is usable.
func (b Broker) Validate() error {
	var c checker
	c.name("broker_name", b.BrokerName)
	c.name("cluster_name", b.ClusterName)
	idOK := c.passes(func() { c.intRange("broker_id", b.BrokerID, 0, math.MaxInt64) })
	if b.ControllerMode() {
		for i, a := range strings.Split(b.Controller, ";") {
			if problem := addrProblem(strings.TrimSpace(a), false); problem != "" {
				c.fail("controller", strconv.Quote(b.Controller), "entry "+strconv.Itoa(i+1)+" "+strconv.Quote(a)+": "+problem+
					`; want "host:port;host:port", the controllers' remoting addresses`)
			}
		}
		idOK = false // NB: the role is elected; broker_id is only a wish
	}
	switch b.Role {
	case RoleAsyncMaster, RoleSyncMaster:
		if idOK && b.BrokerID != 0 {
			c.fail("broker_id", strconv.FormatInt(b.BrokerID, 10), "must be 0 for a master (role "+b.Role+")")
		}
	case RoleSlave:
		if b.BrokerID == 0 && !b.ControllerMode() {
			c.fail("broker_id", "0", "must be > 0 for a slave (role SLAVE)")
		}
	default:
		c.fail("role", strconv.Quote(b.Role), "must be ASYNC_MASTER, SYNC_MASTER or SLAVE")
	}
	if b.Advertise != "" {
		c.addr("advertise", b.Advertise, false)
	}
	if b.HA.Listen != "" {
		c.addr("ha.listen", b.HA.Listen, true)
	}
	if b.HA.Advertise != "" {
		c.addr("ha.advertise", b.HA.Advertise, false)
	}
	c.durRange("ha.sync_timeout", b.HA.SyncTimeout, time.Millisecond, 10*time.Minute)
	c.sizeRange("ha.max_lag", b.HA.MaxLag, 1<<20, 1<<40)
	c.durRange("ha.max_catchup_lag", b.HA.MaxCatchupLag, time.Second, time.Hour)
	c.intRange("ha.min_in_sync_replicas", int64(b.HA.MinInSyncReplicas), 1, 16)
	c.addr("listen", b.Listen, true)
	if b.NamesrvAddr != "" {
		for i, a := range strings.Split(b.NamesrvAddr, ";") {
			if problem := addrProblem(a, false); problem != "" {
				c.fail("namesrv_addr", strconv.Quote(b.NamesrvAddr),
					"entry "+strconv.Itoa(i+1)+" "+strconv.Quote(a)+": "+problem+
						`; want "host:port;host:port", or empty to embed a nameserver`)
			}
		}
	}
	if b.MetricsListen != "" {
		c.addr("metrics_listen", b.MetricsListen, true)
	}
	b.Console.validate(&c, "console.")
	b.GRPC.validate(&c, "grpc.")
	c.durRange("register_interval", b.RegisterInterval, 10*time.Millisecond, 10*time.Minute)
	expiry := b.EmbeddedNamesrv.BrokerExpiry
	if b.EmbedNamesrv() && expiry >= minExpiry && b.RegisterInterval >= expiry {
		c.fail("register_interval", b.RegisterInterval.String(),
			"must be < embedded_namesrv.broker_expiry ("+b.EmbeddedNamesrv.BrokerExpiry.String()+")")
	}
	c.intRange("default_topic_queue_nums", int64(b.DefaultTopicQueueNums), 1, 1024)
	c.durRange("transaction_check_interval", b.TransactionCheckInterval, 100*time.Millisecond, time.Hour)
	c.durRange("transaction_timeout", b.TransactionTimeout, 100*time.Millisecond, time.Hour)
	b.Store.validate(&c, "store.")
	frameOK := c.remoting("remoting.", b.Remoting)
	if room := int64(b.Store.MaxMessageSize) + frameHeaderRoom; frameOK && int64(b.Remoting.MaxFrameSize) < room {
		c.fail("remoting.max_frame_size", strconv.FormatInt(int64(b.Remoting.MaxFrameSize), 10),
			"must be >= store.max_message_size + "+strconv.Itoa(frameHeaderRoom)+" ("+strconv.FormatInt(room, 10)+")")
	}
	c.durRange("long_poll.max_suspend", b.LongPoll.MaxSuspend, time.Millisecond, time.Hour)
	c.durRange("long_poll.short_poll_wait", b.LongPoll.ShortPollWait, 0, time.Minute)
	c.durRange("dedup.window", b.Dedup.Window, 0, 24*time.Hour)
	c.intRange("dedup.max_keys", int64(b.Dedup.MaxKeys), 1000, 100_000_000)
	c.intRange("pull_max_messages", int64(b.PullMaxMessages), 1, 4096)
	c.intRange("gc_percent", int64(b.GCPercent), 25, 10000)
	b.EmbeddedNamesrv.validate(&c, "embedded_namesrv.")
	if b.EmbeddedNamesrv.Controller.Enable {
		c.fail("embedded_namesrv.controller.enable", "true", "must be false: run the controller in mqnamesrv or mqcontroller")
	}
	b.ACL.validate(&c, b)
	b.TLS.validate(&c, "tls.")
	b.checkPortClashes(&c)
	return c.err()
}

// checkPortClashes rejects two of the process's listeners on one port. Clashes
// inside the embedded nameserver are its own validate's business.
func (b Broker) checkPortClashes(c *checker) {
	if sameListener(b.MetricsListen, b.Listen) {
		c.fail("metrics_listen", strconv.Quote(b.MetricsListen), "must not use the same port as listen")
	}
	if !b.EmbedNamesrv() {
		return
	}
	own := [][2]string{{"listen", b.Listen}, {"metrics_listen", b.MetricsListen}}
	emb := [][2]string{{"embedded_namesrv.listen", b.EmbeddedNamesrv.Listen},
		{"embedded_namesrv.metrics_listen", b.EmbeddedNamesrv.MetricsListen}}
	for _, e := range emb {
		for _, o := range own {
			if sameListener(e[1], o[1]) {
				c.fail(e[0], strconv.Quote(e[1]), "must not use the same port as "+o[0])
			}
		}
	}
}

func sameListener(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

func (s Store) validate(c *checker, p string) {
	if s.Dir == "" {
		c.fail(p+"dir", `""`, "must not be empty")
	}
	maxMsg := int64(math.MaxInt32)
	if c.passes(func() { c.sizeRange(p+"segment_size", s.SegmentSize, minSegmentSize, maxSegmentSize) }) {
		maxMsg = min(maxMsg, s.SegmentSize-MaxRecordOverhead)
	}
	if int64(s.MaxMessageSize) > maxMsg {
		c.fail(p+"max_message_size", strconv.FormatInt(int64(s.MaxMessageSize), 10),
			"must be <= "+p+"segment_size - "+strconv.Itoa(MaxRecordOverhead)+" ("+strconv.FormatInt(maxMsg, 10)+")")
	} else {
		c.intRange(p+"max_message_size", int64(s.MaxMessageSize), 1, maxMsg)
	}
	if s.Flush != FlushAsync && s.Flush != FlushSync {
		c.fail(p+"flush", strconv.Quote(s.Flush), `must be "async" or "sync"`)
	}
	c.durRange(p+"flush_interval", s.FlushInterval, time.Millisecond, time.Minute)
	c.durRange(p+"sync_flush_timeout", s.SyncFlushTimeout, time.Millisecond, 10*time.Minute)
	c.durRange(p+"group_commit_window", s.GroupCommitWindow, 0, 100*time.Millisecond)
	if s.WarmAhead != 0 {
		c.sizeRange(p+"warm_ahead", s.WarmAhead, 2<<20, 1<<30)
	}
	if s.ReadAhead != 0 {
		c.sizeRange(p+"read_ahead", s.ReadAhead, 1<<20, 1<<30)
	}
	c.durRange(p+"file_reserved_time", s.FileReservedTime, time.Second, -1)
	c.durRange(p+"retention_interval", s.RetentionInterval, 10*time.Millisecond, time.Hour)
	high, full := s.DiskHighWatermark, s.DiskFullWatermark
	fmtF := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	// NB: the conditions are negated so that NaN (YAML ".nan") fails them.
	highOK := high > 0 && high < 1
	if !highOK {
		c.fail(p+"disk_high_watermark", fmtF(high), "must be > 0 and < 1")
	}
	switch {
	case !(full <= 0.99):
		c.fail(p+"disk_full_watermark", fmtF(full), "must be <= 0.99")
	case highOK && !(full > high):
		c.fail(p+"disk_full_watermark", fmtF(full), "must be > "+p+"disk_high_watermark ("+fmtF(high)+")")
	}
	if s.OnDiskPressure != DiskPressureRefuse && s.OnDiskPressure != DiskPressureDeleteOldest {
		c.fail(p+"on_disk_pressure", strconv.Quote(s.OnDiskPressure), `must be "refuse" or "delete_oldest"`)
	}
	if s.DiskReserve != 0 {
		c.sizeRange(p+"disk_reserve", s.DiskReserve, 1<<20, 1<<30)
	}
	c.intRange(p+"consume_queue_entries", int64(s.ConsumeQueueEntries), 1, 10_000_000)
	c.intRange(p+"send_queue_size", int64(s.SendQueueSize), 1, 1_000_000)
}

// Validate reports every field out of bounds, each as a *FieldError naming
// its key path, joined with errors.Join; nil when n is usable.
func (n Nameserver) Validate() error {
	var c checker
	n.validate(&c, "")
	return c.err()
}

func (n Nameserver) validate(c *checker, p string) {
	c.addr(p+"listen", n.Listen, true)
	if n.MetricsListen != "" {
		c.addr(p+"metrics_listen", n.MetricsListen, true)
	}
	n.Console.validate(c, p+"console.")
	if sameListener(n.Listen, n.MetricsListen) {
		c.fail(p+"metrics_listen", strconv.Quote(n.MetricsListen), "must not use the same port as "+p+"listen")
	}
	expiryOK := c.passes(func() { c.durRange(p+"broker_expiry", n.BrokerExpiry, minExpiry, -1) })
	c.durRange(p+"scan_interval", n.ScanInterval, 10*time.Millisecond, -1)
	if expiryOK && n.ScanInterval > n.BrokerExpiry {
		c.fail(p+"scan_interval", n.ScanInterval.String(), "must be <= "+p+"broker_expiry ("+n.BrokerExpiry.String()+")")
	}
	c.remoting(p+"remoting.", n.Remoting)
	n.Controller.validate(c, p+"controller.", n.Controller.Enable)
	n.TLS.validate(c, p+"tls.")
}

// humanBytes prints n in the largest binary unit that divides it.
func humanBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}
