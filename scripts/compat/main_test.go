package compat

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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// offsetDirEnv is where the client keeps broadcasting offsets (spec 8.1).
// The client reads it once, when its consumer package initialises, so
// TestMain sets it by running the test binary again as a child.
const offsetDirEnv = "rocketmq.client.localOffsetStoreDir"

// The processes under test, started once for the package by TestMain.
var (
	nameserverAddr string
	brokerAddr     string
	brokerLog      string // the broker's log file (v5_test reads its gRPC address)
	workDir        string // the run's temporary directory, removed at its end
	mqadmin        string // path of the mqadmin binary built with the servers
	// nameservers is what applications pass to WithNameServer.
	nameservers primitive.NamesrvAddr
	// topicAdmin creates the tests' topics. It is the only user of the
	// client's default instance: Admin.Close shuts that shared client
	// down, so everything else runs under its own instance name.
	topicAdmin admin.Admin
)

const brokerName = "broker-compat"

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if os.Getenv(offsetDirEnv) == "" {
		return rerunWithOffsetDir()
	}
	rlog.SetLogLevel("error")

	work, err := os.MkdirTemp("", "sluice-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	defer os.RemoveAll(work)
	workDir = work
	ns, br, err := startServers(work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		stopAll(ns, br)
		return 1
	}
	nameserverAddr, brokerAddr, brokerLog = ns.addr, br.addr, br.logPath
	nameservers = primitive.NamesrvAddr{nameserverAddr}
	topicAdmin, err = admin.NewAdmin(append(adminSecurity(), admin.WithResolver(primitive.NewPassthroughResolver(nameservers)))...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat: admin:", err)
		stopAll(ns, br)
		return 1
	}

	// NB: the official admin signs only once its client has registered the
	// ACL interceptor, which CreateTopic never does and
	// GetAllSubscriptionGroup does (each call adds one more: call it once).
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	_, err = topicAdmin.GetAllSubscriptionGroup(ctx, brokerAddr, 5*time.Second)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat: admin: signing:", err)
		stopAll(ns, br)
		return 1
	}

	code := m.Run()

	_ = topicAdmin.Close()
	if err := stopAll(ns, br); err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		code = 1
	}
	if code != 0 {
		ns.dumpLog(os.Stderr)
		br.dumpLog(os.Stderr)
	}
	return code
}

// rerunWithOffsetDir runs this test binary again with offsetDirEnv set to
// a temporary directory and returns its exit status.
func rerunWithOffsetDir() int {
	dir, err := os.MkdirTemp("", "sluice-compat-offsets-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), offsetDirEnv+"="+dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	setParentDeathSignal(cmd)
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "compat: running the tests with", offsetDirEnv, "set:", err)
		return 1
	}
}

// securityArgs and securityEnv are the servers' ACL (and TLS) flags and
// the broker's account, for the brokers tests start of their own.
var securityArgs, securityEnv []string

// startServers builds mqnamesrv and mqbroker from the parent module and
// starts them on free loopback ports, the broker registering with the
// nameserver and storing under work/store.
func startServers(work string) (ns, br *process, err error) {
	bin, err := serverBinaries(work)
	if err != nil {
		return nil, nil, err
	}

	mqadmin = filepath.Join(bin, "mqadmin")
	aclFile := filepath.Join(work, "plain_acl.yml")
	if err := os.WriteFile(aclFile, []byte(compatACL), 0o600); err != nil {
		return nil, nil, err
	}
	securityArgs = []string{"--acl", aclFile}
	securityEnv = []string{"SLUICE_ACL_ACCESS_KEY=" + adminCreds.AccessKey, "SLUICE_ACL_SECRET_KEY=" + adminCreds.SecretKey}
	if overTLS {
		securityArgs = append(securityArgs, "--tls-mode", "enforcing")
		securityEnv = append(securityEnv, "SLUICE_NAMESRV_TLS_ENABLED=true", "SLUICE_NAMESRV_TLS_INSECURE=true")
	}
	security := securityArgs
	// NB: half messages are checked every second (v5_tx_test's check-back
	// waits for one), those older than the default 6 s.
	brokerEnv := append([]string{"SLUICE_STORE_SEGMENT_SIZE=67108864", "SLUICE_TRANSACTION_CHECK_INTERVAL=1s"}, securityEnv...)
	ns, err = start("mqnamesrv", filepath.Join(bin, "mqnamesrv"), filepath.Join(work, "mqnamesrv.log"),
		regexp.MustCompile(`msg="mqnamesrv: listening" addr=(\S+)`), nil,
		append([]string{"--listen", "127.0.0.1:0"}, security...)...)
	if err != nil {
		return nil, nil, err
	}
	br, err = start("mqbroker", filepath.Join(bin, "mqbroker"), filepath.Join(work, "mqbroker.log"),
		regexp.MustCompile(`serving on (\S+) \(nameserver`),
		// A small segment keeps the preallocated store file small.
		brokerEnv,
		append([]string{"-n", ns.addr, "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(work, "store"),
			"--flush", "async", "--broker-name", brokerName, "--cluster", "DefaultCluster"}, security...)...)
	return ns, br, err
}

