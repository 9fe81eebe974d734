package docstest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/freeport"
	"github.com/sluicemq/sluice/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the key tables of docs/configuration.md from conf")

// root is the repository; bin holds the binaries built from it.
var root, bin string

var binaries = []string{"mqbroker", "mqnamesrv", "mqadmin", "mqbench", "mqcontroller"}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = filepath.Abs("../../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if bin, err = os.MkdirTemp("", "docstest"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, "./cmd/"+b)
	}
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "docstest: go build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// ---- what the binaries accept ----

type flagKind int

const (
	unknownFlag flagKind = iota
	boolFlag
	valueFlag
)

// oracle answers what each binary accepts, asking the binaries built from
// this tree (their own flag sets, never their hand-written help).
type oracle struct {
	mu        sync.Mutex
	probed    map[string]flagKind            // "mqbroker --flag" → kind
	admin     map[string]map[string]flagKind // mqadmin command ("" = root) → flag → kind
	benchMode map[string]map[string]flagKind // mqbench mode → flag → kind
}

var theOracle = &oracle{probed: map[string]flagKind{}}

func runBin(name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, filepath.Join(bin, name), args...).CombinedOutput()
	return string(out)
}

// goFlag asks a binary on Go's flag package (mqbroker, mqnamesrv,
// mqcontroller) about one flag: "-NAME x -h" stops with "not defined" for an
// unknown flag, with "unexpected argument" for a boolean one (x is then an
// argument), and otherwise takes x as the value and stops at -h (or at x's
// parse error). Nothing is ever started.
func (o *oracle) goFlag(binary, name string) flagKind {
	if name == "h" || name == "help" {
		return boolFlag
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k := binary + " -" + name
	if kind, ok := o.probed[k]; ok {
		return kind
	}
	out := runBin(binary, "-"+name, "x", "-h")
	kind := valueFlag
	switch {
	case strings.Contains(out, "flag provided but not defined"):
		kind = unknownFlag
	case strings.Contains(out, `unexpected argument "x"`):
		kind = boolFlag
	}
	o.probed[k] = kind
	return kind
}

var (
	cobraFlag = regexp.MustCompile(`^\s+(?:-(\S), )?--([\w-]+)(?: (\S+))?(?:\s{2,}|$)`)
	goDefault = regexp.MustCompile(`^  -(\S+)(.*)$`)
	// cobraCommand is a command line of cobra's help: "  name   Short".
	cobraCommand = regexp.MustCompile(`^  ([a-zA-Z][\w-]*)\s+\S`)
)

// adminFlags returns mqadmin's commands ("" = the root) and, for command,
// its flags from cobra's help (generated from the command's flag set).
func (o *oracle) adminFlags(command string) (map[string]flagKind, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.admin == nil {
		o.admin = map[string]map[string]flagKind{}
		section := ""
		o.admin[""] = map[string]flagKind{}
		for line := range strings.SplitSeq(runBin("mqadmin", "--help"), "\n") {
			switch {
			case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
				section = line
			case section == "Flags:" || section == "Global Flags:":
				addCobraFlag(o.admin[""], line)
			case section != "Usage:" && section != "Examples:" && section != "Aliases:":
				// Command groups ("Topics:", ..., "Additional Commands:").
				if m := cobraCommand.FindStringSubmatch(line); m != nil {
					o.admin[m[1]] = nil
				}
			}
		}
		if len(o.admin) < 10 {
			panic("docstest: mqadmin --help lists no commands") // INVARIANT: the help format is cobra's
		}
	}
	flags, ok := o.admin[command]
	if !ok {
		return nil, false
	}
	if flags == nil {
		flags = map[string]flagKind{}
		for line := range strings.SplitSeq(runBin("mqadmin", command, "--help"), "\n") {
			addCobraFlag(flags, line)
		}
		o.admin[command] = flags
	}
	return flags, true
}

func addCobraFlag(flags map[string]flagKind, line string) {
	m := cobraFlag.FindStringSubmatch(line)
	if m == nil {
		return
	}
	kind := boolFlag
	if m[3] != "" {
		kind = valueFlag
	}
	flags[m[2]] = kind
	if m[1] != "" {
		flags[m[1]] = kind
	}
}

// benchFlags returns mqbench's flags for mode from its -h (Go's
// PrintDefaults of the mode's flag set); false for an unknown mode.
func (o *oracle) benchFlags(mode string) (map[string]flagKind, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.benchMode == nil {
		o.benchMode = map[string]map[string]flagKind{}
		// "usage: mqbench produce|consume|e2e [...]"
		out := runBin("mqbench")
		m := regexp.MustCompile(`usage: mqbench (\S+)`).FindStringSubmatch(out)
		if m == nil {
			panic("docstest: mqbench names no modes: " + out) // INVARIANT: parseOptions' usage line
		}
		for mode := range strings.SplitSeq(m[1], "|") {
			flags := map[string]flagKind{}
			for line := range strings.SplitSeq(runBin("mqbench", mode, "-h"), "\n") {
				if d := goDefault.FindStringSubmatch(line); d != nil {
					kind := boolFlag
					if t := strings.TrimSpace(strings.SplitN(d[2], "\t", 2)[0]); t != "" {
						kind = valueFlag
					}
					flags[d[1]] = kind
				}
			}
			flags["h"], flags["help"] = boolFlag, boolFlag
			o.benchMode[mode] = flags
		}
	}
	flags, ok := o.benchMode[mode]
	return flags, ok
}

// ---- reading the docs ----

type block struct {
	file string
	line int // of the first line of the block's text
	lang string
	text string
}

var fence = regexp.MustCompile("^\\s*```\\s*([\\w-]*)")

// blocks returns the fenced blocks of a Markdown file.
func blocks(file, text string) []block {
	var out []block
	var cur *block
	var lines []string
	for i, line := range strings.Split(text, "\n") {
		m := fence.FindStringSubmatch(line)
		switch {
		case m != nil && cur == nil:
			cur = &block{file: file, line: i + 2, lang: m[1]}
			lines = nil
		case m != nil:
			cur.text = strings.Join(lines, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, line)
		}
	}
	return out
}

func isShell(lang string) bool {
	return lang == "sh" || lang == "bash" || lang == "console" || lang == "shell"
}

type token struct {
	s    string
	op   bool
	line int
}

// tokenize splits shell text into words and operators (newline, ;, |, &,
// (, ), redirections), dropping comments and joining continued lines. A
// placeholder like <clientId> is a word.
func tokenize(src string, line int) []token {
	var out []token
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			out = append(out, token{s: w.String(), line: line})
			w.Reset()
			inWord = false
		}
	}
	rs := []rune(src)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\' && i+1 < len(rs) && rs[i+1] == '\n':
			i++
			line++
		case c == '\\' && i+1 < len(rs):
			w.WriteRune(rs[i+1])
			inWord = true
			i++
		case c == '\n':
			flush()
			out = append(out, token{s: ";", op: true, line: line})
			line++
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			for i+1 < len(rs) && rs[i+1] != '\n' {
				i++
			}
		case c == '\'':
			inWord = true
			for i++; i < len(rs) && rs[i] != '\''; i++ {
				w.WriteRune(rs[i])
			}
		case c == '"':
			inWord = true
			for i++; i < len(rs) && rs[i] != '"'; i++ {
				if rs[i] == '\\' && i+1 < len(rs) {
					i++
				}
				w.WriteRune(rs[i])
			}
		case c == '$' && i+1 < len(rs) && rs[i+1] == '(':
			depth := 0
			for ; i < len(rs); i++ {
				w.WriteRune(rs[i])
				if rs[i] == '(' {
					depth++
				} else if rs[i] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			inWord = true
		case c == '<' && i+1 < len(rs) && isPlaceholderStart(rs[i+1]):
			j := i + 1
			for j < len(rs) && rs[j] != '>' && rs[j] != ' ' && rs[j] != '\n' {
				j++
			}
			if j < len(rs) && rs[j] == '>' {
				w.WriteString(string(rs[i : j+1]))
				inWord = true
				i = j
				continue
			}
			fallthrough
		case strings.ContainsRune("|&;()<>", c):
			if (c == '<' || c == '>') && inWord && isDigits(w.String()) {
				w.Reset()
				inWord = false // 2>&1: the descriptor is no argument
			}
			flush()
			op := string(c)
			for i+1 < len(rs) && strings.ContainsRune("|&<>", rs[i+1]) && (rs[i+1] == c || c == '>' || c == '<') {
				i++
				op += string(rs[i])
			}
			out = append(out, token{s: op, op: true, line: line})
			if c == '>' || c == '<' {
				// The redirection's target is no command.
				for i+1 < len(rs) && (rs[i+1] == ' ' || rs[i+1] == '\t') {
					i++
				}
				for i+1 < len(rs) && !strings.ContainsRune(" \t\n|&;()", rs[i+1]) {
					i++
				}
			}
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	flush()
	return out
}

