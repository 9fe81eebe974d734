// Command mqnamesrv runs a Sluice nameserver: brokers register their
// topics with it; producers, consumers and mqadmin ask it for routes.
//
//	mqnamesrv [-c FILE] [--listen HOST:PORT] [--metrics-listen HOST:PORT]
//
// Settings come from, strongest first: flags, the YAML config file (-c,
// see conf/namesrv.yaml), SLUICE_ environment variables, defaults. It runs
// until SIGINT or SIGTERM and then shuts down cleanly.
//
// Exit status: 0 after a clean shutdown, 1 when the config file or
// environment is invalid or the server fails, 2 for a bad command line
// (unknown flag, stray argument, invalid flag value).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicemq/sluice/cmd/internal/console"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/cli"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// Exit statuses.
const (
	exitOK    = cli.ExitOK
	exitError = cli.ExitError
	exitUsage = cli.ExitUsage
)

const usage = `Usage: mqnamesrv [-c FILE] [--listen HOST:PORT] [--metrics-listen HOST:PORT] [--acl FILE] [--tls-mode MODE]
                 [--controller [--controller-id ID] [--controller-peers PEERS]
                 [--controller-dir DIR]]

Runs a Sluice nameserver until SIGINT or SIGTERM.

Flags override the config file, which overrides SLUICE_* environment
variables (SLUICE_LISTEN, SLUICE_BROKER_EXPIRY, ...), which override the
defaults.

  -c FILE                     YAML config file (see conf/namesrv.yaml)
  --listen HOST:PORT          address to serve on (default 127.0.0.1:9876;
                              port 0 picks a free port)
  --metrics-listen HOST:PORT  serve Prometheus metrics at
                              http://HOST:PORT/metrics (off by default)
  --controller                also run a controller node (controller mode:
                              brokers name this --listen address in
                              mqbroker --controller)
` + controller.FlagsUsage + `  --console-listen HOST:PORT  serve the web console there (off by default)
  --console-read-only         the console hides every write
  --console-allowed-hosts "HOST;HOST:PORT"
                              Host headers the console answers besides its own address
                              and localhost (names a proxy or DNS gives it)
` + cli.ServerSecurityUsage + `  -h, --help                  show this help

Exit status: 0 after a clean shutdown, 1 for an invalid config file or
environment or a server failure, 2 for a bad command line.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its inputs and outputs passed in; it returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqnamesrv", flag.ContinueOnError)
	configPath := fs.String("c", "", "")
	listen := fs.String("listen", "", "")
	metricsListen := fs.String("metrics-listen", "", "")
	withController := fs.Bool("controller", false, "")
	cf := controller.AddFlags(fs)
	consoleListen := fs.String("console-listen", "", "")
	consoleRO := fs.Bool("console-read-only", false, "")
	consoleHosts := fs.String("console-allowed-hosts", "", "")
	sec := cli.AddServerSecurity(fs)
	if code, ok := cli.Parse(fs, args, usage, stdout, stderr); !ok {
		return code
	}

	cfg, err := conf.LoadNameserver(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: %s\n", cli.OneLine(err))
		return exitError
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "metrics-listen":
			cfg.MetricsListen = *metricsListen
		case "controller":
			cfg.Controller.Enable = *withController
		case "console-listen":
			cfg.Console.Listen = *consoleListen
		case "console-read-only":
			cfg.Console.ReadOnly = *consoleRO
		case "console-allowed-hosts":
			cfg.Console.AllowedHosts = *consoleHosts
		}
	})
	cf.Apply(fs, &cfg.Controller)
	sec.Apply(&cfg.ACL.File, &cfg.TLS, &cfg.Pprof)
	// NB: LoadNameserver validated file and environment, so a failure now
	// comes from a flag.
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: bad flag value: %s (see mqnamesrv -h)\n", cli.OneLine(err))
		return exitUsage
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ns, err := nameserver.New(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: %s\n", cli.OneLine(err))
		return exitError
	}
	var front *controller.Front
	if cfg.Controller.Enable {
		front = controller.NewFront(logger)
		front.Install(ns.Handle)
		ns.OnDisconnect(front.ConnClosed)
	}
	if err := ns.Start(); err != nil {
		_ = ns.Close()
		fmt.Fprintf(stderr, "mqnamesrv: %s\n", cli.OneLine(err))
		return exitError
	}
	node, err := startController(cfg.Controller, front, ns.Addr(), logger)
	if err != nil {
		_ = ns.Close()
		fmt.Fprintf(stderr, "mqnamesrv: %s\n", cli.OneLine(err))
		return exitError
	}
	// NB: signals are caught from here, before the line callers wait for.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	con, err := console.Launch(cfg.ConsoleAddr(), false, ns.Addr(), cfg.Console.ReadOnly,
		console.Security{ACLFile: cfg.ACL.File, AllowedHosts: cfg.Console.AllowedHostList()}, logger, stdout)
	if err != nil {
		if node != nil {
			_ = node.Close()
		}
		_ = ns.Close()
		fmt.Fprintf(stderr, "mqnamesrv: %s\n", cli.OneLine(err)) // NB: the error says "console: ..."
		return exitError
	}
	logger.Info("mqnamesrv: listening", "addr", ns.Addr())
	if a := ns.MetricsAddr(); a != "" {
		logger.Info("mqnamesrv: metrics", "url", "http://"+a+"/metrics")
	}

	<-ctx.Done()
	stop()
	logger.Info("mqnamesrv: shutting down")
	if node != nil {
		if err := node.Close(); err != nil {
			logger.Warn("mqnamesrv: controller close", "err", err)
		}
	}
	_ = con.Close()
	if err := ns.Close(); err != nil {
		fmt.Fprintf(stderr, "mqnamesrv: %s\n", cli.OneLine(err))
		return exitError
	}
	logger.Info("mqnamesrv: stopped")
	return exitOK
}

// startController opens the controller node when front is set (controller
// mode), serving at the nameserver's address; nil otherwise.
func startController(k conf.Controller, front *controller.Front, addr string, logger *slog.Logger) (*controller.Node, error) {
	if front == nil {
		return nil, nil
	}
	ncfg, err := controller.ConfigFrom(k, addr, logger)
	if err != nil {
		return nil, err
	}
	node, err := controller.Open(ncfg)
	if err != nil {
		return nil, err
	}
	front.Attach(node)
	logger.Info("mqnamesrv: controller node running", "id", k.ID, "peers", k.Peers, "dir", k.Dir)
	return node, nil
}
