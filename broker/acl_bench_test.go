package broker

import (
	"testing"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
)

// BenchmarkSendACL: 1 KiB sends (msgpack, async flush, 16 connections)
// to a broker without ACL and to one with ACL whose clients sign, side by
// side: the cost of signing (client) and verifying (broker, on the reader).
//
//	go test -c -o /tmp/broker.test ./broker && cd broker && for i in 1 2 3 4 5; do for m in off on; do
//	  /tmp/broker.test -test.run '^$' -test.bench "SendACL/acl=$m\$" -test.benchtime 20000x; done; done
//
// Measured so, alternated (2 shared cores, client and broker in one
// process), with the pooled HMAC states of sig.Verifier: off 36.5k, 43.3k,
// 42.7k, 35.0k, 49.9k sends/s; on 28.2k, 34.0k, 37.8k, 33.3k, 45.6k: ACL
// carries about 0.80x (medians 34.0k / 42.7k; pair by pair 0.77 to 0.95).
// Before the pooling: medians 30.8k / 39.0k, 0.79x, the difference within
// this machine's noise; the pooling's gain is in allocations
// (BenchmarkCheck, internal/acl: check 2080 B / 10 allocs to 48 B / 2,
// signing 1920 B / 14 to 1296 B / 6).
func BenchmarkSendACL(b *testing.B) {
	body := make([]byte, 1024)
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "orders", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 8, QueueID: -1, Properties: "TAGS\x01T\x02KEYS\x01k\x02UNIQ_KEY\x017F0000010001000000000000000A0001\x02"}
	for _, on := range []bool{false, true} {
		name := "acl=off"
		if on {
			name = "acl=on"
		}
		b.Run(name, func(b *testing.B) {
			opts := remoting.ClientOptions{SerializeType: remoting.SerializeMsgpack, Logger: quiet()}
			br := benchBrokerWith(b, func(cfg *conf.Broker) {
				if on {
					cfg.ACL.File = testutil.WriteACL(b, testutil.ACLRules)
					opts.Sign = sig.Signer("davedave", "dave-secret-1", "")
				}
			})
			clients := make([]*remoting.Client, 16)
			for i := range clients {
				clients[i] = remoting.NewClient(opts)
				defer clients[i].Close()
			}
			sendLoop(b, br.Addr(), clients, protocol.Ext(h), body)
		})
	}
}
