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
// The RocketMQ 5 SDKs speak gRPC to the broker: the official Go v5 SDK
// (v5_test.go) and the Node.js SDK (npm rocketmq-client-nodejs 1.0.8,
// v5_node_test.go), which runs in node from node/ (driver.mjs); its tests
// need node and `npm ci` there (node/install.sh, which scripts/test.sh
// runs) and are skipped without them, or fail under CI=true.
//
// The package has no non-test code.
package compat
