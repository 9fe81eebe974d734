package console

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/sluicemq/sluice/internal/acl"
)

// Security is the console's part of ACL: the rules file users log in
// against (empty: no login) and the account the console signs its own
// requests with; and the Host headers it answers besides its own
// (console.allowed_hosts).
type Security struct {
	ACLFile              string
	AccessKey, SecretKey string
	AllowedHosts         []string
}

// Launch starts the console of mqbroker or mqnamesrv on listen, asking
// the nameservers in nameServers ("ip:port;ip:port"), and prints its
// address on stdout. When listen is only the default (byDefault), failing
// to bind is a warning and Launch returns nil, nil: the quickstart keeps
// running when port 8080 is taken. An empty listen starts nothing. Close
// the result (nil is fine).
func Launch(listen string, byDefault bool, nameServers string, readOnly bool, sec Security, logger *slog.Logger, stdout io.Writer) (*Server, error) {
	if listen == "" {
		return nil, nil
	}
	var ns []string
	for _, a := range strings.Split(nameServers, ";") {
		if a = strings.TrimSpace(a); a != "" {
			ns = append(ns, a)
		}
	}
	opts := Options{Listen: listen, NameServers: ns, ReadOnly: readOnly, AccessKey: sec.AccessKey, SecretKey: sec.SecretKey,
		AllowedHosts: sec.AllowedHosts, Logger: logger}
	var w *acl.Watcher
	if sec.ACLFile != "" {
		var err error
		if w, err = acl.NewWatcher(sec.ACLFile, acl.LoadFile, logger); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		opts.Auth = &Auth{Check: func(key, secret string) (bool, bool) { return w.Rules().Login(key, secret) }}
	}
	s, err := New(opts)
	if err == nil && w != nil {
		s.onClose = func() { _ = w.Close() }
	}
	if err == nil {
		if err = s.Start(); err != nil {
			_ = s.Close()
		}
	}
	if err != nil {
		if w != nil {
			_ = w.Close()
		}
		if byDefault {
			logger.Warn("console not started; give --console-listen ip:port, or off", "err", err)
			return nil, nil
		}
		return nil, err
	}
	mode := ""
	if readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(stdout, "Sluice console on http://%s/%s\n", s.Addr(), mode)
	return s, nil
}
