// Package compat checks Sluice's wire compatibility with the official
// Apache RocketMQ Go client (github.com/apache/rocketmq-client-go/v2).
//
// It is a separate module so that the client's dependency tree stays out of
// Sluice's go.mod (STYLE.md 4.10 item 13). The tests build mqnamesrv and
// mqbroker from the parent module, start them as real processes on free
// loopback ports with a temporary store, and drive them with the client the
// way an application would:
//
//	cd scripts/compat && go test -count=1 ./...
//
// The servers run with ACL (every client signs, WithCredentials); with
// SLUICE_COMPAT_TLS=1 they also enforce TLS and the clients use
// WithTls(true) (scripts/test.sh runs both).
//
// The package has no non-test code.
package compat