func isPlaceholderStart(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// shellText returns what a block runs: a console block's commands are
// its lines that start with "$ ".
func shellText(b block) string {
	if b.lang != "console" {
		return b.text
	}
	var lines []string
	for line := range strings.SplitSeq(b.text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "$ "); ok {
			lines = append(lines, rest)
		} else {
			lines = append(lines, "") // keep the line numbers
		}
	}
	return strings.Join(lines, "\n")
}

var envAssign = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)

// command is one of Sluice's binaries as a block runs it.
type command struct {
	name string
	args []string
	line int
}

// commands finds the Sluice commands of a shell block: mqbroker ...,
// ./bin/mqbroker ..., go run ./cmd/mqbroker ..., after any VAR=value.
func commands(b block) []command {
	var out []command
	toks := tokenize(shellText(b), b.line)
	for i := 0; i < len(toks); {
		j := i
		for j < len(toks) && !toks[j].op {
			j++
		}
		words := make([]string, 0, j-i)
		for _, t := range toks[i:j] {
			words = append(words, t.s)
		}
		if len(words) > 0 {
			if c, ok := sluiceCommand(words); ok {
				c.line = toks[i].line
				out = append(out, c)
			}
		}
		i = j + 1
	}
	return out
}

func sluiceCommand(words []string) (command, bool) {
	for len(words) > 0 && (envAssign.MatchString(words[0]) || slices.Contains([]string{"sudo", "nohup", "exec", "time", "env", "command", "!", "if", "then", "else", "until", "while", "do"}, words[0])) {
		words = words[1:]
	}
	if len(words) == 0 {
		return command{}, false
	}
	if words[0] == "go" && len(words) > 1 && words[1] == "run" {
		for k := 2; k < len(words); k++ {
			if name := path.Base(words[k]); strings.Contains(words[k], "cmd/") && slices.Contains(binaries, name) {
				return command{name: name, args: words[k+1:]}, true
			}
			if !strings.HasPrefix(words[k], "-") {
				break
			}
		}
		return command{}, false
	}
	if name := path.Base(words[0]); slices.Contains(binaries, name) {
		return command{name: name, args: words[1:]}, true
	}
	return command{}, false
}

