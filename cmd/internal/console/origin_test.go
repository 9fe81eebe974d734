package console

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// raw sends method path to the console with the given headers ("Host"
// sets the Host header) and body, and returns the status and the error
// of a JSON refusal.
func raw(t *testing.T, base, method, path, body string, headers map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var ae apiError
	if resp.StatusCode == http.StatusForbidden {
		require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), string(data))
		require.NoError(t, json.Unmarshal(data, &ae), string(data))
		require.NotEmpty(t, ae.Error)
	}
	return resp.StatusCode, ae.Error
}

// TestOrigin_CrossSiteWrite: with ACL off, a page elsewhere cannot change
// the cluster through the browser: a form's text/plain POST from a
// foreign Origin (no preflight needed) is refused with 403 and creates
// nothing; so is a JSON write naming another origin, or none, and a
// bodiless DELETE without the JSON type. The console's own page's
// requests (JSON, its origin, or its Referer when no Origin) are served;
// reads from anywhere too.
func TestOrigin_CrossSiteWrite(t *testing.T) {
	e := startEnv(t, Options{})
	ctx := context.Background()
	const form = `{"topic":"stolen","readQueues":1,"writeQueues":1}`
	st, msg := raw(t, e.url, "POST", "/api/topics", form,
		map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"})
	require.Equal(t, http.StatusForbidden, st, "a cross-site form's POST")
	require.Contains(t, msg, "needs Content-Type: application/json")
	require.Contains(t, msg, `"text/plain"`)

	own := e.url
	for _, tc := range []struct {
		name, method, path, body string
		headers                  map[string]string
		want                     string
	}{
		{"text/plain from the page", "POST", "/api/topics", form, map[string]string{"Content-Type": "text/plain", "Origin": own},
			"needs Content-Type: application/json"},
		{"no content type", "POST", "/api/topics", form, map[string]string{"Origin": own}, `Content-Type: application/json (got "")`},
		{"form encoded", "POST", "/api/topics", "topic=stolen", map[string]string{"Content-Type": "application/x-www-form-urlencoded",
			"Origin": own}, "needs Content-Type"},
		{"JSON from another site", "POST", "/api/topics", form, map[string]string{"Content-Type": "application/json",
			"Origin": "http://evil.example"}, `cross-site write refused: Origin "http://evil.example" is not this console`},
		{"JSON from another port", "POST", "/api/topics", form, map[string]string{"Content-Type": "application/json",
			"Origin": "http://127.0.0.1:1"}, "cross-site write refused"},
		{"JSON from an https page elsewhere", "POST", "/api/topics", form, map[string]string{"Content-Type": "application/json",
			"Origin": "https://" + strings.TrimPrefix(own, "http://") + ".evil.example"}, "cross-site write refused"},
		{"opaque origin", "POST", "/api/topics", form, map[string]string{"Content-Type": "application/json", "Origin": "null"},
			`Origin "null"`},
		{"no origin nor referer", "POST", "/api/topics", form, map[string]string{"Content-Type": "application/json"},
			"needs an Origin header naming the console (Origin: " + own + ")"},
		{"foreign referer", "POST", "/api/topics", form, map[string]string{"Content-Type": "application/json",
			"Referer": "http://evil.example/page"}, `Referer "http://evil.example/page"`},
		{"DELETE without JSON type", "DELETE", "/api/topics/TBW102", "", map[string]string{"Origin": own}, "needs Content-Type"},
		{"DELETE from another site", "DELETE", "/api/topics/TBW102", "", map[string]string{"Content-Type": "application/json",
			"Origin": "http://evil.example"}, "cross-site write refused"},
		{"reset from another site", "POST", "/api/groups/g/reset", `{"topic":"t","time":"0"}`,
			map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, "needs Content-Type"},
		{"PUT", "PUT", "/api/topics", form, map[string]string{"Content-Type": "text/plain", "Origin": own}, "needs Content-Type"},
		{"PATCH", "PATCH", "/api/topics/x", form, map[string]string{"Content-Type": "application/json",
			"Origin": "http://evil.example"}, "cross-site"},
	} {
		st, msg := raw(t, e.url, tc.method, tc.path, tc.body, tc.headers)
		require.Equal(t, http.StatusForbidden, st, tc.name)
		require.Contains(t, msg, tc.want, tc.name)
	}
	l, err := e.admin.TopicList(ctx)
	require.NoError(t, err)
	require.NotContains(t, l, "stolen")
	require.Contains(t, l, "TBW102")

	// The page's own requests: JSON (with a charset too), its Origin, or
	// its Referer when a client sends no Origin.
	st, msg = raw(t, e.url, "POST", "/api/topics", `{"topic":"mine","readQueues":1,"writeQueues":1}`,
		map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": own})
	require.Equal(t, http.StatusOK, st, msg)
	st, msg = raw(t, e.url, "POST", "/api/topics", `{"topic":"viaReferer","readQueues":1,"writeQueues":1}`,
		map[string]string{"Content-Type": "application/json", "Referer": own + "/#topics"})
	require.Equal(t, http.StatusOK, st, msg)
	st, msg = raw(t, e.url, "POST", "/api/topics", `{"topic":"viaLocalhost","readQueues":1,"writeQueues":1}`,
		map[string]string{"Content-Type": "application/json", "Host": "localhost:" + e.con.port,
			"Origin": "http://LOCALHOST:" + e.con.port})
	require.Equal(t, http.StatusOK, st, msg)
	require.Eventually(t, func() bool {
		l, err := e.admin.TopicList(ctx)
		return err == nil && slices.Contains(l, "mine") && slices.Contains(l, "viaReferer") && slices.Contains(l, "viaLocalhost")
	}, 10*time.Second, 10*time.Millisecond)
	st, _ = raw(t, e.url, "GET", "/api/topics", "", map[string]string{"Origin": "http://evil.example"})
	require.Equal(t, http.StatusOK, st, "a read: the browser keeps its answer from the page (no CORS header)")
}

// TestOrigin_Host: a request whose Host is not one of the console's names
// (a page's own name rebound to the console's address) is refused, reads
// and pages too; the console's address, localhost, 127.0.0.1 and [::1] on
// its port and the configured hosts are answered.
func TestOrigin_Host(t *testing.T) {
	s, err := New(Options{Listen: "127.0.0.1:0", NameServers: []string{"127.0.0.1:1"}, SampleEvery: time.Hour, Logger: quiet(),
		AllowedHosts: []string{"console.example.com", "mq.local:1", "[fd00::1]:1"}})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	base, port := "http://"+s.Addr(), s.port

	for _, host := range []string{"evil.example", "evil.example:" + port, "localhost:1", "127.0.0.1:" + port + "0",
		"mq.local:2", "mq.local", "example.com", "[fd00::1]:" + port, "localhost.evil.example:" + port, "127.0.0.2:" + port} {
		for _, path := range []string{"/api/config", "/", "/app.js"} {
			st, msg := raw(t, base, "GET", path, "", map[string]string{"Host": host})
			require.Equal(t, http.StatusForbidden, st, "%s %s", host, path)
			require.Contains(t, msg, "Host \""+host+"\" is not this console's address", host)
			require.Contains(t, msg, "console.allowed_hosts", host)
			require.Contains(t, msg, "localhost:"+port, host)
		}
		// A write from the rebound page itself: Origin and Host agree.
		st, _ := raw(t, base, "POST", "/api/topics", `{"topic":"x"}`,
			map[string]string{"Host": host, "Origin": "http://" + host, "Content-Type": "application/json"})
		require.Equal(t, http.StatusForbidden, st, host)
	}
	for _, host := range []string{s.Addr(), "localhost:" + port, "LocalHost.:" + port, "[::1]:" + port, "console.example.com",
		"console.example.com:443", "Console.Example.Com:" + port, "mq.local:1", "[fd00::1]:1"} {
		st, msg := raw(t, base, "GET", "/api/config", "", map[string]string{"Host": host})
		require.Equal(t, http.StatusOK, st, "%s: %s", host, msg)
		// The page behind a proxy: its Origin is the proxy's.
		st, msg = raw(t, base, "POST", "/api/topics", `{"topic":""}`,
			map[string]string{"Host": host, "Origin": "http://" + host, "Content-Type": "application/json"})
		require.Equal(t, http.StatusBadRequest, st, "%s: %s (the form is checked: the write got through)", host, msg)
	}
	st, msg := raw(t, base, "POST", "/api/topics", `{"topic":""}`, map[string]string{"Host": "console.example.com",
		"Origin": "https://console.example.com", "Content-Type": "application/json"})
	require.Equal(t, http.StatusBadRequest, st, "a TLS proxy's page: %s", msg)
}

// TestOrigin_ConnectionAddress: listening on every interface, the console
// answers the address a connection came in on; another address is refused.
func TestOrigin_ConnectionAddress(t *testing.T) {
	s, err := New(Options{Listen: ":0", NameServers: []string{"127.0.0.1:1"}, SampleEvery: time.Hour, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	s.port = "8080" // NB: not started: the handler is asked directly
	get := func(host, local string) int {
		r := httptest.NewRequest("GET", "/api/config", nil)
		r.Host = host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey,
			&net.TCPAddr{IP: net.ParseIP(local), Port: 8080}))
		w := httptest.NewRecorder()
		s.http.Handler.ServeHTTP(w, r)
		return w.Code
	}
	require.Equal(t, http.StatusOK, get("10.1.2.3:8080", "10.1.2.3"))
	require.Equal(t, http.StatusOK, get("[fd00::5]:8080", "fd00::5"))
	require.Equal(t, http.StatusForbidden, get("10.1.2.4:8080", "10.1.2.3"))
	require.Equal(t, http.StatusForbidden, get("10.1.2.3:9090", "10.1.2.3"))
}

// TestNew_BadAllowedHost: an allowed host that is not a host or host:port
// is an error naming it.
func TestNew_BadAllowedHost(t *testing.T) {
	for _, h := range []string{"http://x", "a:b:c", "x:port", "", "[x]", "u@h"} {
		_, err := New(Options{Listen: "127.0.0.1:0", NameServers: []string{"127.0.0.1:1"}, AllowedHosts: []string{h}})
		require.ErrorContains(t, err, "allowed host", h)
	}
}

// TestSameHost: an Origin or Referer matches a Host by host and port, the
// scheme's port standing for a missing one.
func TestSameHost(t *testing.T) {
	for _, tc := range []struct {
		from, host string
		same       bool
	}{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true},
		{"http://127.0.0.1:8080/x?y#z", "127.0.0.1:8080", true},
		{"http://[::1]:8080", "[::1]:8080", true},
		{"http://[0:0::1]:8080", "[::1]:8080", true},
		{"http://console.example.com", "console.example.com", true},
		{"https://console.example.com", "console.example.com", true},
		{"http://console.example.com:80", "console.example.com", true},
		{"https://console.example.com", "console.example.com:80", false},
		{"http://127.0.0.1:8081", "127.0.0.1:8080", false},
		{"http://127.0.0.1", "127.0.0.1:8080", false},
		{"ftp://127.0.0.1:8080", "127.0.0.1:8080", false},
		{"http://user@127.0.0.1:8080", "127.0.0.1:8080", false},
		{"null", "127.0.0.1:8080", false},
		{"127.0.0.1:8080", "127.0.0.1:8080", false},
		{"http://%zz", "127.0.0.1:8080", false},
		{"http://", "", false},
	} {
		require.Equal(t, tc.same, sameHost(tc.from, tc.host), "%s vs %s", tc.from, tc.host)
	}
}
