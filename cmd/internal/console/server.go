package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/client"
)

//go:embed assets
var assets embed.FS

// Options configure a Server.
type Options struct {
	// Listen is host:port to serve on (port 0 picks a free one; an empty
	// host, every interface).
	Listen string
	// NameServers are the nameservers the console asks (ip:port).
	NameServers []string
	// ReadOnly leaves out every write: the API refuses them (403) and the
	// pages show no forms or buttons that change anything.
	ReadOnly bool
	// SampleEvery is how often the sampler takes a point of every series
	// (default 5 s); History is how long points are kept (default 1 h).
	SampleEvery time.Duration
	History     time.Duration
	// CallTimeout bounds each request to a nameserver or broker (default 3 s).
	CallTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body (default 30 s):
	// a peer that announces more than it sends gets 408.
	BodyTimeout time.Duration
	// Auth, when set (ACL on), makes users log in (see auth.go).
	Auth *Auth
	// AccessKey and SecretKey sign the console's own requests to the
	// nameservers and brokers (an admin account when ACL is on).
	AccessKey, SecretKey string
	// AllowedHosts are Host headers answered besides the console's own
	// address, localhost, 127.0.0.1 and [::1] on its port (see origin.go):
	// each a host (any port) or host:port.
	AllowedHosts []string
	// Wrap, if set, wraps the whole handler (outside Auth).
	Wrap   func(http.Handler) http.Handler
	Logger *slog.Logger
}

// Server is a running console. Create it with New, then Start; Close
// stops it.
type Server struct {
	opts    Options
	admin   *client.Admin
	pull    *client.PullConsumer // reads messages by queue offset; started lazily
	hist    *history
	now     func() time.Time
	http    *http.Server
	ln      net.Listener
	port    string     // the port ln listens on; set by Start
	allowed []hostPort // Options.AllowedHosts

	ctx    context.Context // cancelled by Close; bounds sampling
	cancel context.CancelFunc
	wg     sync.WaitGroup // sampleLoop, serve

	onClose func() // Launch's: the ACL watcher

	pullOnce sync.Once
	pullErr  error // why pull could not start; written in pullOnce

	connMu sync.Mutex
	fresh  map[net.Conn]struct{} // guarded by connMu: accepted, no request read yet

	mu        sync.Mutex
	sampleErr string    // guarded by mu: the last sample's first failure
	sampledAt time.Time // guarded by mu
}

// New checks opts and returns a Server that is not yet serving.
func New(opts Options) (*Server, error) {
	if _, port, err := net.SplitHostPort(opts.Listen); err != nil || port == "" {
		return nil, fmt.Errorf("console: listen address %q is not host:port (e.g. 127.0.0.1:8080)", opts.Listen)
	}
	if len(opts.NameServers) == 0 {
		return nil, errors.New("console: no nameserver to ask")
	}
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = 5 * time.Second
	}
	if opts.History <= 0 {
		opts.History = time.Hour
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 3 * time.Second
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	allowed, err := parseAllowed(opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	copts := []client.Option{client.WithNameServers(opts.NameServers...), client.WithCallTimeout(opts.CallTimeout),
		client.WithLogger(opts.Logger)}
	if opts.AccessKey != "" {
		copts = append(copts, client.WithCredentials(opts.AccessKey, opts.SecretKey))
	}
	ad, err := client.NewAdmin(copts...)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	pc, err := client.NewPullConsumer(toolsGroup, copts...)
	if err != nil {
		_ = ad.Close()
		return nil, fmt.Errorf("console: %w", err)
	}
	s := &Server{opts: opts, admin: ad, pull: pc, hist: newHistory(opts.History), now: time.Now, fresh: map[net.Conn]struct{}{},
		allowed: allowed}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var h http.Handler = s.routes()
	if opts.Auth != nil {
		h = s.guard(h)
	}
	h = s.bodyFirst(h)   // NB: outside guard: a login's body too
	h = s.originGuard(h) // NB: first: a refused request's body is not waited for
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	// NB: net/http's own lines (bad requests, semicolons in queries) are
	// a peer's doing: Debug, like the failed requests.
	s.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug), ConnState: s.trackConn}
	// NB: a browser opens connections ahead of its requests. Shutdown
	// counts one idle only once it has sent nothing for 5 s, as long as
	// Close's grace: it closes them as soon as the listener is closed.
	s.http.RegisterOnShutdown(s.closeFresh)
	return s, nil
}

