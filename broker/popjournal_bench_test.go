package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
)

// BenchmarkPOP_ReceiveAck: a receive of 32 messages and an ack of each,
// per message, with the POP state journal (records in the log: one per
// receive, one per ack) and without (the state in memory only, saved
// every second, as before the journal).
func BenchmarkPOP_ReceiveAck(b *testing.B) {
	for _, journal := range []bool{false, true} {
		name := "journal=off"
		if journal {
			name = "journal=on"
		}
		b.Run(name, func(b *testing.B) {
			br := startBroker(b, testConfig(b.TempDir()), Options{})
			_, err := br.ensureTopic("bt", 1)
			require.NoError(b, err)
			if !journal {
				br.pop.SetJournal(nil)
			}
			body := make([]byte, 128)
			for range b.N {
				res := br.store.Put(context.Background(), &message.Message{Topic: "bt", Body: body, BornTimestamp: time.Now().UnixMilli(), BornHost: br.storeHost, StoreHost: br.storeHost})
				require.True(b, res.Stored(), "%v %s", res.Status, res.Remark)
			}
			for br.store.DispatchLag() > 0 {
				time.Sleep(time.Millisecond)
			}
			g := grpcBackend{br}
			b.ResetTimer()
			for done := 0; done < b.N; {
				ps, st := g.Pop(context.Background(), v5PopRequest("bg", "bt"))
				if st != nil || len(ps) == 0 {
					b.Fatalf("pop: %v, %d", st, len(ps))
				}
				for _, p := range ps {
					if st := g.Ack("bg", "bt", p.Handle); st != nil {
						b.Fatal(st)
					}
				}
				done += len(ps)
			}
		})
	}
}