// argWord strips the brackets of usage syntax ([-i <clientId> [-s]]).
func argWord(s string) string { return strings.Trim(s, "[]") }

// check returns the problems of one command: unknown subcommands and
// flags.
func (o *oracle) check(c command) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	type lookup func(name string) flagKind
	// walk checks the flags of args with look until the first word that is
	// no flag (or flag value), returning the rest.
	walk := func(args []string, look lookup, what string) []string {
		for k := 0; k < len(args); k++ {
			a := argWord(args[k])
			if a == "" || a == "..." || strings.HasPrefix(a, "$") {
				continue // NB: a variable may hold flags: unknown here
			}
			if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
				return args[k:]
			}
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			switch look(name) {
			case unknownFlag:
				bad("%s: no flag %s", what, a)
				return nil // NB: its value, if any, is no argument
			case valueFlag:
				if !hasValue {
					k++
				}
			}
		}
		return nil
	}
	switch c.name {
	case "mqbroker", "mqnamesrv", "mqcontroller":
		rest := walk(c.args, func(n string) flagKind { return o.goFlag(c.name, n) }, c.name)
		for _, a := range rest {
			if a := argWord(a); a != "" && a != "..." {
				bad("%s: unexpected argument %q (it takes flags only)", c.name, a)
				break
			}
		}
	case "mqbench":
		if len(c.args) == 0 {
			return nil
		}
		mode := c.args[0]
		flags, ok := o.benchFlags(mode)
		if !ok {
			if mode != "-h" && mode != "--help" {
				bad("mqbench: no mode %q", mode)
			}
			return problems
		}
		walk(c.args[1:], func(n string) flagKind { return flags[n] }, "mqbench "+mode)
	case "mqadmin":
		rootFlags, _ := o.adminFlags("")
		rest := walk(c.args, func(n string) flagKind { return rootFlags[n] }, "mqadmin")
		if len(rest) == 0 {
			return problems
		}
		sub := argWord(rest[0])
		if sub == "help" {
			return problems
		}
		flags, ok := o.adminFlags(sub)
		if !ok {
			bad("mqadmin: no command %q", sub)
			return problems
		}
		args := rest[1:]
		for len(args) > 0 {
			// NB: cobra takes flags after positional arguments too.
			args = walk(args, func(n string) flagKind { return flags[n] }, "mqadmin "+sub)
			if len(args) > 0 {
				args = args[1:]
			}
		}
	}
	return problems
}

