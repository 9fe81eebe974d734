// Package console is Sluice's built-in web console: a JSON API under /api/
// and a single-page application embedded in the binary (assets/, served
// with go:embed; no CDN, no build step), run by mqnamesrv and mqbroker
// with --console-listen.
//
// The console sees the cluster as mqadmin does, through a client.Admin:
// the nameservers' routes and the brokers' admin requests. It sends no
// request of its own making.
//
// # Pages and API
//
//	page           API it reads                      writes (hidden when read-only)
//	overview       GET /api/cluster                  -
//	topics         GET /api/topics, /api/topics/{t}  POST /api/topics, DELETE /api/topics/{t}
//	groups         GET /api/groups, /api/groups/{g}, POST /api/groups/{g}/reset
//	               /api/groups/{g}/status
//	messages       GET /api/messages, /api/dlq/{g}   POST /api/dlq/{g}/resend, /api/messages/consume
//	live           GET /api/live?topic=&group=       -
//
// Every answer is JSON; a failure is {"error": "..."} with a 4xx status for
// bad input or an unknown name and 502 when a nameserver or broker failed.
//
// # History
//
// A sampler goroutine asks the brokers every Options.SampleEvery for their
// runtime totals, every group's consume stats and every topic's queue
// bounds, and keeps the last Options.History of points in memory: the
// lag chart, the live peak-shaving chart and the rates come from it. It
// is owned by Server: Start launches it and Close waits for it.
//
// # Goroutines and locks
//
//	| goroutine        | owner (starts / waits) | wakes on                        | stops on      |
//	|------------------|------------------------|---------------------------------|---------------|
//	| serve            | Server (Start / Close) | a connection                    | Close         |
//	| HTTP handlers    | net/http               | a request                       | it returns    |
//	| sampleLoop       | Server (Start / Close) | SampleEvery ticker              | Close         |
//	| client loops     | client.Admin, the pull consumer (routes, heartbeats) | their intervals | Close |
//
// Server.mu (the last sample's time and error) and history.mu (the series)
// are leaves: no request is made while either is held.
//
// # Access control
//
// First, whatever the ACL (origin.go): a request whose Host is not one of
// the console's names (DNS rebinding) is refused, and a write to the API
// needs Content-Type application/json and an Origin (or Referer) on the
// console's own Host (cross-site writes); each refusal is 403 naming why.
// With ACL on, the login, session and CSRF layer (auth.go) comes next.
// Options.Wrap wraps the whole handler. Writes are registered through one
// method, so read-only mode (Options.ReadOnly) leaves them out entirely.
package console
