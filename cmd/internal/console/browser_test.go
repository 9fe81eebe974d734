package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/sluicemq/sluice/client"
	"github.com/stretchr/testify/require"
)

// browser is a headless Chromium tab that records every console error,
// uncaught exception and failed request of the pages it shows.
type browser struct {
	ctx  context.Context
	base string // the console's URL

	mu       sync.Mutex
	problems []string // guarded by mu
}

// chromiumPath finds Debian's chromium. Under CI (CI=true) a missing
// browser fails the test: scripts/test.sh installs it. Elsewhere the test
// is skipped with what to install.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; scripts/test.sh installs it (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium): browser tests skipped")
	return ""
}

// newBrowser starts Chromium for the test and opens a tab on the console
// at base; it is closed when the test ends.
func newBrowser(t testing.TB, base string) *browser {
	t.Helper()
	return newBrowserAt(t, base, "overview")
}

// newBrowserAt opens the console and waits for page (the login form with
// ACL on).
func newBrowserAt(t testing.TB, base, page string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	b := &browser{ctx: ctx, base: base}
	require.NoError(t, chromedp.Do(ctx)) // starts the browser
	require.NoError(t, chromedp.Listen(ctx, b.record))
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/")))
	b.waitReady(t, page)
	return b
}

// record notes the events that mean a page is broken. It runs on the
// tab's reader: it only appends.
func (b *browser) record(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p = "console." + string(ev.Type) + ": " + strings.Join(args, " ")
		}
	case *runtime.EventExceptionThrown:
		p = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			p += " " + ev.ExceptionDetails.Exception.Description
		}
	case *network.EventLoadingFailed:
		if !ev.Canceled {
			p = "request failed: " + ev.ErrorText
		}
	case *network.EventResponseReceived:
		if ev.Response != nil && ev.Response.Status >= 400 {
			p = fmt.Sprintf("HTTP %d for %s", ev.Response.Status, ev.Response.URL)
		}
	}
	if p != "" {
		b.mu.Lock()
		b.problems = append(b.problems, p)
		b.mu.Unlock()
	}
}

// requireClean fails the test with every problem recorded so far.
func (b *browser) requireClean(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(t, b.problems, "console errors or failed requests")
}

// timeout bounds one wait in the browser.
const timeout = 20 * time.Second

