package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/cli"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// app is one mqadmin invocation: global flags and the connections opened
// for it, closed when run returns.
type app struct {
	stdout, stderr io.Writer
	args           []string // the command line, for firstPositional
	noticeMu       sync.Mutex
	noticed        map[string]bool // brokers slaveNotice told of

	// global flags
	namesrvFlag string
	json        bool
	timeout     time.Duration
	creds       cli.Credentials
	tls         cli.ClientTLS
	tlsConfig   *tls.Config // from tls, before any command runs

	rc      *remoting.Client // direct requests, JSON headers
	admin   *client.Admin
	closers []func()
}

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// logger is what the client package logs to: errors only, on stderr, so
// that stdout stays tables or JSON.
func (a *app) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// nameServers returns the -n (or NAMESRV_ADDR) addresses, checked.
func (a *app) nameServers() ([]string, error) {
	v := a.namesrvFlag
	if v == "" {
		v = os.Getenv("NAMESRV_ADDR")
	}
	if strings.TrimSpace(v) == "" {
		return nil, usagef("no nameserver: give -n ip:port or set NAMESRV_ADDR")
	}
	var out []string
	for _, s := range strings.Split(v, ";") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, err := netip.ParseAddrPort(s); err != nil {
			return nil, usagef("nameserver %q is not ip:port (e.g. 127.0.0.1:9876)", s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, usagef("no nameserver in %q: give -n ip:port or set NAMESRV_ADDR", v)
	}
	return out, nil
}

// clientOptions are the options every client-package client gets.
func (a *app) clientOptions() ([]client.Option, error) {
	ns, err := a.nameServers()
	if err != nil {
		return nil, err
	}
	return []client.Option{client.WithNameServers(ns...), client.WithCallTimeout(a.timeout),
		client.WithLogger(a.logger()), client.WithCredentials(a.creds.AccessKey, a.creds.SecretKey), a.withTLS(),
		client.WithSlaveReadNotice(a.slaveNotice)}, nil
}

// slaveNotice says on stderr that a broker's reads go to a slave: its
// master is down (the routes list none).
func (a *app) slaveNotice(broker, addr string) {
	a.noticeMu.Lock()
	defer a.noticeMu.Unlock()
	if a.noticed[broker] {
		return
	}
	if a.noticed == nil {
		a.noticed = map[string]bool{}
	}
	a.noticed[broker] = true
	fmt.Fprintf(a.stderr, "mqadmin: broker %s has no master in the routes (it is down): reading from its slave at %s\n", broker, addr)
}

// withTLS is the client option of --tls (none without it).
func (a *app) withTLS() client.Option {
	if a.tlsConfig == nil {
		return client.Combine()
	}
	return client.WithTLS(a.tlsConfig)
}

// adminClient returns the invocation's client.Admin, created on first use.
func (a *app) adminClient() (*client.Admin, error) {
	if a.admin != nil {
		return a.admin, nil
	}
	opts, err := a.clientOptions()
	if err != nil {
		return nil, err
	}
	ad, err := client.NewAdmin(opts...)
	if err != nil {
		return nil, usageError{msg: err.Error()}
	}
	a.admin = ad
	a.closers = append(a.closers, func() { _ = ad.Close() })
	return ad, nil
}

// remote returns the remoting client for direct requests. It speaks JSON
// headers, which both Sluice and Apache RocketMQ servers accept; bodies
// then travel as JSON too.
func (a *app) remote() *remoting.Client {
	if a.rc == nil {
		opts := remoting.DefaultClientOptions()
		opts.SerializeType = remoting.SerializeJSON
		opts.Logger = a.logger()
		if a.creds.AccessKey != "" { // NB: resolved before any command runs (PersistentPreRunE)
			opts.Sign = sig.Signer(a.creds.AccessKey, a.creds.SecretKey, "")
		}
		opts.TLS = a.tlsConfig
		a.rc = remoting.NewClient(opts)
		rc := a.rc
		a.closers = append(a.closers, func() { _ = rc.Close() })
	}
	return a.rc
}

// serverError is a failed answer or a failed request to a nameserver or
// broker: who was asked what, and what it answered.
type serverError struct {
	role    string // "nameserver" or "broker"
	addr    string
	request int16
	code    int16 // response code; meaningful when err is nil
	remark  string
	err     error // transport failure
}

func (e *serverError) Error() string {
	req := protocol.CodeName(e.request)
	if e.err != nil {
		return fmt.Sprintf("%s to %s %s failed: %v", req, e.role, e.addr, e.err)
	}
	s := fmt.Sprintf("%s %s answered %s with %s (%d)", e.role, e.addr, req, protocol.ResponseCodeName(e.code), e.code)
	if e.remark != "" {
		s += ": " + e.remark
	}
	return s
}

func (e *serverError) Unwrap() error { return e.err }

// hasCode reports whether err is an answer with code.
func hasCode(err error, code int16) bool {
	var se *serverError
	if errors.As(err, &se) && se.err == nil && se.code == code {
		return true
	}
	var be *client.BrokerError
	return errors.As(err, &be) && int16(be.Code) == code
}

// call sends one request to addr and waits for the answer. Codes other
// than SUCCESS and those in ok become a *serverError.
func (a *app) call(ctx context.Context, role, addr string, code int16, h interface{ ToExt(map[string]string) },
	body any, ok ...int16) (*remoting.Command, error) {
	return a.callWithin(ctx, a.timeout, role, addr, code, h, body, ok...)
}

// relayTimeout bounds a request a broker relays to a client: the broker
// waits up to 10 s for the client's answer.
const relayTimeout = 15 * time.Second

// callRelayed is call for a request a broker relays to a client: given
// the time the broker waits for the client, or --timeout when longer.
func (a *app) callRelayed(ctx context.Context, role, addr string, code int16, h interface{ ToExt(map[string]string) },
	body any, ok ...int16) (*remoting.Command, error) {
	return a.callWithin(ctx, max(a.timeout, relayTimeout), role, addr, code, h, body, ok...)
}

// callWithin is call with its own timeout.
func (a *app) callWithin(ctx context.Context, timeout time.Duration, role, addr string, code int16,
	h interface{ ToExt(map[string]string) }, body any, ok ...int16) (*remoting.Command, error) {
	var ext map[string]string
	if h != nil {
		ext = protocol.Ext(h)
	}
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		enc, err := remoting.EncodeBody(remoting.SerializeJSON, b)
		if err != nil {
			return nil, fmt.Errorf("encode %s body: %w", protocol.CodeName(code), err)
		}
		raw = enc
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := a.remote().Invoke(cctx, addr, remoting.NewRequest(code, ext, raw))
	if err != nil {
		return nil, &serverError{role: role, addr: addr, request: code, err: err}
	}
	if resp.Code != protocol.Success && !slices.Contains(ok, resp.Code) {
		return resp, &serverError{role: role, addr: addr, request: code, code: resp.Code, remark: resp.Remark}
	}
	return resp, nil
}

// callDecode is call plus decoding the SUCCESS body into v.
func (a *app) callDecode(ctx context.Context, role, addr string, code int16, h interface{ ToExt(map[string]string) },
	body, v any) error {
	resp, err := a.call(ctx, role, addr, code, h, body)
	if err != nil {
		return err
	}
	if err := remoting.DecodeBody(resp.SerializeType, resp.Body, v); err != nil {
		return fmt.Errorf("%s %s answered %s with a body mqadmin cannot read: %w", role, addr, protocol.CodeName(code), err)
	}
	return nil
}

// broker is one broker name with its master address.
type brokerRef struct {
	Name    string `json:"brokerName,omitempty"`
	Addr    string `json:"brokerAddr"`
	Cluster string `json:"cluster,omitempty"`
}

// clusterInfo asks the nameservers for the brokers they know.
func (a *app) clusterInfo(ctx context.Context) (client.ClusterInfo, error) {
	ad, err := a.adminClient()
	if err != nil {
		return client.ClusterInfo{}, err
	}
	ci, err := ad.ClusterInfo(ctx)
	return ci, a.nsErr(err)
}

// masters returns the master of every broker of cluster (every cluster
// when empty), sorted by name.
func (a *app) masters(ctx context.Context, cluster string) ([]brokerRef, error) {
	return a.clusterBrokers(ctx, cluster, false)
}

// readBrokers is masters for commands that only read: a broker whose
// master is down answers from its slave of the lowest id (slaveNotice).
func (a *app) readBrokers(ctx context.Context, cluster string) ([]brokerRef, error) {
	return a.clusterBrokers(ctx, cluster, true)
}

func (a *app) clusterBrokers(ctx context.Context, cluster string, slaves bool) ([]brokerRef, error) {
	ci, err := a.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	if cluster != "" {
		if _, ok := ci.Clusters[cluster]; !ok {
			known := make([]string, 0, len(ci.Clusters))
			for c := range ci.Clusters {
				known = append(known, c)
			}
			slices.Sort(known)
			ns, _ := a.nameServers()
			return nil, fmt.Errorf("nameserver %s knows no cluster %q (known: %s)", strings.Join(ns, ";"), cluster,
				strings.Join(known, ", "))
		}
	}
	var out []brokerRef
	var masterless []string
	for name, b := range ci.Brokers {
		if cluster != "" && !slices.Contains(ci.Clusters[cluster], name) {
			continue
		}
		if addr, ok := b.Addrs[0]; ok {
			out = append(out, brokerRef{Name: name, Addr: addr, Cluster: b.Cluster})
			continue
		}
		ids := slices.Sorted(maps.Keys(b.Addrs))
		if len(ids) == 0 {
			continue
		}
		masterless = append(masterless, name)
		if slaves {
			a.slaveNotice(name, b.Addrs[ids[0]])
			out = append(out, brokerRef{Name: name, Addr: b.Addrs[ids[0]], Cluster: b.Cluster})
		}
	}
	slices.SortFunc(out, func(x, y brokerRef) int { return strings.Compare(x.Name, y.Name) })
	if len(out) == 0 {
		where := "any cluster"
		if cluster != "" {
			where = fmt.Sprintf("cluster %q", cluster)
		}
		if len(masterless) > 0 {
			slices.Sort(masterless)
			return nil, fmt.Errorf("no master broker registered in %s: %s %s only slaves (the master is down); "+
				"changes wait for a master (it returns, or a slave is promoted), reads (consumeMessage, topicStatus, "+
				"consumerProgress) go to the slaves", where, strings.Join(masterless, ", "),
				map[bool]string{true: "has", false: "have"}[len(masterless) == 1])
		}
		return nil, fmt.Errorf("no broker registered in %s", where)
	}
	return out, nil
}

// targets returns the broker given with -b (an address), or the masters
// of the cluster given with -c.
func (a *app) targets(ctx context.Context, brokerAddr, cluster string) ([]brokerRef, error) {
	if brokerAddr != "" {
		if _, err := netip.ParseAddrPort(brokerAddr); err != nil {
			return nil, usagef("broker address %q is not ip:port", brokerAddr)
		}
		return []brokerRef{{Addr: brokerAddr}}, nil
	}
	return a.masters(ctx, cluster)
}

// topicBrokers returns the masters of the brokers serving topic, sorted
// by name; for a broker whose master is down, its slave of the lowest id.
func (a *app) topicBrokers(ctx context.Context, topic string) ([]brokerRef, client.TopicRoute, error) {
	ad, err := a.adminClient()
	if err != nil {
		return nil, client.TopicRoute{}, err
	}
	r, err := ad.TopicRoute(ctx, topic)
	if err != nil {
		return nil, r, a.nsErr(err)
	}
	var out []brokerRef
	for _, b := range r.Brokers {
		if addr, ok := b.Addrs[0]; ok {
			out = append(out, brokerRef{Name: b.BrokerName, Addr: addr, Cluster: b.Cluster})
			continue
		}
		// NB: reads only (topicStatus, consumerProgress, consumerStatus):
		// a broker whose master is down answers from its slave.
		if ids := slices.Sorted(maps.Keys(b.Addrs)); len(ids) > 0 {
			a.slaveNotice(b.BrokerName, b.Addrs[ids[0]])
			out = append(out, brokerRef{Name: b.BrokerName, Addr: b.Addrs[ids[0]], Cluster: b.Cluster})
		}
	}
	slices.SortFunc(out, func(x, y brokerRef) int { return strings.Compare(x.Name, y.Name) })
	return out, r, nil
}

// joinLine joins errs for an error message; never nil.
func joinLine(errs []error) error {
	if len(errs) == 0 {
		return errors.New("no broker reported any")
	}
	return errors.Join(errs...)
}

// nsErr names the nameservers asked in a transport failure from the client
// package, whose text names only the request and an address. Answers
// (*client.BrokerError) already carry the nameserver's code and remark.
func (a *app) nsErr(err error) error {
	var be *client.BrokerError
	if err == nil || errors.As(err, &be) {
		return err
	}
	ns, _ := a.nameServers()
	return fmt.Errorf("asking nameserver %s: %w", strings.Join(ns, ";"), err)
}

// brokerErr is err from a client.Admin request to the broker at addr in
// mqadmin's words: who was asked what, and what it answered.
func brokerErr(addr string, code int16, err error) error {
	if err == nil {
		return nil
	}
	var be *client.BrokerError
	if errors.As(err, &be) {
		return &serverError{role: "broker", addr: addr, request: code, code: int16(be.Code), remark: be.Remark}
	}
	return &serverError{role: "broker", addr: addr, request: code, err: err}
}
