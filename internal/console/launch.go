package console

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Launch starts the console of mqbroker or mqnamesrv on listen, asking
// the nameservers in nameServers ("ip:port;ip:port"), and prints its
// address on stdout. When listen is only the default (byDefault), failing
// to bind is a warning and Launch returns nil, nil: the quickstart keeps
// running when port 8080 is taken. An empty listen starts nothing. Close
// the result (nil is fine).
func Launch(listen string, byDefault bool, nameServers string, readOnly bool, logger *slog.Logger, stdout io.Writer) (*Server, error) {
	if listen == "" {
		return nil, nil
	}
	var ns []string
	for _, a := range strings.Split(nameServers, ";") {
		if a = strings.TrimSpace(a); a != "" {
			ns = append(ns, a)
		}
	}
	s, err := New(Options{Listen: listen, NameServers: ns, ReadOnly: readOnly, Logger: logger})
	if err == nil {
		if err = s.Start(); err != nil {
			_ = s.Close()
		}
	}
	if err != nil {
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