// run runs actions within the timeout.
func (b *browser) run(t testing.TB, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// eval evaluates a JavaScript expression.
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

// poll waits until a JavaScript expression is true.
func (b *browser) poll(t testing.TB, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
	require.NoError(t, err, "waiting for %s; notice: %s", expr, b.notice(t))
}

func (b *browser) notice(t testing.TB) string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("notice").textContent`))
	return s
}

// waitReady waits until the view shows page and returns the milliseconds
// its render took in the browser.
func (b *browser) waitReady(t testing.TB, page string) int {
	t.Helper()
	b.poll(t, `document.getElementById("view") !== null && document.getElementById("view").dataset.ready !== undefined`)
	got := eval[string](t, b, `document.getElementById("view").dataset.ready`)
	require.Equal(t, page, got, "page %s did not render; notice: %s", page, b.notice(t))
	ms, err := strconv.Atoi(eval[string](t, b, `document.getElementById("view").dataset.renderMs`))
	require.NoError(t, err)
	return ms
}

// goTo shows the console route (e.g. "topics" or "group/g1") and waits
// until page has rendered; it returns the render's milliseconds. Going to
// the route shown renders it again.
func (b *browser) goTo(t testing.TB, route, page string) int {
	t.Helper()
	b.run(t, chromedp.Evaluate[chromedp.Void](`document.getElementById("view").removeAttribute("data-ready");
		if (location.hash === `+strconv.Quote("#/"+route)+`) window.dispatchEvent(new HashChangeEvent("hashchange"));
		else location.hash = `+strconv.Quote("#/"+route)))
	return b.waitReady(t, page)
}

// screenshot writes a PNG of the page to dir/name.
func (b *browser) screenshot(t testing.TB, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.Greater(t, len(png), 1000)
	require.Equal(t, "\x89PNG", string(png[:4]))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

// screenshotDir is where the screenshots go: SLUICE_CONSOLE_SCREENSHOTS
// (docs/ when refreshing the README's), or a temporary directory.
func screenshotDir(t testing.TB) string {
	if d := os.Getenv("SLUICE_CONSOLE_SCREENSHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// TestBrowser drives the console in headless Chromium: every page renders
// with no console error and no failed request; a topic created in the
// console is listed by the admin client; a held-back consumer's lag chart
// rises above 0 and falls to 0 once released; a message searched by key
// shows its body; a DLQ message resent from the console is consumed again;
// and the overview and the live peak-shaving chart are photographed.
func TestBrowser(t *testing.T) {
	e := startEnv(t, Options{})
	chromiumPath(t)
	ctx := context.Background()
	e.createTopic(t, "orders", 2)
	p := e.producer(t)
	held := newGate()
	e.consumer(t, "billing", "orders", held, func(*client.Message) client.ConsumeResult { return client.ConsumeSuccess })
	for i := range 5 {
		_, err := p.Send(ctx, &client.Message{Topic: "orders", Keys: []string{"order-" + strconv.Itoa(40+i)},
			Body: []byte(`{"order":` + strconv.Itoa(40+i) + `,"item":"tea"}`)})
		require.NoError(t, err)
	}
	var gv groupView
	require.Eventually(t, func() bool {
		return e.do(t, "GET", "/api/groups/billing", nil, &gv) == 200 && gv.UnknownLag == 0 && gv.Lag == 0
	}, 10*time.Second, 20*time.Millisecond, "billing consumed the first messages")
	b := newBrowser(t, e.url)

	t.Run("pages", func(t *testing.T) {
		for _, r := range [][2]string{{"topics", "topics"}, {"topics?system=1", "topics"}, {"topic/orders", "topic"},
			{"groups", "groups"}, {"group/billing", "group"}, {"messages", "messages"},
			{"messages?topic=orders&begin=2000-01-01T00:00", "messages"}, {"messages?dlq=billing", "messages"},
			{"live", "live"}, {"live?topic=orders&group=billing", "live"}, {"overview", "overview"}} {
			b.goTo(t, r[0], r[1])
			if strings.Contains(r[0], "begin=") {
				require.Equal(t, 5, eval[int](t, b, `document.querySelectorAll(".msgcard").length`), "the time range search")
			}
		}
		b.requireClean(t)
	})

	t.Run("create topic", func(t *testing.T) {
		b.goTo(t, "topics", "topics")
		b.run(t, chromedp.SendKeys(chromedp.ID("topic-name"), "made-in-console"),
			chromedp.SetValue(chromedp.ID("topic-read"), "3"), chromedp.SetValue(chromedp.ID("topic-write"), "3"),
			chromedp.Click(chromedp.ID("topic-create")))
		b.poll(t, `document.getElementById("notice").textContent === "topic made-in-console created"`)
		require.Eventually(t, func() bool {
			l, err := e.admin.TopicList(ctx)
			return err == nil && slices.Contains(l, "made-in-console")
		}, 10*time.Second, 10*time.Millisecond)
		r, err := e.admin.TopicRoute(ctx, "made-in-console")
		require.NoError(t, err)
		require.Equal(t, 3, r.Queues[0].WriteQueues)
		b.requireClean(t)
	})

	t.Run("delete topic", func(t *testing.T) {
		// A bodiless write: the page sends it as JSON too, as the console
		// requires of every write.
		b.goTo(t, "topics", "topics")
		b.run(t, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
			chromedp.Click(chromedp.CSS(`button[data-delete="made-in-console"]`)))
		b.poll(t, `document.getElementById("notice").textContent === "topic made-in-console deleted"`)
		require.Eventually(t, func() bool {
			l, err := e.admin.TopicList(ctx)
			return err == nil && !slices.Contains(l, "made-in-console")
		}, 10*time.Second, 10*time.Millisecond)
		b.requireClean(t)
	})

	t.Run("lag chart", func(t *testing.T) {
		held.hold()
		for range 20 {
			_, err := p.Send(ctx, &client.Message{Topic: "orders", Body: []byte("held back")})
			require.NoError(t, err)
		}
		b.goTo(t, "group/billing", "group")
		b.poll(t, `+document.getElementById("lag-chart").dataset.lastlag === 20`)
		require.Equal(t, "20", eval[string](t, b, `document.getElementById("group-lag").textContent`))
		held.release()
		b.poll(t, `document.getElementById("lag-chart").dataset.lastlag === "0"`)
		require.Equal(t, "0", eval[string](t, b, `document.getElementById("group-lag").textContent`))
		b.run(t, chromedp.Click(chromedp.ID("status-load")))
		b.poll(t, `document.querySelectorAll("#status tbody tr").length === 1`)
		require.Equal(t, "CONSUME_PASSIVELY", eval[string](t, b, `document.querySelector("#status tbody td:nth-child(3)").textContent`))
		b.requireClean(t)
	})

	t.Run("POP group", func(t *testing.T) {
		c := newV5Consumer(t, e, "popg")
		require.NotEmpty(t, c.receive("orders", false))
		b.goTo(t, "group/popg", "group")
		b.poll(t, `+document.getElementById("pop-chart").dataset.lastinflight > 0`)
		require.Positive(t, eval[int](t, b, `document.querySelectorAll("#group-body table")[2].querySelectorAll("tbody tr").length`),
			"the POP table, a row per queue")
		b.goTo(t, "groups", "groups")
		require.Contains(t, eval[string](t, b, `document.getElementById("view").textContent`), "In flight (POP)")
		b.requireClean(t)
	})

	t.Run("message by key", func(t *testing.T) {
		b.goTo(t, "messages", "messages")
		b.run(t, chromedp.SendKeys(chromedp.ID("q-topic"), "orders"), chromedp.SendKeys(chromedp.ID("q-key"), "order-42"))
		b.run(t, chromedp.Evaluate[chromedp.Void](`document.getElementById("view").removeAttribute("data-ready")`),
			chromedp.Click(chromedp.ID("search")))
		b.waitReady(t, "messages")
		require.Equal(t, "{\n  \"order\": 42,\n  \"item\": \"tea\"\n}", eval[string](t, b, `document.querySelector("pre.body").textContent`))
		b.run(t, chromedp.SetValue(chromedp.CSS("select.bodyfmt"), "hex"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("select.bodyfmt").dispatchEvent(new Event("change"))`))
		require.Contains(t, eval[string](t, b, `document.querySelector("pre.body").textContent`), "7b 22 6f 72 64 65 72 22")
		require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll("#view form.again").length`), "writes are offered")
		b.requireClean(t)
	})

	t.Run("resend from DLQ", func(t *testing.T) {
		again, _ := e.poison(t, p, "audit", "orders")
		b.goTo(t, "messages?dlq=audit", "messages")
		require.Equal(t, "poison", eval[string](t, b, `document.querySelector("pre.body").textContent`))
		require.Zero(t, again.Load())
		b.run(t, chromedp.Click(chromedp.CSS("button.resend")))
		b.poll(t, `document.getElementById("notice").textContent.startsWith("message ")`)
		require.Eventually(t, func() bool { return again.Load() == 1 }, 15*time.Second, 10*time.Millisecond, "consumed again")
		b.requireClean(t)
	})

	t.Run("read-only", func(t *testing.T) {
		ro, err := New(Options{Listen: "127.0.0.1:0", NameServers: []string{e.ns}, ReadOnly: true, SampleEvery: sampleEvery, Logger: quiet()})
		require.NoError(t, err)
		require.NoError(t, ro.Start())
		defer func() { require.NoError(t, ro.Close()) }()
		b.run(t, chromedp.Navigate("http://"+ro.Addr()+"/#/topics"))
		b.waitReady(t, "topics")
		require.Equal(t, "read-only", eval[string](t, b, `document.getElementById("mode").textContent`))
		for _, route := range [][2]string{{"topics", "topics"}, {"group/billing", "group"}, {"messages?topic=orders&key=order-42", "messages"},
			{"messages?dlq=audit", "messages"}} {
			b.goTo(t, route[0], route[1])
			require.Zero(t, eval[int](t, b, `document.querySelectorAll("#view form#topic-form, #view form#reset-form, #view form.again, #view button.resend, #view button[data-delete]").length`),
				route[0])
		}
		require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll(".msgcard").length`), "the DLQ is still shown")
		b.requireClean(t)
		b.run(t, chromedp.Navigate(e.url+"/"))
		b.waitReady(t, "overview")
	})

	t.Run("screenshots", func(t *testing.T) {
		dir := screenshotDir(t)
		e.createTopic(t, "peak", 4)
		peakShave(t, e, "peak", "shaver")
		b.goTo(t, "live?topic=peak&group=shaver", "live")
		b.poll(t, `+document.getElementById("live-chart").dataset.points >= 10 && document.getElementById("live-chart").dataset.lastbacklog === "0"`)
		b.screenshot(t, dir, "console-live.png")
		b.goTo(t, "overview", "overview")
		b.screenshot(t, dir, "console-overview.png")
		b.requireClean(t)
	})
}