// ---- what conf knows ----

type knowledge struct {
	keys     map[string]bool // every key path of every binary
	sections map[string]bool // first segments of dotted keys
	env      map[string]bool
}

var (
	sluiceVar = regexp.MustCompile(`\bSLUICE_[A-Z0-9_]*[A-Z0-9]`)
	inline    = regexp.MustCompile("`([^`\n]+)`")
	dotted    = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.([a-z0-9_|]+|\*))+\.?$`)
)

func know(t *testing.T) knowledge {
	t.Helper()
	k := knowledge{keys: map[string]bool{}, sections: map[string]bool{}, env: map[string]bool{}}
	for _, list := range [][]conf.Key{conf.BrokerKeys(), conf.NameserverKeys(), conf.ControllerKeys()} {
		for _, key := range list {
			k.keys[key.Path] = true
			k.env[key.Env] = true
			if first, _, ok := strings.Cut(key.Path, "."); ok {
				k.sections[first] = true
			}
		}
	}
	// The tools' own variables (SLUICE_ACCESS_KEY, ...) are the ones the
	// code reads: literals in cmd/, internal/cli, client/ and scripts/.
	for _, dir := range []string{"cmd", "internal/cli", "client", "scripts"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(p, "docstest") {
				return err
			}
			if ext := filepath.Ext(p); ext != ".go" && ext != ".sh" {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, v := range sluiceVar.FindAllString(string(data), -1) {
				k.env[v] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// keyKnown reports whether a key as the docs write it is one conf knows:
// a.b, a.b|c (each), a.* and a. (a prefix).
func (k knowledge) keyKnown(s string) bool {
	if prefix, ok := strings.CutSuffix(s, "*"); ok {
		return k.hasPrefix(prefix)
	}
	if strings.HasSuffix(s, ".") {
		return k.hasPrefix(s)
	}
	dot := strings.LastIndex(s, ".")
	for alt := range strings.SplitSeq(s[dot+1:], "|") {
		if !k.keys[s[:dot+1]+alt] {
			return false
		}
	}
	return true
}

func (k knowledge) hasPrefix(p string) bool {
	for key := range k.keys {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// checkText returns the problems of a Markdown text: its shell blocks'
// commands, its SLUICE_ variables and its config keys (in code spans, and
// the keys of YAML blocks that are config files).
func checkText(t *testing.T, o *oracle, k knowledge, file, text string) []string {
	var problems []string
	bad := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", file, line, fmt.Sprintf(format, args...)))
	}
	for _, b := range blocks(file, text) {
		switch {
		case isShell(b.lang):
			for _, c := range commands(b) {
				for _, p := range o.check(c) {
					bad(c.line, "%s", p)
				}
			}
		case b.lang == "yaml":
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(b.text), &doc); err != nil {
				bad(b.line, "YAML block does not parse: %v", err)
				continue
			}
			if _, isACL := doc["accounts"]; isACL {
				continue
			}
			for _, key := range flatten(doc, "") {
				if !k.keys[key] {
					bad(b.line, "config key %s: conf has no such key", key)
				}
			}
		}
	}
	for i, line := range strings.Split(text, "\n") {
		for _, v := range sluiceVar.FindAllString(line, -1) {
			if !k.env[v] {
				bad(i+1, "%s: no such variable (conf's keys give SLUICE_ + the key path)", v)
			}
		}
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			s := m[1]
			if !dotted.MatchString(s) {
				continue
			}
			if first, _, _ := strings.Cut(s, "."); k.sections[first] && !k.keyKnown(s) {
				bad(i+1, "config key %s: conf has no such key", s)
			}
		}
	}
	return problems
}

func flatten(m map[string]any, prefix string) []string {
	var out []string
	for key, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out = append(out, flatten(sub, prefix+key+".")...)
			continue
		}
		out = append(out, prefix+key)
	}
	sort.Strings(out)
	return out
}

func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// TestDocs checks every command, flag, SLUICE_ variable and config key
// README.md and docs/*.md show.
func TestDocs(t *testing.T) {
	k := know(t)
	commandsSeen := 0
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, b := range blocks(rel, string(data)) {
			if isShell(b.lang) {
				commandsSeen += len(commands(b))
			}
		}
		for _, p := range checkText(t, theOracle, k, rel, string(data)) {
			t.Error(p)
		}
	}
	if commandsSeen < 20 {
		t.Errorf("only %d Sluice commands found in the docs' shell blocks: is the parser broken?", commandsSeen)
	}
}

// TestDocs_CatchesMistakes proves the check bites: a renamed flag, an
// unknown subcommand or mode, a misspelt variable or key each fail it,
// while the same lines spelt right pass.
func TestDocs_CatchesMistakes(t *testing.T) {
	k := know(t)
	good := "```sh\n" +
		"SLUICE_STORE_FLUSH=sync go run ./cmd/mqbroker --store-dir ./data --flush sync &\n" +
		"mqnamesrv --listen 127.0.0.1:9876 --controller --controller-id n0\n" +
		"mqadmin -n 127.0.0.1:9876 updateTopic -t orders -c DefaultCluster -r 8 -w 8 # comment --nope\n" +
		"mqadmin -n 127.0.0.1:9876 consumerStatus -g order-workers [-i <clientId> [-s]]\n" +
		"mqbench produce -n 127.0.0.1:9876 -t bench --size 1024 \\\n  --producers 4 --duration 10s 2>&1 | tee out\n" +
		"mqcontroller --listen 127.0.0.1:9878 --controller-peers \"n0=a;n1=b\"\n" +
		"```\nThe key `store.flush`, `tls.*` and `controller.raft_tls.cert|key|ca`.\n" +
		"```yaml\nstore:\n  flush: sync\n```\n"
	if p := checkText(t, theOracle, k, "good.md", good); len(p) > 0 {
		t.Fatalf("right lines reported: %q", p)
	}
	for _, tc := range []struct{ doc, want string }{
		{"```sh\ngo run ./cmd/mqbroker --store-directory ./data\n```\n", "mqbroker: no flag --store-directory"},
		{"```sh\nmqbroker --flush sync --console-readonly\n```\n", "no flag --console-readonly"},
		{"```console\n$ mqnamesrv --listn 127.0.0.1:9876\nlistening\n```\n", "mqnamesrv: no flag --listn"},
		{"```bash\nmqcontroller --controller-peer x\n```\n", "no flag --controller-peer"},
		{"```sh\nmqadmin -n 127.0.0.1:9876 updateTopic --topik orders\n```\n", "mqadmin updateTopic: no flag --topik"},
		{"```sh\nmqadmin --nameserver 127.0.0.1:9876 topicList\n```\n", "mqadmin: no flag --nameserver"},
		{"```sh\nmqadmin -n 127.0.0.1:9876 listTopics\n```\n", `mqadmin: no command "listTopics"`},
		{"```sh\nmqbench produce --bogus-flag 3\n```\n", "mqbench produce: no flag --bogus-flag"},
		{"```sh\nmqbench flood -t x\n```\n", `mqbench: no mode "flood"`},
		{"```sh\nSLUICE_STORE_FLUSHH=sync mqbroker\n```\n", "SLUICE_STORE_FLUSHH: no such variable"},
		{"Set `store.flushing` to sync.\n", "config key store.flushing"},
		{"```yaml\nstore:\n  flush_mode: sync\n```\n", "config key store.flush_mode"},
	} {
		p := checkText(t, theOracle, k, "bad.md", tc.doc)
		if len(p) != 1 || !strings.Contains(p[0], tc.want) {
			t.Errorf("%q: got %q, want one problem with %q", tc.doc, p, tc.want)
		}
	}
}

