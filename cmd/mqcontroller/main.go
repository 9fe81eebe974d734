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
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/cli"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/tlscert"
	"github.com/sluicemq/sluice/nameserver/controller"
)

const usage = `Usage: mqcontroller [-c FILE] [--listen HOST:PORT] [--controller-id ID]
                    [--controller-peers PEERS] [--controller-dir DIR]
                    [--acl FILE] [--tls-mode MODE] [--raft-tls-cert FILE ...]

Runs a Sluice controller node until SIGINT or SIGTERM. Three nodes
tolerate one failure; one node is for development.

  -c FILE                     YAML config file (keys: listen, controller.*,
                              remoting.*; see conf/namesrv.yaml's controller)
  --listen HOST:PORT          remoting address brokers (mqbroker --controller)
                              and mqadmin call (default 127.0.0.1:9878)
` + controller.FlagsUsage + `  --acl FILE                  ACL rules (RocketMQ plain_acl.yml shape); every
                              controller request then needs an admin account
                              (key acl.file; default off)
  --tls-mode MODE             disabled, permissive (TLS and plaintext on one port)
                              or enforcing (TLS only) on the remoting port
  --tls-cert FILE, --tls-key FILE
                              PEM certificate and key (none: a self-signed one is
                              made under --controller-dir)
  --tls-client-ca FILE        PEM CAs; TLS clients must present a certificate they signed
  -h, --help                  show this help

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
	aclFile := fs.String("acl", "", "")
	tlsMode, tlsCert := fs.String("tls-mode", "", ""), fs.String("tls-cert", "", "")
	tlsKey, tlsCA := fs.String("tls-key", "", ""), fs.String("tls-client-ca", "", "")
	if code, ok := cli.Parse(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	cfg, err := conf.LoadControllerServer(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %s\n", cli.OneLine(err))
		return cli.ExitError
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "acl":
			cfg.ACL.File = *aclFile
		case "tls-mode":
			cfg.TLS.Mode = *tlsMode
		case "tls-cert":
			cfg.TLS.Cert = *tlsCert
		case "tls-key":
			cfg.TLS.Key = *tlsKey
		case "tls-client-ca":
			cfg.TLS.ClientCA = *tlsCA
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
	opts := remoting.ServerOptions{
		MaxFrameSize:    int(cfg.Remoting.MaxFrameSize),
		FrameTimeout:    cfg.Remoting.FrameTimeout,
		IdleTimeout:     orDisabled(cfg.Remoting.IdleTimeout),
		MaxConnsPerAddr: cfg.Remoting.MaxConnsPerAddr,
		Logger:          logger,
	}
	// NB: the self-signed certificate, when no tls.cert is given, is kept
	// beside the Raft state, so that clients that pinned it keep trusting it.
	if opts.TLS, err = tlscert.Server(cfg.TLS, cfg.Controller.Dir, logger); err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %s\n", cli.OneLine(err))
		return cli.ExitError
	}
	var rules *acl.Watcher
	if cfg.ACL.File != "" {
		if rules, err = acl.NewWatcher(cfg.ACL.File, acl.LoadFile, logger); err != nil {
			fmt.Fprintf(stderr, "mqcontroller: %s\n", cli.OneLine(err))
			return cli.ExitError
		}
		defer rules.Close()
		opts.Authorize = rules.Guard().Authorize
	}
	s, err := controller.StartStandalone(cfg.Listen, opts, ncfg)
	if err != nil {
		fmt.Fprintf(stderr, "mqcontroller: %s\n", cli.OneLine(err))
		return cli.ExitError
	}
	logger.Info("mqcontroller: listening", "addr", s.Addr(), "id", ncfg.ID, "peers", cfg.Controller.Peers,
		"dir", cfg.Controller.Dir, "acl", cfg.ACL.File != "", "tls", cfg.TLS.Mode, "raft_tls", cfg.Controller.RaftTLS.Enabled())

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
