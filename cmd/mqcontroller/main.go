// Command mqcontroller runs a Sluice controller alone: a Raft node that
// elects each broker group's master among its in-sync replicas (RocketMQ
// 5's controller mode). mqnamesrv --controller runs the same code inside
// a nameserver.
//
//	mqcontroller [-c FILE] [--listen HOST:PORT] [--controller-id ID]
//	             [--controller-peers PEERS] [--controller-dir DIR]
//
// Settings come from, strongest first: flags, the YAML config file (-c),
// SLUICE_ environment variables (SLUICE_CONTROLLER_MASTER_TIMEOUT, ...),
// defaults. It runs until SIGINT or SIGTERM.
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
	"syscall"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/cli"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/nameserver/controller"
)

const usage = `Usage: mqcontroller [-c FILE] [--listen HOST:PORT] [--controller-id ID]
                    [--controller-peers PEERS] [--controller-dir DIR]

Runs a Sluice controller node until SIGINT or SIGTERM. Three nodes
tolerate one failure; one node is for development.

  -c FILE                     YAML config file (keys: listen, controller.*,
                              remoting.*; see conf/namesrv.yaml's controller)
  --listen HOST:PORT          remoting address brokers (mqbroker --controller)
                              and mqadmin call (default 127.0.0.1:9878)
` + controller.FlagsUsage + `  -h, --help                  show this help

Exit status: 0 after a clean shutdown, 1 for an invalid config file or
environment or a failure, 2 for a bad command line.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqcontroller", flag.ContinueOnError)
	configPath := fs.String("c", "", "")
	listen := fs.String("listen", "", "")
	cf := controller.AddFlags(fs)
	if code, ok := cli.Parse(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	cfg, err := conf.LoadControllerServer(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %s\n", cli.OneLine(err))
		return cli.ExitError
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "listen" {
			cfg.Listen = *listen
		}
	})
	cf.Apply(fs, &cfg.Controller)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "mqcontroller: bad flag value: %s (see mqcontroller -h)\n", cli.OneLine(err))
		return cli.ExitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ncfg, err := controller.ConfigFrom(cfg.Controller, "", logger)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: bad flag value: %s (see mqcontroller -h)\n", cli.OneLine(err))
		return cli.ExitUsage
	}
	s, err := controller.StartStandalone(cfg.Listen, remoting.ServerOptions{
		MaxFrameSize:    int(cfg.Remoting.MaxFrameSize),
		FrameTimeout:    cfg.Remoting.FrameTimeout,
		IdleTimeout:     orDisabled(cfg.Remoting.IdleTimeout),
		MaxConnsPerAddr: cfg.Remoting.MaxConnsPerAddr,
		Logger:          logger,
	}, ncfg)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %s\n", cli.OneLine(err))
		return cli.ExitError
	}
	logger.Info("mqcontroller: listening", "addr", s.Addr(), "id", ncfg.ID, "peers", cfg.Controller.Peers,
		"dir", cfg.Controller.Dir)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	<-ctx.Done()
	stop()
	logger.Info("mqcontroller: shutting down")
	if err := s.Close(); err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %s\n", cli.OneLine(err))
		return cli.ExitError
	}
	logger.Info("mqcontroller: stopped")
	return cli.ExitOK
}

// orDisabled maps conf's "0 = no limit" onto remoting's "negative =
// disabled".
func orDisabled(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