// ---- the configuration guide's key tables ----

// flagOf maps each binary's keys to the flag that sets them (the fs.Visit
// switches of cmd/*); TestConfigTables checks every flag exists and every
// key is conf's.
var flagOf = map[string]map[string]string{
	"mqbroker": {
		"broker_name": "--broker-name", "cluster_name": "--cluster", "broker_id": "--broker-id", "role": "--role",
		"advertise": "--advertise", "ha.listen": "--ha-listen", "ha.advertise": "--ha-advertise",
		"controller": "--controller", "listen": "--listen", "namesrv_addr": "-n", "metrics_listen": "--metrics-listen",
		"console.listen": "--console-listen", "console.read_only": "--console-read-only",
		"console.allowed_hosts": "--console-allowed-hosts", "grpc.listen": "--grpc-listen",
		"store.dir": "--store-dir", "store.flush": "--flush", "acl.file": "--acl", "acl.access_key": "--access-key",
		"acl.secret_key": "--secret-key", "tls.mode": "--tls-mode", "tls.cert": "--tls-cert", "tls.key": "--tls-key",
		"tls.client_ca": "--tls-client-ca", "pprof": "--pprof",
		"namesrv_tls.enabled": "--namesrv-tls", "namesrv_tls.ca_file": "--namesrv-tls-ca",
		"namesrv_tls.insecure": "--namesrv-tls-insecure", "controller_tls.enabled": "--controller-tls",
		"controller_tls.ca_file": "--controller-tls-ca", "controller_tls.insecure": "--controller-tls-insecure",
	},
	"mqnamesrv": {
		"listen": "--listen", "metrics_listen": "--metrics-listen", "controller.enable": "--controller",
		"controller.id": "--controller-id", "controller.peers": "--controller-peers", "controller.dir": "--controller-dir",
		"controller.raft_tls.cert": "--raft-tls-cert", "controller.raft_tls.key": "--raft-tls-key",
		"controller.raft_tls.ca": "--raft-tls-ca", "console.listen": "--console-listen",
		"console.read_only": "--console-read-only", "console.allowed_hosts": "--console-allowed-hosts",
		"acl.file": "--acl", "tls.mode": "--tls-mode", "tls.cert": "--tls-cert", "tls.key": "--tls-key",
		"tls.client_ca": "--tls-client-ca", "pprof": "--pprof",
	},
	"mqcontroller": {
		"listen": "--listen", "controller.id": "--controller-id", "controller.peers": "--controller-peers",
		"controller.dir": "--controller-dir", "controller.raft_tls.cert": "--raft-tls-cert",
		"controller.raft_tls.key": "--raft-tls-key", "controller.raft_tls.ca": "--raft-tls-ca",
		"acl.file": "--acl", "tls.mode": "--tls-mode", "tls.cert": "--tls-cert", "tls.key": "--tls-key",
		"tls.client_ca": "--tls-client-ca",
	},
}

