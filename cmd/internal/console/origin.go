package console

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The console serves plain HTTP on an address a browser can reach, and
// with ACL off (the quickstart) nothing else stands between a web page
// and the cluster. Two attacks are closed here, before anything else
// runs, whatever the ACL:
//
//   - cross-site writes: a page elsewhere posts a form (text/plain, no
//     preflight) to 127.0.0.1:8080. Every write (any method but GET and
//     HEAD) needs Content-Type application/json, which a browser sends
//     cross-site only after a CORS preflight the console never grants,
//     and an Origin (or, without one, a Referer) naming the console's own
//     Host.
//   - DNS rebinding: a page's own name is made to resolve to the console's
//     address, so that its requests are same-origin. They carry that name
//     in Host: only the console's own names are answered (its listen
//     address or the address the connection came in on, localhost,
//     127.0.0.1 and [::1], on its port), plus Options.AllowedHosts.
//
// A refusal is 403 with {"error": ...} naming the reason and the fix.

// localHosts are the names a browser on the console's machine reaches it
// by; no page elsewhere can be served under them.
var localHosts = []string{"localhost", "127.0.0.1", "::1"}

// originGuard refuses what the comment above describes.
func (s *Server) originGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r) {
			s.refuseOrigin(w, r, "Host "+quote(r.Host)+" is not this console's address: it answers "+s.ownHosts(r)+
				" (a name given by a proxy or DNS goes in console.allowed_hosts, SLUICE_CONSOLE_ALLOWED_HOSTS or --console-allowed-hosts)")
			return
		}
		// NB: every path, not only /api/: a write elsewhere would only be
		// refused later (405), and a path that is not clean is redirected.
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			s.refuseOrigin(w, r, "a write to the console's API needs Content-Type: application/json (got "+
				quote(r.Header.Get("Content-Type"))+")")
			return
		}
		from, header := r.Header.Get("Origin"), "Origin"
		if from == "" {
			from, header = r.Header.Get("Referer"), "Referer"
		}
		if from == "" {
			s.refuseOrigin(w, r, "a write to the console's API needs an Origin header naming the console (Origin: http://"+r.Host+")")
			return
		}
		if !sameHost(from, r.Host) {
			s.refuseOrigin(w, r, "cross-site write refused: "+header+" "+quote(from)+" is not this console (http://"+r.Host+")")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) refuseOrigin(w http.ResponseWriter, r *http.Request, msg string) {
	// NB: Debug: any page a browser shows can cause these.
	s.opts.Logger.Debug("console: request refused", "method", r.Method, "path", r.URL.Path, "host", r.Host,
		"origin", r.Header.Get("Origin"), "from", r.RemoteAddr, "reason", msg)
	refuse(w, http.StatusForbidden, msg)
}

// hostAllowed reports whether r's Host names the console.
func (s *Server) hostAllowed(r *http.Request) bool {
	host, port, ok := splitHost(r.Host, "80") // NB: the console speaks plain HTTP
	if !ok {
		return false
	}
	for _, a := range s.allowed {
		if a.host == host && (a.port == "" || a.port == port) {
			return true
		}
	}
	return port == s.port && slices.Contains(s.ownNames(r), host)
}

// ownNames are the hosts the console answers on its own port: the local
// names, its listen host and the address r's connection came in on (the
// listen address in effect when it listens on every interface).
func (s *Server) ownNames(r *http.Request) []string {
	names := slices.Clone(localHosts)
	if h, _, err := net.SplitHostPort(s.opts.Listen); err == nil && h != "" {
		names = append(names, normHost(h))
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if h, _, err := net.SplitHostPort(a.String()); err == nil {
			names = append(names, normHost(h))
		}
	}
	return names
}

// ownHosts lists, for an error, the hosts the console answers.
func (s *Server) ownHosts(r *http.Request) string {
	var out []string
	for _, h := range s.ownNames(r) {
		if hp := net.JoinHostPort(h, s.port); !slices.Contains(out, hp) {
			out = append(out, hp)
		}
	}
	return strings.Join(append(out, s.opts.AllowedHosts...), ", ")
}

// hostPort is an allowed host; an empty port takes any.
type hostPort struct{ host, port string }

// parseAllowed reads Options.AllowedHosts: each a host or host:port (an
// IPv6 address in brackets).
func parseAllowed(hosts []string) ([]hostPort, error) {
	var out []hostPort
	for _, a := range hosts {
		h, p, ok := splitHost(strings.TrimSpace(a), "")
		if !ok || strings.ContainsAny(h, "/@,") || p != "" && strings.Trim(p, "0123456789") != "" {
			return nil, fmt.Errorf("console: allowed host %q is not a host or host:port", a)
		}
		out = append(out, hostPort{h, p})
	}
	return out, nil
}

// splitHost splits a Host header (or a URL's host) into a normalized host
// and its port, def when it names none; ok is false when it is neither
// host:port nor a bare host.
func splitHost(hostport, def string) (host, port string, ok bool) {
	switch h, p, err := net.SplitHostPort(hostport); {
	case err == nil:
		host, port = h, p
	case !strings.ContainsAny(hostport, ":[]"):
		host, port = hostport, def
	case strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") && net.ParseIP(hostport[1:len(hostport)-1]) != nil:
		host, port = hostport[1:len(hostport)-1], def
	default:
		return "", "", false
	}
	host = normHost(host)
	return host, port, host != ""
}

// normHost lower-cases h and drops a trailing dot; an IP address is
// written the standard way.
func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// sameHost reports whether the URL from (an Origin or a Referer) is on
// the host and port of the Host header host.
func sameHost(from, host string) bool {
	u, err := url.Parse(from)
	if err != nil || u.User != nil {
		return false
	}
	def := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	if def == "" {
		return false
	}
	fh, fp, ok := splitHost(u.Host, def)
	// NB: a browser leaves the scheme's port out of Host; behind a TLS
	// proxy that is 443.
	hh, hp, hok := splitHost(host, def)
	return ok && hok && fh == hh && fp == hp
}

// quote quotes what a peer sent, cut to a readable length.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
}
