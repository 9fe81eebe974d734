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
// process): off 33.9k, 39.0k, 42.6k, 33.9k, 48.4k sends/s; on 29.4k,
// 30.2k, 33.0k, 30.8k, 30.9k: ACL carries about 0.79x (median 30.8k /
// 39.0k). BenchmarkCheck (internal/acl) puts the broker's check near
// 3.5 us a send and the client's signing near 3.5 us.
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