// meanings reads each key's comment from a sample config file.
func meanings(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(m *yaml.Node, prefix, inherited string)
	walk = func(m *yaml.Node, prefix, inherited string) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			key, val := m.Content[i], m.Content[i+1]
			c := comment(key.HeadComment + "\n" + key.LineComment + "\n" + val.LineComment)
			if i == 0 && c == "" {
				c = inherited
			}
			if val.Kind == yaml.MappingNode {
				walk(val, prefix+key.Value+".", c)
				continue
			}
			out[prefix+key.Value] = c
		}
	}
	if len(n.Content) > 0 {
		walk(n.Content[0], "", "")
	}
	return out
}

func comment(s string) string {
	var words []string
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		if line != "" {
			words = append(words, line)
		}
	}
	return strings.ReplaceAll(strings.Join(words, " "), "|", `\|`)
}

func keyTable(t *testing.T, binary string, keys []conf.Key, sample string) string {
	t.Helper()
	means := meanings(t, sample)
	var sb strings.Builder
	sb.WriteString("| key | default | variable | flag | meaning |\n|---|---|---|---|---|\n")
	nsMeans := meanings(t, "conf/namesrv.yaml")
	known := map[string]bool{}
	prevParent := ""
	for _, k := range keys {
		known[k.Path] = true
		f := flagOf[binary][k.Path]
		if f != "" {
			f = "`" + f + "`"
		}
		meaning := means[k.Path]
		if rest, ok := strings.CutPrefix(k.Path, "embedded_namesrv."); ok && meaning == "" {
			meaning = nsMeans[rest] // the embedded nameserver's keys are mqnamesrv's
		}
		parent := k.Path[:strings.LastIndex(k.Path, ".")+1]
		if meaning == "" && parent == prevParent {
			meaning = "(with the key above)" // NB: one comment in the sample file covers both
		}
		prevParent = parent
		fmt.Fprintf(&sb, "| `%s` | `%s` | `%s` | %s | %s |\n", k.Path, k.Default, k.Env, f, meaning)
	}
	for key, f := range flagOf[binary] {
		if !known[key] {
			t.Errorf("%s: flagOf names key %s, which conf does not know", binary, key)
		}
		if theOracle.goFlag(binary, strings.TrimLeft(f, "-")) == unknownFlag {
			t.Errorf("%s: flagOf names flag %s, which it does not have", binary, f)
		}
	}
	return sb.String()
}