// prebuiltEnv names a directory that holds mqnamesrv, mqbroker, mqadmin and
// mqcontroller already built from the parent module: scripts/test.sh
// builds them once for both of its passes (plain and TLS). Unset, the
// tests build them.
const prebuiltEnv = "SLUICE_COMPAT_BIN"

// serverBinaries returns the directory of the binaries under test: the
// prebuilt one, or work/bin with mqnamesrv, mqbroker and mqadmin built there.
func serverBinaries(work string) (string, error) {
	if dir := os.Getenv(prebuiltEnv); dir != "" {
		for _, b := range []string{"mqnamesrv", "mqbroker", "mqadmin", "mqcontroller"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return "", fmt.Errorf("%s=%s: %w", prebuiltEnv, dir, err)
			}
		}
		return filepath.Abs(dir)
	}
	bin := filepath.Join(work, "bin")
	if err := buildTools(bin, "mqnamesrv", "mqbroker", "mqadmin"); err != nil {
		return "", err
	}
	return bin, nil
}

// buildTools builds the named commands of the parent module (cmd/NAME)
// into dir.
func buildTools(dir string, names ...string) error {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "github.com/sluicemq/sluice/cmd/"+n)
	}
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building %v in %s: %v\n%s", names, root, err, out)
	}
	return nil
}

// controllerBinary returns the path of mqcontroller beside the other
// binaries, building it there (once) unless it was prebuilt.
func controllerBinary() (string, error) {
	bin := filepath.Join(filepath.Dir(mqadmin), "mqcontroller")
	if os.Getenv(prebuiltEnv) != "" {
		return bin, nil
	}
	return bin, buildController()
}

var buildController = sync.OnceValue(func() error { return buildTools(filepath.Dir(mqadmin), "mqcontroller") })

// process is a server started by the tests.
type process struct {
	name    string
	addr    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has been waited for
	waitErr error
}

// start runs bin with args, its stdout and stderr going to logPath, and
// returns once a line of its output matches addrRE (the address is the
// first submatch).
func start(name, bin, logPath string, addrRE *regexp.Regexp, extraEnv []string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(serverEnv(), extraEnv...)
	cmd.Stdout, cmd.Stderr = pw, pw
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	pw.Close()
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	addrC := make(chan string, 1)
	go func() {
		defer logFile.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrC <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(logFile, pr)
		pr.Close()
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	select {
	case p.addr = <-addrC:
		return p, nil
	case <-p.exited:
		return p, fmt.Errorf("%s exited before serving: %v (log %s)", name, p.waitErr, logPath)
	case <-time.After(30 * time.Second):
		return p, fmt.Errorf("%s did not print its address within 30s (log %s)", name, logPath)
	}
}

// serverEnv is this process's environment without the settings that would
// change how the servers under test are configured.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SLUICE_") || strings.HasPrefix(kv, "NAMESRV_ADDR=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// stop asks the process to shut down with SIGTERM and reports an unclean
// exit; after 20 s it kills it.
func (p *process) stop() error {
	if p == nil {
		return nil
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited early: %v", p.name, p.waitErr)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("%s: unclean shutdown: %v", p.name, p.waitErr)
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within 20s of SIGTERM", p.name)
	}
}

// stopAll stops the broker before the nameserver.
func stopAll(ns, br *process) error {
	return errors.Join(br.stop(), ns.stop())
}

// dumpLog writes the last lines of the process's log, for failures.
func (p *process) dumpLog(w io.Writer) {
	if p == nil {
		return
	}
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 200 {
		lines = lines[len(lines)-200:]
	}
	fmt.Fprintf(w, "---- %s log (last %d lines) ----\n%s\n", p.name, len(lines), strings.Join(lines, "\n"))
}

// waitContext is a safety bound for one client call or wait.
func waitContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
