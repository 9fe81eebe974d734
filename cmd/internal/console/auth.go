package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// With ACL on (Options.Auth), the console asks for an account: POST
// /api/login with an access key and secret opens a session, kept in an
// HttpOnly, SameSite=Strict cookie; every other API call needs it, and
// every write also the session's CSRF token in the X-CSRF-Token header
// (GET /api/session returns it to the page). An account that is not an
// admin sees everything and changes nothing: the console's writes (topics,
// offsets, resends) are admin requests at the brokers.

// Auth checks the console's users against the ACL.
type Auth struct {
	// Check reports whether secret is key's, and whether key is an admin.
	Check func(key, secret string) (admin, ok bool)
}

const (
	sessionCookie = "sluice_console"
	csrfHeader    = "X-CSRF-Token"
	sessionIdle   = 12 * time.Hour
	maxSessions   = 10_000
)

type session struct {
	key   string
	admin bool
	csrf  string
	seen  time.Time
}

// sessions is the console's logged-in users.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session // token → session; guarded by mu
}

func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // NB: crypto/rand does not fail on Linux
	return hex.EncodeToString(b[:])
}

func (ss *sessions) open(key string, admin bool, now time.Time) (string, *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.m) >= maxSessions {
		var oldest string
		for t, s := range ss.m {
			if oldest == "" || s.seen.Before(ss.m[oldest].seen) {
				oldest = t
			}
		}
		delete(ss.m, oldest)
	}
	s := &session{key: key, admin: admin, csrf: newToken(), seen: now}
	token := newToken()
	ss.m[token] = s
	return token, s
}

// get returns the live session of r's cookie, refreshing its idle time.
func (ss *sessions) get(r *http.Request, now time.Time) (string, *session) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[c.Value]
	if s == nil {
		return "", nil
	}
	if now.Sub(s.seen) > sessionIdle {
		delete(ss.m, c.Value)
		return "", nil
	}
	s.seen = now
	return c.Value, s
}

func (ss *sessions) close(token string) {
	ss.mu.Lock()
	delete(ss.m, token)
	ss.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func refuse(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// guard is the access control layer around the console's handler.
func (s *Server) guard(next http.Handler) http.Handler {
	ss := &sessions{m: map[string]*session{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := s.now()
		switch {
		case r.URL.Path == "/api/login" && r.Method == http.MethodPost:
			var f struct {
				AccessKey string `json:"accessKey"`
				SecretKey string `json:"secretKey"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&f); err != nil || f.AccessKey == "" {
				refuse(w, http.StatusBadRequest, "log in with a JSON body {\"accessKey\": ..., \"secretKey\": ...}")
				return
			}
			admin, ok := s.opts.Auth.Check(f.AccessKey, f.SecretKey)
			if !ok {
				s.opts.Logger.Warn("console: login refused", "access_key", f.AccessKey, "from", r.RemoteAddr)
				refuse(w, http.StatusUnauthorized, "unknown access key or wrong secret")
				return
			}
			token, sess := ss.open(f.AccessKey, admin, now)
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, MaxAge: int(sessionIdle / time.Second)})
			writeJSON(w, http.StatusOK, map[string]any{"auth": true, "accessKey": sess.key, "admin": sess.admin, "csrf": sess.csrf})
			return
		case !strings.HasPrefix(r.URL.Path, "/api/"):
			next.ServeHTTP(w, r) // NB: the pages themselves; their data needs a session
			return
		}
		token, sess := ss.get(r, now)
		if sess == nil {
			refuse(w, http.StatusUnauthorized, "log in first (ACL is on)")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(sess.csrf)) != 1 {
				refuse(w, http.StatusForbidden, "missing or wrong "+csrfHeader+" (reload the page)")
				return
			}
			if r.URL.Path == "/api/logout" {
				ss.close(token)
				http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
				writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
				return
			}
			if !sess.admin {
				refuse(w, http.StatusForbidden, "account "+sess.key+" is not an admin: it may look, not change anything")
				return
			}
		}
		if r.URL.Path == "/api/session" {
			writeJSON(w, http.StatusOK, map[string]any{"auth": true, "accessKey": sess.key, "admin": sess.admin, "csrf": sess.csrf})
			return
		}
		next.ServeHTTP(w, r)
	})
}
