package console

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// user is a browser session of the console's API: a cookie jar and the
// CSRF token of the last login.
type user struct {
	e    *env
	c    *http.Client
	csrf string
}

func newUser(t *testing.T, e *env) *user {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &user{e: e, c: &http.Client{Jar: jar}}
}

// call sends a request (with the CSRF token when csrf) and returns the
// status and the decoded body.
func (u *user) call(t *testing.T, method, path string, body any, csrf bool) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u.e.url+path, rd)
	require.NoError(t, err)
	asPage(req, u.e.url)
	if csrf {
		req.Header.Set(csrfHeader, u.csrf)
	}
	resp, err := u.c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(data) > 0 && data[0] == '{' {
		require.NoError(t, json.Unmarshal(data, &out), string(data))
	}
	return resp.StatusCode, out, resp.Header
}

func (u *user) login(t *testing.T, key, secret string) int {
	t.Helper()
	st, out, h := u.call(t, "POST", "/api/login", map[string]string{"accessKey": key, "secretKey": secret}, false)
	if st == http.StatusOK {
		u.csrf = out["csrf"].(string)
		cookie := h.Get("Set-Cookie")
		require.Contains(t, cookie, "HttpOnly")
		require.Contains(t, cookie, "SameSite=Strict")
	}
	return st
}

// TestAuth_LoginSessionCSRF: with ACL on, the console's API needs a
// session; a write needs the session's CSRF token and an admin account.
func TestAuth_LoginSessionCSRF(t *testing.T) {
	accounts := map[string][2]string{"root": {"s1", "admin"}, "viewer": {"s2", ""}}
	e := startEnv(t, Options{Auth: &Auth{Check: func(key, secret string) (bool, bool) {
		a, ok := accounts[key]
		return a[1] == "admin", ok && a[0] == secret
	}}})
	anon := newUser(t, e)
	st, out, _ := anon.call(t, "GET", "/api/topics", nil, false)
	require.Equal(t, http.StatusUnauthorized, st)
	require.Contains(t, out["error"], "log in")
	st, _, _ = anon.call(t, "GET", "/", nil, false)
	require.Equal(t, http.StatusOK, st, "the page itself loads, to show the login form")
	require.Equal(t, http.StatusUnauthorized, anon.login(t, "root", "guess"))
	require.Equal(t, http.StatusUnauthorized, anon.login(t, "nobody", "s1"))

	viewer := newUser(t, e)
	require.Equal(t, http.StatusOK, viewer.login(t, "viewer", "s2"))
	st, _, _ = viewer.call(t, "GET", "/api/topics", nil, false)
	require.Equal(t, http.StatusOK, st)
	st, out, _ = viewer.call(t, "GET", "/api/session", nil, false)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, false, out["admin"])
	st, out, _ = viewer.call(t, "POST", "/api/topics", topicForm{Topic: "orders", ReadQueues: 4, WriteQueues: 4}, true)
	require.Equal(t, http.StatusForbidden, st)
	require.Contains(t, out["error"], "not an admin")

	root := newUser(t, e)
	require.Equal(t, http.StatusOK, root.login(t, "root", "s1"))
	st, out, _ = root.call(t, "POST", "/api/topics", topicForm{Topic: "orders", ReadQueues: 4, WriteQueues: 4}, false)
	require.Equal(t, http.StatusForbidden, st, "a write without the CSRF token")
	require.Contains(t, out["error"], csrfHeader)
	st, _, _ = root.call(t, "POST", "/api/topics", topicForm{Topic: "orders", ReadQueues: 4, WriteQueues: 4}, true)
	require.Equal(t, http.StatusOK, st)
	require.Eventually(t, func() bool {
		l, err := e.admin.TopicList(context.Background())
		return err == nil && slices.Contains(l, "orders")
	}, 10*time.Second, 10*time.Millisecond)

	st, _, _ = root.call(t, "POST", "/api/logout", nil, true)
	require.Equal(t, http.StatusOK, st)
	st, _, _ = root.call(t, "GET", "/api/topics", nil, false)
	require.Equal(t, http.StatusUnauthorized, st, "logged out")

	// Without ACL the page learns that no login is needed.
	var s map[string]any
	open := startEnv(t, Options{})
	require.Equal(t, http.StatusOK, open.do(t, "GET", "/api/session", nil, &s))
	require.Equal(t, false, s["auth"])
}