// peakShave plays the picture of the demo on topic: three bursts of sends,
// far faster than group's consumer drains them (it handles one message per
// tick of 4 ms), each once the sampler has seen the backlog of the last
// drained to 0; it returns after the third has drained.
func peakShave(t *testing.T, e *env, topic, group string) {
	t.Helper()
	ctx := context.Background()
	tick := time.NewTicker(4 * time.Millisecond)
	t.Cleanup(tick.Stop)
	var done atomic.Int64
	e.consumer(t, group, topic, newGate(), func(*client.Message) client.ConsumeResult {
		<-tick.C // NB: pacing the consumer, the point of the picture
		done.Add(1)
		return client.ConsumeSuccess
	}, client.WithConsumeGoroutines(1), client.WithConsumeBatchSize(1))
	p := e.producer(t)
	drained := func(n int64) func() bool {
		return func() bool {
			pts := e.con.hist.points(flowKey(group, topic))
			return done.Load() == n && len(pts) > 0 && pts[len(pts)-1].Lag == 0
		}
	}
	// A first message makes the group commit, so that the sampler sees
	// its flow from before the first burst.
	_, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte("order 0")})
	require.NoError(t, err)
	require.Eventually(t, drained(1), 30*time.Second, 5*time.Millisecond)
	const burst = 250
	for round := range 3 {
		for i := range burst {
			_, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte("order " + strconv.Itoa(1+round*burst+i))})
			require.NoError(t, err)
		}
		require.Eventually(t, drained(int64(1+(round+1)*burst)), 30*time.Second, 5*time.Millisecond)
	}
}

