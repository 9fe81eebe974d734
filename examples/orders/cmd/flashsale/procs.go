package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/internal/freeport"
)

// proc is one program of the pipeline, run as a process so that it can be
// killed with SIGKILL and started again with the same arguments.
type proc struct {
	name  string
	bin   string
	args  []string
	env   []string       // added to this process's environment
	ready *regexp.Regexp // the stdout line that says it serves
	log   string         // its stdout and stderr go here
	cmd   *exec.Cmd
	done  chan struct{}
	Match []string // ready's submatches
}

// start runs p and waits for its ready line.
func (p *proc) start(ctx context.Context) error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stderr = logf
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p.done = make(chan struct{})
	lines := make(chan []string, 1)
	go func() {
		defer close(p.done)
		defer logf.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if m := p.ready.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case lines <- m:
				default:
				}
			}
		}
		io.Copy(logf, out) // NB: after an over-long line
		p.cmd.Wait()
	}()
	select {
	case p.Match = <-lines:
		return nil
	case <-p.done:
		return fmt.Errorf("%s exited before serving; see %s:\n%s", p.name, p.log, tail(p.log))
	case <-time.After(60 * time.Second):
	case <-ctx.Done():
	}
	p.kill()
	return fmt.Errorf("%s did not start in time; see %s", p.name, p.log)
}

// kill ends p at once (SIGKILL), as a crash would.
func (p *proc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		<-p.done
	}
}

// stop asks p to exit (SIGTERM) and kills it after 10 s.
func (p *proc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// broker is a standalone mqbroker with its embedded nameserver, on
// addresses fixed at its first start, so that a restart is found again
// by the clients.
func newBroker(bin, dir, console string, env ...string) (*proc, error) {
	addrs, err := freeport.Addrs("127.0.0.1", 3)
	if err != nil {
		return nil, err
	}
	if console == "" {
		console = "off"
	}
	return &proc{name: "mqbroker", bin: bin, log: filepath.Join(dir, "mqbroker.log"),
		args: []string{"--listen", addrs[0], "--ha-listen", addrs[1], "--store-dir", filepath.Join(dir, "store"),
			"--flush", "sync", "--grpc-listen", "off", "--console-listen", console},
		env:   append([]string{"SLUICE_EMBEDDED_NAMESRV_LISTEN=" + addrs[2]}, env...),
		ready: regexp.MustCompile(`serving on (\S+) \(nameserver (\S+),`)}, nil
}

// newAPI is orders-api on a free port: Match[1] is its address once started.
func newAPI(binDir, dir, ns, dsn string) *proc {
	return &proc{name: "orders-api", bin: filepath.Join(binDir, "orders-api"), log: filepath.Join(dir, "orders-api.log"),
		args: []string{"-n", ns, "-listen", "127.0.0.1:0", "-db", dsn}, ready: regexp.MustCompile(`serving on (\S+)`)}
}

func newWorker(binDir, dir, ns, dsn string, rate int) *proc {
	return &proc{name: "orders-worker", bin: filepath.Join(binDir, "orders-worker"), log: filepath.Join(dir, "orders-worker.log"),
		args: []string{"-n", ns, "-db", dsn, "-rate", fmt.Sprint(rate)}, ready: regexp.MustCompile(`consuming`)}
}

// build compiles mqbroker (in the main module, whose go.sum covers the
// broker) and the example's two programs into dir.
func build(ctx context.Context, dir string) error {
	mod, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	for _, b := range []struct{ root, pkg string }{
		{filepath.Join(mod, "..", ".."), "./cmd/mqbroker"},
		{mod, "./cmd/orders-api"},
		{mod, "./cmd/orders-worker"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", dir, b.pkg)
		cmd.Dir = b.root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s (or give -bin): %v: %s", b.pkg, err, out)
		}
	}
	return nil
}

// moduleDir is examples/orders: from this file's path, or, built with
// -trimpath, from the go.mod of the current directory.
func moduleDir(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", ".."), nil
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	dir := filepath.Dir(strings.TrimSpace(string(out)))
	if _, serr := os.Stat(filepath.Join(dir, "cmd", "orders-api")); err != nil || serr != nil {
		return "", errors.New("cannot find examples/orders to build the programs: run flashsale inside it, or give -bin")
	}
	return dir, nil
}
