package broker

import v5 "github.com/sluicemq/sluice/broker/v5"

// The broker serves the v5 PushConsumer's auto_renew and dead letters
// (grpcpop.go: Extend, PopNow, DeadLetter).
var (
	_ v5.Renewer      = grpcBackend{}
	_ v5.DeadLetterer = grpcBackend{}
)