// TestConfigTables: docs/configuration.md holds, between its markers, the
// key tables generated from conf's key lists (every key, its default, its
// SLUICE_ variable, its flag and its comment in the sample file). -update
// writes them.
func TestConfigTables(t *testing.T) {
	file := filepath.Join(root, "docs", "configuration.md")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, tc := range []struct {
		binary, sample string
		keys           []conf.Key
	}{
		{"mqbroker", "conf/broker.yaml", conf.BrokerKeys()},
		{"mqnamesrv", "conf/namesrv.yaml", conf.NameserverKeys()},
		{"mqcontroller", "conf/namesrv.yaml", conf.ControllerKeys()},
	} {
		begin, end := "<!-- keys:"+tc.binary+" -->\n", "<!-- end keys:"+tc.binary+" -->"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Errorf("docs/configuration.md lacks the markers %q and %q", strings.TrimSpace(begin), end)
			continue
		}
		want := keyTable(t, tc.binary, tc.keys, tc.sample)
		if got := doc[i+len(begin) : j]; got != want {
			if *update {
				doc = doc[:i+len(begin)] + want + doc[j:]
				continue
			}
			t.Errorf("docs/configuration.md: the %s key table is stale: go test ./cmd/internal/docstest -run TestConfigTables -update", tc.binary)
		}
	}
	if *update && doc != string(data) {
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ---- the guides' examples, run as written ----

var exampleMark = regexp.MustCompile(`(?m)^<!-- example: ([\w-]+) -->$`)

// examples returns the blocks marked <!-- example: NAME --> (the next
// fenced block after the mark).
func examples(t *testing.T) map[string]block {
	t.Helper()
	out := map[string]block{}
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		text := string(data)
		for _, m := range exampleMark.FindAllStringSubmatchIndex(text, -1) {
			name := text[m[2]:m[3]]
			line := strings.Count(text[:m[0]], "\n") + 1
			bs := blocks(rel, text[m[1]:])
			if len(bs) == 0 || !isShell(bs[0].lang) {
				t.Errorf("%s:%d: example %s has no shell block after it", rel, line, name)
				continue
			}
			b := bs[0]
			b.line += line
			out[name] = b
		}
	}
	return out
}

// freePorts returns a free port for each port an example names, each with
// the port after it free too (a broker's HA port is its listen port + 1),
// below the kernel's ephemeral range (testutil.FreePortPairs: a port picked
// by listening on port 0 is ephemeral, and in CI an outgoing connection of
// the race tests running beside took one as its source port before the
// controller example's broker bound it).
func freePorts(t *testing.T, ports []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, port := range testutil.FreePortPairs(t, len(ports)) {
		out[ports[i]] = strconv.Itoa(port)
	}
	return out
}

// TestFreePorts_BelowEphemeral: the ports an example is moved to, and the
// port after each, lie below the kernel's ephemeral range, where no
// outgoing connection takes them as its source port.
func TestFreePorts_BelowEphemeral(t *testing.T) {
	lo, hi := freeport.BelowEphemeral()
	if hi-lo < 1000 {
		t.Skipf("no room below the ephemeral range here (ports %d to %d)", lo, hi)
	}
	got := freePorts(t, []string{"9876", "10911", "10912"})
	seen := map[string]bool{}
	for p, port := range got {
		n, err := strconv.Atoi(port)
		if err != nil || n < lo || n >= hi {
			t.Errorf("port %s moved to %s: want %d <= port < %d", p, port, lo, hi)
		}
		if seen[port] {
			t.Errorf("port %s given twice", port)
		}
		seen[port] = true
	}
	if len(got) != 3 {
		t.Errorf("got %d ports for 3: %v", len(got), got)
	}
}

var loopbackPort = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)

