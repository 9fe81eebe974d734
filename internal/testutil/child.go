package testutil

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// KillChild runs the test binary again as a child process running only the
// test named name, with env added to the environment. The child must print
// "ready" on a line of its own once it is set up, then a line for each
// operation it has done (an acknowledgement). KillChild lets it run for d
// after its first such line, so that every kill lands after at least one
// acknowledgement, kills it with SIGKILL (a crash), and returns the complete
// lines it printed after "ready": a line cut by the kill is dropped.
func KillChild(t testing.TB, name string, env []string, d time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, first := make(chan struct{}), make(chan struct{})
	done := make(chan []string, 1)
	go func() {
		var lines []string
		br := bufio.NewReader(stdout)
		if line, err := br.ReadString('\n'); err == nil && line == "ready\n" {
			close(ready)
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			if lines = append(lines, line); len(lines) == 1 {
				close(first)
			}
		}
		done <- lines
	}()
	for _, w := range []struct {
		c    chan struct{}
		what string
	}{{ready, "get ready"}, {first, "acknowledge anything"}} {
		select {
		case <-w.c:
		case <-time.After(60 * time.Second):
			// NB: SIGQUIT first: the Go runtime prints every goroutine's
			// stack to stderr, which shows where the child is stuck.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			quit := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
			cmd.Wait()
			quit.Stop()
			out := stderr.String()
			if len(out) > 64<<10 {
				out = "..." + out[len(out)-64<<10:]
			}
			t.Fatalf("child %s did not %s in 60 s; its stderr (with its goroutines' stacks): %s", name, w.what, out)
		}
	}
	time.Sleep(d)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lines := <-done
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Exited() {
		t.Fatalf("child %s was not killed (it ended with %v); stderr: %s", name, err, stderr.String())
	}
	return lines
}