// TestBrowser_Login: with ACL on, the console shows a login form; a
// wrong secret is refused with a message; an admin account logs in,
// sees the overview, and its writes (CSRF token included) go through.
func TestBrowser_Login(t *testing.T) {
	e := startEnv(t, Options{Auth: &Auth{Check: func(key, secret string) (bool, bool) {
		return true, key == "root" && secret == "s1"
	}}})
	chromiumPath(t)
	b := newBrowserAt(t, e.url, "login")
	b.run(t, chromedp.SendKeys(chromedp.ID("login-key"), "root"), chromedp.SendKeys(chromedp.ID("login-secret"), "guess"),
		chromedp.Click(chromedp.ID("login-submit")))
	b.poll(t, `document.getElementById("login-error").textContent.includes("wrong secret")`)
	b.run(t, chromedp.Evaluate[chromedp.Void](`document.getElementById("view").removeAttribute("data-ready")`),
		chromedp.SetValue(chromedp.ID("login-secret"), "s1"), chromedp.Click(chromedp.ID("login-submit")))
	b.waitReady(t, "overview")
	require.Equal(t, "root", eval[string](t, b, `document.getElementById("mode").textContent`))
	b.goTo(t, "topics", "topics")
	b.run(t, chromedp.SendKeys(chromedp.ID("topic-name"), "made-after-login"),
		chromedp.SetValue(chromedp.ID("topic-read"), "2"), chromedp.SetValue(chromedp.ID("topic-write"), "2"),
		chromedp.Click(chromedp.ID("topic-create")))
	b.poll(t, `document.getElementById("notice").textContent === "topic made-after-login created"`)
}