// toolsGroup is the consumer group the console reads messages as, the one
// mqadmin uses.
const toolsGroup = "TOOLS_CONSUMER"

// Start listens and serves, and starts the sampler.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	s.ln = ln
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("console: serve", "err", err)
		}
	}()
	go s.sampleLoop()
	return nil
}

// Addr is the address the console listens on, once started.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops serving and sampling and waits for both. Idempotent; a nil
// Server is closed.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("console: connections still busy after 5 s: %w", err), s.http.Close())
	}
	s.wg.Wait()
	_ = s.pull.Close()
	_ = s.admin.Close()
	if s.onClose != nil {
		s.onClose()
	}
	return err
}

// trackConn is the server's ConnState hook: it keeps the connections
// that have not sent a request yet.
func (s *Server) trackConn(c net.Conn, st http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if st == http.StateNew {
		s.fresh[c] = struct{}{}
	} else {
		delete(s.fresh, c)
	}
}

// closeFresh closes the connections that have not sent a request yet.
func (s *Server) closeFresh() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for c := range s.fresh {
		_ = c.Close()
		delete(s.fresh, c)
	}
}

// puller returns the pull consumer, started on first use.
func (s *Server) puller() (*client.PullConsumer, error) {
	s.pullOnce.Do(func() { s.pullErr = s.pull.Start() })
	return s.pull, s.pullErr
}

// routes is the console's handler: the API, and the embedded pages.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	read := func(pattern string, h func(*http.Request) (any, error)) { mux.Handle("GET "+pattern, s.api(h)) }
	write := func(pattern string, h func(*http.Request) (any, error)) {
		if s.opts.ReadOnly {
			mux.Handle(pattern, s.api(func(*http.Request) (any, error) {
				return nil, &httpError{status: http.StatusForbidden, msg: "the console is read-only (--console-read-only)"}
			}))
			return
		}
		mux.Handle(pattern, s.api(h))
	}
	read("/api/config", s.getConfig)
	// NB: with ACL on, guard answers it first (auth.go).
	read("/api/session", func(*http.Request) (any, error) { return map[string]any{"auth": false, "admin": true}, nil })
	read("/api/cluster", s.getCluster)
	read("/api/topics", s.getTopics)
	read("/api/topics/{topic}", s.getTopic)
	write("POST /api/topics", s.postTopic)
	write("DELETE /api/topics/{topic}", s.deleteTopic)
	read("/api/groups", s.getGroups)
	read("/api/groups/{group}", s.getGroup)
	read("/api/groups/{group}/status", s.getGroupStatus)
	write("POST /api/groups/{group}/reset", s.postReset)
	read("/api/messages", s.getMessages)
	read("/api/dlq/{group}", s.getDLQ)
	write("POST /api/dlq/{group}/resend", s.postResend)
	write("POST /api/messages/consume", s.postConsume)
	read("/api/live", s.getLive)
	mux.Handle("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// NB: a path the API serves under other methods is 405 with Allow,
		// not 404: net/http answers 405 itself only when no pattern takes
		// the request, and this catch-all takes every one under /api/.
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := mux.Handler(probe); p != "/api/" {
				allowed = append(allowed, m)
			}
		}
		err := &httpError{status: http.StatusNotFound, msg: "no API " + r.Method + " " + r.URL.Path + " (see the README's console section)"}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			err = &httpError{status: http.StatusMethodNotAllowed, msg: r.Method + " " + r.URL.Path + " is not allowed: " + strings.Join(allowed, ", ")}
		}
		s.api(func(*http.Request) (any, error) { return nil, err }).ServeHTTP(w, r)
	}))
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case "/favicon.ico":
			r.URL.Path = "/favicon.svg"
		case "/", "/index.html", "/app.js", "/chart.js", "/style.css", "/favicon.svg":
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	return mux
}

// masters returns the master addresses of every broker, sorted by broker
// name.
func masters(ci client.ClusterInfo) []brokerRef {
	var out []brokerRef
	for name, b := range ci.Brokers {
		if addr, ok := b.Addrs[0]; ok {
			out = append(out, brokerRef{name: name, addr: addr})
		}
	}
	slices.SortFunc(out, func(x, y brokerRef) int { return strings.Compare(x.name, y.name) })
	return out
}

type brokerRef struct{ name, addr string }
