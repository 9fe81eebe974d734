package remoting

import (
	"context"

	"github.com/cloudwego/netpoll"

	"github.com/sluicemq/sluice/internal/workpool"
)

// NB: netpoll runs each connection's read events (OnRequest) through its
// Runner, by default a goroutine pool whose workers end as soon as its queue
// is empty: a new goroutine, whose stack grows again, for nearly every
// event at a moderate rate. workpool keeps them (see its doc). netpoll
// reads its configuration once its pollers start, so it is set in init.
func init() {
	if err := netpoll.Configure(netpoll.Config{Runner: func(_ context.Context, f func()) { workpool.Go(f) }}); err != nil {
		panic("remoting: configuring netpoll: " + err.Error())
	}
}