// TestExamples runs each marked example of the guides as written, on free
// ports (each 127.0.0.1:PORT it names is moved to a free one) in a
// scratch directory whose bin/ holds the binaries this test built (the
// example's own "go build -o bin/ ..." line is not run again). An example
// must exit 0; every process it started is stopped afterwards.
func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters of processes")
	}
	exs := examples(t)
	if len(exs) < 2 {
		t.Fatalf("found %d marked examples, want the replication and controller ones", len(exs))
	}
	for name, b := range exs {
		t.Run(name, func(t *testing.T) {
			if err := runExample(t, b); err != nil {
				t.Fatalf("%s:%d: example %s failed: %v", b.file, b.line, name, err)
			}
		})
	}
}

// TestExamples_CatchesBrokenExample: an example that cannot work fails,
// and what it started is stopped all the same.
func TestExamples_CatchesBrokenExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	b := block{file: "bad.md", line: 1, lang: "sh", text: "bin/mqnamesrv --listen 127.0.0.1:9876 &\n" +
		"bin/mqadmin -n 127.0.0.1:9877 --timeout 1s topicList   # no nameserver there\n"}
	if err := runExample(t, b); err == nil || !strings.Contains(err.Error(), "127.0.0.1:") {
		t.Fatalf("a broken example passed or failed without its output: %v", err)
	}
}

// runExample runs one example as TestExamples says; the error holds the
// example's output.
func runExample(t *testing.T, b block) error {
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	var ports []string
	seen := map[string]bool{}
	for _, m := range loopbackPort.FindAllStringSubmatch(b.text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			ports = append(ports, m[1])
		}
	}
	moved := freePorts(t, ports)
	script := loopbackPort.ReplaceAllStringFunc(b.text, func(s string) string {
		return "127.0.0.1:" + moved[strings.TrimPrefix(s, "127.0.0.1:")]
	})
	var lines []string
	for line := range strings.SplitSeq(script, "\n") {
		if strings.HasPrefix(line, "go build -o bin/ ") {
			line = "# built by the test: " + line
		}
		lines = append(lines, line)
	}
	script = "set -e\n" + strings.Join(lines, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// NB: the output goes to a file: the example's background
	// processes would hold a pipe open past the script's end.
	logPath := filepath.Join(dir, "example.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err = cmd.Start(); err == nil {
		err = cmd.Wait()
		// NB: whatever the example left running, in its process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		out, _ := os.ReadFile(logPath)

		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// ---- links ----

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped,
// spaces as hyphens.
func slug(h string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// anchors returns the anchors of a Markdown file's headings (outside code
// blocks).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for line := range strings.SplitSeq(text, "\n") {
		if fence.MatchString(line) {
			inCode = !inCode
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil && !inCode {
			out[slug(m[1])] = true
		}
	}
	return out
}

// TestLinks: every relative link of README.md and docs/*.md names a file
// that exists and, with #anchor, a heading of it.
func TestLinks(t *testing.T) {
	texts := map[string]string{}
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		texts[file] = string(data)
	}
	links := 0
	for file, text := range texts {
		rel, _ := filepath.Rel(root, file)
		for i, line := range strings.Split(text, "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				name, anchor, _ := strings.Cut(target, "#")
				path := file
				if name != "" {
					path = filepath.Join(filepath.Dir(file), name)
				}
				data, ok := texts[path]
				if !ok {
					b, err := os.ReadFile(path)
					if err != nil {
						t.Errorf("%s:%d: link %s: no such file", rel, i+1, target)
						continue
					}
					data = string(b)
				}
				if anchor != "" && !anchors(data)[anchor] {
					t.Errorf("%s:%d: link %s: no heading with that anchor", rel, i+1, target)
				}
			}
		}
	}
	if links < 10 {
		t.Errorf("only %d links found: is the parser broken?", links)
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"The controller (automatic failover)":            "the-controller-automatic-failover",
		"Exactly-once publishing (the duplicate window)": "exactly-once-publishing-the-duplicate-window",
		"Security: ACL and TLS":                          "security-acl-and-tls",
		"`mqadmin`":                                      "mqadmin",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
	if a := anchors("# Top\n```sh\n# not a heading\n```\n## Sub part\n"); !a["top"] || !a["sub-part"] || a["not-a-heading"] {
		t.Errorf("anchors: %v", a)
	}
}
