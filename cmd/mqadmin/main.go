// Command mqadmin is Sluice's admin CLI. Its commands and flags are
// RocketMQ's, so that an operator's muscle memory works:
//
//	mqadmin -n 127.0.0.1:9876 updateTopic -t orders -c DefaultCluster -r 8 -w 8
//	mqadmin -n 127.0.0.1:9876 consumerProgress -g orders-consumer
//	mqadmin -n 127.0.0.1:9876 --json topicStatus -t orders
//
// The nameserver list comes from -n ("ip:port;ip:port") or the
// NAMESRV_ADDR environment variable. Output is aligned tables for people,
// or JSON with --json for scripts.
//
// Exit status: 0 on success; 1 when a nameserver or broker could not be
// reached or answered with an error (the one-line message on stderr names
// the server asked, the request, the answer's code name and remark); 2 for
// a bad command line (unknown command or flag, missing or invalid flag
// value), with the command's usage on stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/internal/cli"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad command line: exit status 2, with usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// runError is a failure while running a command: exit status 1.
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// run is main with its inputs and outputs passed in; it returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, args: args}
	defer a.close()
	root := newRoot(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var re runError
	if errors.As(err, &re) {
		fmt.Fprintf(stderr, "mqadmin: %s: %s\n", cmd.Name(), oneLine(re.err.Error()))
		return exitError
	}
	fmt.Fprintf(stderr, "mqadmin: %s\n\n", oneLine(err.Error()))
	if cmd == nil {
		cmd = root
	}
	fmt.Fprint(stderr, cmd.UsageString())
	return exitUsage
}

// firstPositional returns the first argument that is neither one of the
// root's flags nor such a flag's value, if it names no command: a
// mistyped command ("" when there is none).
func firstPositional(root *cobra.Command, args []string) string {
	pf := root.PersistentFlags()
	for i := 0; i < len(args); i++ {
		arg := args[i]
		var f *pflag.Flag
		switch {
		case arg == "--":
			return ""
		case strings.HasPrefix(arg, "--"):
			if strings.Contains(arg, "=") {
				continue
			}
			f = pf.Lookup(arg[2:])
		case strings.HasPrefix(arg, "-") && len(arg) == 2:
			f = pf.ShorthandLookup(arg[1:])
		case strings.HasPrefix(arg, "-"):
			continue // NB: -nVALUE, or a flag of the command
		default:
			if c, _, err := root.Find([]string{arg}); err == nil && c != root {
				return ""
			}
			return arg
		}
		if f != nil && f.NoOptDefVal == "" {
			i++ // its value
		}
	}
	return ""
}

// oneLine folds a multi-line error (errors.Join) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ; ")), " ")
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "mqadmin [-n ip:port] [--json] COMMAND [flags]",
		Short: "Sluice admin tool (RocketMQ mqadmin commands)",
		Long: `mqadmin administers a Sluice (or RocketMQ 4.x) cluster with RocketMQ's
command names and flags. The nameserver list comes from -n "ip:port;ip:port"
or the NAMESRV_ADDR environment variable.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("no command given")
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVarP(&a.namesrvFlag, "namesrvAddr", "n", "", `nameserver addresses, "ip:port;ip:port" (default $NAMESRV_ADDR)`)
	pf.BoolVar(&a.json, "json", false, "print JSON instead of tables")
	pf.DurationVar(&a.timeout, "timeout", 5*time.Second, "timeout of each request to a nameserver or broker")
	pf.StringVar(&a.creds.AccessKey, "access-key", "", cli.CredentialsUsage)
	pf.StringVar(&a.creds.SecretKey, "secret-key", "", cli.SecretUsage)
	pf.BoolVar(&a.tls.Enabled, "tls", false, cli.TLSUsage)
	pf.StringVar(&a.tls.CAFile, "tls-ca", "", cli.TLSCAUsage)
	pf.BoolVar(&a.tls.Insecure, "tls-insecure", false, cli.TLSInsecureUsage)
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if problem := a.creds.Resolve(); problem != "" {
			return usagef("%s", problem)
		}
		var err error
		if a.tlsConfig, err = a.tls.Config(); err != nil {
			return usagef("%v", err)
		}
		return nil
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// NB: a mistyped command with flags reaches the root, which knows
		// none of them: the command, not the flag, is what is wrong.
		if c == root {
			if name := firstPositional(root, a.args); name != "" {
				return usagef("unknown command %q for \"mqadmin\" (mqadmin help lists them)", name)
			}
		}
		return usageError{msg: err.Error()}
	})

	groups := []struct {
		id, title string
		cmds      []*cobra.Command
	}{
		{"topic", "Topics:", topicCommands(a)},
		{"cluster", "Cluster:", clusterCommands(a)},
		{"group", "Consumer groups:", groupCommands(a)},
		{"message", "Messages:", messageCommands(a)},
		{"controller", "Controller mode:", controllerCommands(a)},
	}
	for _, g := range groups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, c := range g.cmds {
			c.GroupID = g.id
			if c.Args == nil {
				c.Args = noArgs
			}
			root.AddCommand(c)
		}
	}
	return root
}

// noArgs rejects positional arguments: every value goes with a flag.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q (values go with flags, e.g. -t TOPIC)", args[0])
	}
	return nil
}

// action adapts a command body to cobra: its errors are runtime errors
// (exit 1) unless they are usage errors (exit 2).
func action(fn func(ctx context.Context, cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		err := fn(cmd.Context(), cmd)
		var ue usageError
		if err == nil || errors.As(err, &ue) {
			return err
		}
		return runError{err: err}
	}
}

// required checks that each named flag was given.
func required(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		f := cmd.Flags().Lookup(n)
		if f != nil && !f.Changed {
			return usagef("missing flag -%s (--%s): %s", f.Shorthand, f.Name, f.Usage)
		}
	}
	return nil
}

// notBlank checks that none of the named flags was given as blank.
func notBlank(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && strings.TrimSpace(f.Value.String()) == "" {
			return usagef("-%s (--%s) is empty", f.Shorthand, f.Name)
		}
	}
	return nil
}

// oneOf checks that exactly one of the named flags was given.
func oneOf(cmd *cobra.Command, a, b string) error {
	fa, fb := cmd.Flags().Lookup(a), cmd.Flags().Lookup(b)
	switch {
	case fa.Changed && fb.Changed:
		return usagef("give either -%s (--%s) or -%s (--%s), not both", fa.Shorthand, fa.Name, fb.Shorthand, fb.Name)
	case !fa.Changed && !fb.Changed:
		return usagef("missing flag: give -%s (--%s) or -%s (--%s)", fa.Shorthand, fa.Name, fb.Shorthand, fb.Name)
	}
	return nil
}
