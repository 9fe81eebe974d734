// Command mqbroker runs a Sluice broker. With no nameserver configured it
// embeds one, so `go run ./cmd/mqbroker` alone is a working single-node
// Sluice with its store under ./data.
//
//	mqbroker [-c FILE] [-n "ip:port;ip:port"] [--listen HOST:PORT] [--store-dir DIR]
//	         [--flush async|sync] [--broker-name NAME] [--cluster NAME] [--metrics-listen HOST:PORT]
//
// Settings come from, strongest first: flags, the YAML config file (-c, see
// conf/broker.yaml), environment (SLUICE_* keys, and NAMESRV_ADDR for the
// nameserver list), defaults. It runs until SIGINT or SIGTERM and then shuts
// down cleanly.
//
// Exit status: 0 after a clean shutdown, 1 for an invalid config file or
// environment or a failure, 2 for a bad command line.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/cmd/internal/console"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/cli"
	"github.com/sluicemq/sluice/internal/fsync"
	"github.com/sluicemq/sluice/nameserver"
)

const (
	exitOK    = cli.ExitOK
	exitError = cli.ExitError
	exitUsage = cli.ExitUsage
)

const usage = `Usage: mqbroker [flags]

Runs a Sluice broker until SIGINT or SIGTERM. Without a nameserver (-n,
NAMESRV_ADDR or namesrv_addr) it embeds one, listening on
embedded_namesrv.listen (default 127.0.0.1:9876).

Flags override the config file, which overrides the environment
(SLUICE_STORE_FLUSH=sync, ..., and NAMESRV_ADDR), which overrides defaults.

  -c FILE                     YAML config file (see conf/broker.yaml)
  -n "IP:PORT;IP:PORT"        nameservers to register with
  --listen HOST:PORT          broker address (default 127.0.0.1:10911; port 0 picks one)
  --store-dir DIR             store directory (default ./data)
  --flush async|sync          durability: async (fsync every 500ms) or sync (fsync before ack)
  --broker-name NAME          broker name (default broker-a)
  --cluster NAME              cluster name (default DefaultCluster)
  --metrics-listen HOST:PORT  serve Prometheus metrics at http://HOST:PORT/metrics (off by default)
  --advertise IP:PORT         address clients are told (default: listen, or the first
                              non-loopback address when listening on 0.0.0.0)
  --role ROLE                 ASYNC_MASTER (default), SYNC_MASTER or SLAVE
  --broker-id N               0 for a master, > 0 for a slave
  --ha-listen HOST:PORT       where a master accepts slaves (default: listen port + 1)
  --ha-advertise IP:PORT      HA address slaves are told (default: from --ha-listen)
  --controller "IP:PORT;..."  controller mode: the role is elected by these controllers
                              (their remoting addresses); --role is then ignored
  --namesrv-tls               dial the nameservers with TLS (key namesrv_tls.enabled)
  --namesrv-tls-ca FILE       PEM CAs to verify the nameservers with (implies --namesrv-tls;
                              default the system pool)
  --namesrv-tls-insecure      TLS to the nameservers without verifying them (self-signed
                              setups; implies --namesrv-tls)
  --access-key KEY, --secret-key SECRET
                              the broker's own ACL account, an admin account of the
                              nameservers' (and controllers') ACL (keys acl.access_key,
                              acl.secret_key)
  --controller-tls            dial the controllers with TLS (key controller_tls.enabled)
  --controller-tls-ca FILE    PEM CAs to verify the controllers with (implies --controller-tls;
                              default the system pool)
  --controller-tls-insecure   TLS to the controllers without verifying them (self-signed
                              test setups; implies --controller-tls)
  --console-listen HOST:PORT  serve the web console there, or "off" (default 127.0.0.1:8080
                              with the embedded nameserver, off otherwise)
  --console-read-only         the console hides every write
  --console-allowed-hosts "HOST;HOST:PORT"
                              Host headers the console answers besides its own address
                              and localhost (names a proxy or DNS gives it)
  --grpc-listen HOST:PORT     serve RocketMQ 5 clients (gRPC) there, or "off" (default: the
                              listen host, port 8081; TLS follows --tls-mode)
` + cli.ServerSecurityUsage + `  -h, --help                  show this help

The broker signs its registrations with acl.access_key and acl.secret_key
(SLUICE_ACL_ACCESS_KEY, SLUICE_ACL_SECRET_KEY), an admin account of the
nameservers' ACL; in controller mode it signs its controller requests with
the same account, which must be an admin account of the controllers' ACL
too. An embedded nameserver gets the broker's --acl and
--tls-* unless configured apart.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run is main with its inputs passed in; ready, if not nil, receives the
// broker and nameserver addresses once serving (tests).
func run(args []string, stdout, stderr io.Writer, ready chan<- [2]string) int {
	fs := flag.NewFlagSet("mqbroker", flag.ContinueOnError)
	configPath := fs.String("c", "", "")
	namesrv := fs.String("n", "", "")
	listen := fs.String("listen", "", "")
	storeDir := fs.String("store-dir", "", "")
	flush := fs.String("flush", "", "")
	brokerName := fs.String("broker-name", "", "")
	cluster := fs.String("cluster", "", "")
	metrics := fs.String("metrics-listen", "", "")
	advertise := fs.String("advertise", "", "")
	role := fs.String("role", "", "")
	brokerID := fs.Int64("broker-id", 0, "")
	haListen := fs.String("ha-listen", "", "")
	haAdvertise := fs.String("ha-advertise", "", "")
	ctl := fs.String("controller", "", "")
	ctlTLS := addDialTLS(fs, "controller-tls")
	nsTLS := addDialTLS(fs, "namesrv-tls")
	accessKey := fs.String("access-key", "", "")
	secretKey := fs.String("secret-key", "", "")
	consoleListen := fs.String("console-listen", "", "")
	consoleRO := fs.Bool("console-read-only", false, "")
	consoleHosts := fs.String("console-allowed-hosts", "", "")
	grpcListen := fs.String("grpc-listen", "", "")
	sec := cli.AddServerSecurity(fs)
	if code, ok := cli.Parse(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	cfg, err := conf.LoadBroker(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "mqbroker: %s\n", cli.OneLine(err))
		return exitError
	}
	// NB: NAMESRV_ADDR is RocketMQ's variable; like the SLUICE_ ones it
	// ranks below the config file.
	if v := os.Getenv("NAMESRV_ADDR"); v != "" && cfg.NamesrvAddr == "" {
		cfg.NamesrvAddr = v
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "n":
			cfg.NamesrvAddr = *namesrv
		case "listen":
			cfg.Listen = *listen
		case "store-dir":
			cfg.Store.Dir = *storeDir
		case "flush":
			cfg.Store.Flush = *flush
		case "broker-name":
			cfg.BrokerName = *brokerName
		case "cluster":
			cfg.ClusterName = *cluster
		case "metrics-listen":
			cfg.MetricsListen = *metrics
		case "advertise":
			cfg.Advertise = *advertise
		case "role":
			cfg.Role = strings.ToUpper(*role)
		case "broker-id":
			cfg.BrokerID = *brokerID
		case "ha-listen":
			cfg.HA.Listen = *haListen
		case "ha-advertise":
			cfg.HA.Advertise = *haAdvertise
		case "controller":
			cfg.Controller = *ctl
		case "access-key":
			cfg.ACL.AccessKey = *accessKey
		case "secret-key":
			cfg.ACL.SecretKey = *secretKey
		case "console-listen":
			cfg.Console.Listen = *consoleListen
		case "console-read-only":
			cfg.Console.ReadOnly = *consoleRO
		case "console-allowed-hosts":
			cfg.Console.AllowedHosts = *consoleHosts
		case "grpc-listen":
			cfg.GRPC.Listen = *grpcListen
		default:
			_ = nsTLS.apply(f.Name, &cfg.NamesrvTLS) || ctlTLS.apply(f.Name, &cfg.ControllerTLS)
		}
	})
	sec.Apply(&cfg.ACL.File, &cfg.TLS, &cfg.Pprof)
	if en := &cfg.EmbeddedNamesrv; cfg.EmbedNamesrv() {
		if en.ACL.File == "" {
			en.ACL.File = cfg.ACL.File
		}
		if en.TLS.Mode == conf.TLSDisabled {
			en.TLS = cfg.TLS
		}
		if en.TLSDir == "" {
			en.TLSDir = cfg.Store.Dir // NB: the broker's self-signed certificate: one trust anchor for both
		}
		if en.TLS.Mode == conf.TLSEnforcing && !cfg.NamesrvTLS.Enabled {
			// NB: the broker's own nameserver, in this process, with the
			// broker's certificate (or a self-signed one made for it).
			cfg.NamesrvTLS = conf.ClientTLS{Enabled: true, Insecure: true}
		}
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "mqbroker: bad setting: %s (see mqbroker -h)\n", cli.OneLine(err))
		return exitUsage
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.GCPercent)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	consoleAddr := cfg.ConsoleAddr() // NB: before the embedded nameserver's address fills NamesrvAddr
	var ns *nameserver.Server
	if cfg.EmbedNamesrv() {
		if ns, err = nameserver.New(cfg.EmbeddedNamesrv, logger); err == nil {
			err = ns.Start()
		}
		if err != nil {
			if ns != nil {
				ns.Close()
			}
			fmt.Fprintf(stderr, "mqbroker: embedded nameserver: %s\n", cli.OneLine(err))
			return exitError
		}
		cfg.NamesrvAddr = ns.Addr()
		logger.Info("mqbroker: embedded nameserver listening", "addr", ns.Addr())
	}
	closeNS := func() {
		if ns != nil {
			ns.Close()
		}
	}
	b, err := broker.New(cfg, broker.Options{Logger: logger})
	if err != nil {
		closeNS()
		fmt.Fprintf(stderr, "mqbroker: %s\n", cli.OneLine(err))
		return exitError
	}
	if err := b.Start(); err != nil {
		b.Close()
		closeNS()
		fmt.Fprintf(stderr, "mqbroker: %s\n", cli.OneLine(err))
		return exitError
	}
	// NB: signals are caught from here, before the first line a caller
	// waits for, and through the console's start.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintln(stdout, servingLine(cfg, b.Addr()))
	logger.Info("mqbroker: fsyncs", "via", fsync.Mode())
	if a := b.MetricsAddr(); a != "" {
		logger.Info("mqbroker: metrics", "url", "http://"+a+"/metrics")
	}
	con, err := console.Launch(consoleAddr, cfg.Console.Listen == "", cfg.NamesrvAddr, cfg.Console.ReadOnly,
		console.Security{ACLFile: cfg.ACL.File, AccessKey: cfg.ACL.AccessKey, SecretKey: cfg.ACL.SecretKey,
			AllowedHosts: cfg.Console.AllowedHostList()}, logger, stdout)
	if err != nil {
		b.Close()
		closeNS()
		fmt.Fprintf(stderr, "mqbroker: %s\n", cli.OneLine(err)) // NB: the error says "console: ..."
		return exitError
	}
	if ready != nil {
		ready <- [2]string{b.Addr(), cfg.NamesrvAddr}
	}
	// NB: in controller mode the broker may ask to be opened again on its
	// store (a log cut to follow a new master).
	for serving := true; serving; {
		select {
		case <-ctx.Done():
			serving = false
		case why := <-b.Restart():
			logger.Warn("mqbroker: restarting the broker", "why", why)
			if err := b.Close(); err != nil {
				logger.Warn("mqbroker: close before restart", "err", err)
			}
			if b, err = broker.New(cfg, broker.Options{Logger: logger}); err == nil {
				if err = b.Start(); err != nil {
					b.Close()
				}
			}
			if err != nil {
				stop()
				_ = con.Close()
				closeNS()
				fmt.Fprintf(stderr, "mqbroker: restart: %s\n", cli.OneLine(err))
				return exitError
			}
		}
	}
	stop()
	logger.Info("mqbroker: shutting down")
	_ = con.Close()
	err = b.Close()
	closeNS()
	if err != nil {
		fmt.Fprintf(stderr, "mqbroker: %s\n", cli.OneLine(err))
		return exitError
	}
	logger.Info("mqbroker: stopped")
	return exitOK
}

// servingLine is the line mqbroker prints once it serves. In controller
// mode the role and id are the controllers' to give, not the config's.
func servingLine(cfg conf.Broker, addr string) string {
	role := fmt.Sprintf("role %s, id %d", cfg.Role, cfg.BrokerID)
	if cfg.ControllerMode() {
		role = "role and id from the controllers at " + cfg.Controller
	}
	return fmt.Sprintf("Sluice broker %s serving on %s (nameserver %s, store %s, flush %s, %s)",
		cfg.BrokerName, addr, cfg.NamesrvAddr, cfg.Store.Dir, cfg.Store.Flush, role)
}

// dialTLS is the flags of a TLS connection the broker dials (towards its
// nameservers, its controllers): --NAME, --NAME-ca FILE (implies --NAME)
// and --NAME-insecure (implies --NAME).
type dialTLS struct {
	name       string
	on, unsafe *bool
	ca         *string
}

func addDialTLS(fs *flag.FlagSet, name string) *dialTLS {
	return &dialTLS{name: name, on: fs.Bool(name, false, ""), ca: fs.String(name+"-ca", "", ""),
		unsafe: fs.Bool(name+"-insecure", false, "")}
}

// apply sets t from the flag named flagName if it is one of d's.
func (d *dialTLS) apply(flagName string, t *conf.ClientTLS) bool {
	switch flagName {
	case d.name:
		t.Enabled = *d.on
	case d.name + "-ca":
		t.CAFile, t.Enabled = *d.ca, true
	case d.name + "-insecure":
		t.Insecure = *d.unsafe
		t.Enabled = t.Enabled || *d.unsafe
	default:
		return false
	}
	return true
}
