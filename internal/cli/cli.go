// Package cli holds what Sluice's binaries share to talk to their users.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses of the binaries.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// OneLine joins the lines of a (possibly joined) error with "; ", so that
// every failure is reported on one line.
func OneLine(err error) string {
	var parts []string
	for line := range strings.SplitSeq(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "; "), ":; ", ": ")
}

// Parse parses args into fs, a flag set that reports nothing itself. On -h
// it prints usage to stdout; a bad flag or a stray argument is reported on
// stderr in one line naming the command. It reports whether to go on and,
// when not, the exit status (ExitOK after -h, ExitUsage otherwise).
func Parse(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (int, bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	name := fs.Name()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return ExitOK, false
		}
		fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", name, err, name)
		return ExitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q (see %s -h)\n", name, fs.Arg(0), name)
		return ExitUsage, false
	}
	return ExitOK, true
}
