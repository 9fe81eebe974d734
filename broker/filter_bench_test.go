package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// BenchmarkPullFilter: pull throughput of one queue of 4,096 messages (10
// properties each) with no filter, a TAG filter taking 50% and a SQL92
// filter taking 50%, side by side; msgs/s counts delivered messages.
//
//	go test -run='^$' -bench=PullFilter -benchtime=2000x ./broker/
func BenchmarkPullFilter(b *testing.B) {
	br := benchBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
	defer c.Close()
	ctx := context.Background()
	call := func(code int16, ext map[string]string, body []byte) *remoting.Command {
		resp, err := c.Invoke(ctx, br.Addr(), remoting.NewRequest(code, ext, body))
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	const n = 4096
	for i := range n {
		props := map[string]string{message.PropTags: []string{"A", "B"}[i%2], message.PropKeys: fmt.Sprint("k", i),
			"amount": fmt.Sprint(i % 100), "region": []string{"eu", "us", "apac"}[i%3], "currency": "EUR",
			"customer": fmt.Sprint("c-", i%977), "channel": "web", "priority": fmt.Sprint(i % 7), "shard": "s1", "v": "2"}
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "bench", DefaultTopic: "TBW102", DefaultTopicQueueNums: 1,
			QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Properties: string(message.AppendProperties(nil, props))}
		if resp := call(protocol.SendMessage, protocol.Ext(h), make([]byte, 256)); resp.Code != protocol.Success {
			b.Fatal(resp.Remark)
		}
	}
	for br.Store().DispatchLag() != 0 {
		time.Sleep(time.Millisecond) // NB: setup only, outside the timer
	}
	for _, bc := range []struct{ name, typ, expr string }{
		{"filter=none", "TAG", "*"},
		{"filter=tag50", "TAG", "A"},
		{"filter=sql50", "SQL92", "amount < 50 AND region IS NOT NULL AND currency = 'EUR'"},
	} {
		grp := "g-" + bc.name[7:]
		hb := protocol.HeartbeatData{ClientID: "bench", ConsumerDataSet: []protocol.ConsumerData{{GroupName: grp,
			ConsumeType: "CONSUME_ACTIVELY", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "bench", SubString: bc.expr, ExpressionType: bc.typ, SubVersion: 1}}}}}
		body, err := remoting.EncodeBody(remoting.SerializeJSON, hb)
		if err != nil {
			b.Fatal(err)
		}
		if resp := call(protocol.HeartBeat, nil, body); resp.Code != protocol.Success {
			b.Fatal(resp.Remark)
		}
		b.Run(bc.name, func(b *testing.B) {
			off, got := int64(0), 0
			start := time.Now()
			for b.Loop() {
				h := &protocol.PullMessageRequestHeader{ConsumerGroup: grp, Topic: "bench", QueueOffset: off, MaxMsgNums: 32}
				resp := call(protocol.PullMessage, protocol.Ext(h), nil)
				var rh protocol.PullMessageResponseHeader
				if err := rh.FromExt(resp.ExtMap()); err != nil {
					b.Fatal(err)
				}
				if resp.Code == protocol.Success {
					for rest := resp.Body; len(rest) > 0; got++ {
						r, err := message.Decode(rest)
						if err != nil {
							b.Fatal(err)
						}
						rest = rest[r.TotalSize:]
					}
				}
				off = rh.NextBeginOffset
				if off >= n {
					off = 0
				}
			}
			b.ReportMetric(float64(got)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
