package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/stretchr/testify/require"
)

// BenchmarkConsole measures the console at the scale: one broker
// with 1,000 topics and 100 consumer groups (group g-i consumes topic t-i,
// with a committed offset and one message of lag). API/* is one request
// answered (ms/op); Page/* is a page shown in headless Chromium, from the
// route change to the rendered view, requests and DOM included (ms/op and
// the browser's own render-ms); Sample is one round of the sampler. Run it
// with
//
//	go test -run '^$' -bench Console -benchtime 20x ./cmd/internal/console
func BenchmarkConsole(b *testing.B) {
	const topics, groups = 1000, 100
	e := startEnv(b, Options{SampleEvery: 2 * time.Second})
	ctx := context.Background()
	for i := range topics {
		require.NoError(b, e.admin.CreateTopic(ctx, client.TopicSpec{Topic: "t-" + strconv.Itoa(i), ReadQueues: 4, WriteQueues: 4}))
	}
	p := e.producer(b)
	for i := range groups {
		topic, g := "t-"+strconv.Itoa(i), "g-"+strconv.Itoa(i)
		pc, err := client.NewPullConsumer(g, client.WithNameServers(e.ns), client.WithLogger(quiet()))
		require.NoError(b, err)
		require.NoError(b, pc.Subscribe(topic, "*"))
		require.NoError(b, pc.Start())
		b.Cleanup(func() { pc.Close() })
		r, err := p.Send(ctx, &client.Message{Topic: topic, Keys: []string{"k-" + strconv.Itoa(i)}, Body: []byte(`{"n":` + strconv.Itoa(i) + `}`)})
		require.NoError(b, err)
		require.NoError(b, pc.CommitOffset(ctx, r.Queue, 0))
	}
	var rows []groupRow
	require.Eventually(b, func() bool {
		return e.do(b, "GET", "/api/groups", nil, &rows) == 200 && len(rows) >= groups && rows[0].Lag >= 0
	}, 60*time.Second, 100*time.Millisecond, "the sampler has seen every group")
	var trows []topicRow
	require.Equal(b, 200, e.do(b, "GET", "/api/topics", nil, &trows))
	require.GreaterOrEqual(b, len(trows), topics)

	for _, path := range []string{"/api/cluster", "/api/topics", "/api/topics/t-7", "/api/groups", "/api/groups/g-7",
		"/api/messages?topic=t-7&key=k-7", "/api/live?topic=t-7&group=g-7", "/api/dlq/g-7"} {
		b.Run("API"+path, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(e.url + path)
				require.NoError(b, err)
				require.Equal(b, 200, resp.StatusCode)
				_ = resp.Body.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
	// One round of the sampler: the cost the console adds every
	// SampleEvery (5 s by default) at this scale.
	b.Run("Sample", func(b *testing.B) {
		for b.Loop() {
			e.con.sample(ctx)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
	chromiumPath(b)
	br := newBrowser(b, e.url)
	for _, r := range [][2]string{{"overview", "overview"}, {"topics", "topics"}, {"topics?system=1", "topics"},
		{"topic/t-7", "topic"}, {"groups", "groups"}, {"group/g-7", "group"}, {"messages?topic=t-7&key=k-7", "messages"},
		{"live?topic=t-7&group=g-7", "live"}} {
		b.Run(fmt.Sprintf("Page/%s", r[0]), func(b *testing.B) {
			render := 0
			for b.Loop() {
				render += br.goTo(b, r[0], r[1])
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			b.ReportMetric(float64(render)/float64(b.N), "render-ms")
		})
	}
	br.requireClean(b)
}
