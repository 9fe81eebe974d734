// Package lint enforces the project's structural rules (STYLE.md 4.1 and
// 4.12) as tests: which packages may import what, typed atomics only, and no
// panics outside tests.
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sluicemq/sluice/"

var panicMsg = regexp.MustCompile(`^[a-z][a-z/]*: `)

// leftmostString returns the string literal an expression starts with.
func leftmostString(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.BasicLit:
		s, _ := strconv.Unquote(v.Value)
		return s
	case *ast.BinaryExpr:
		return leftmostString(v.X)
	}
	return ""
}

type goFile struct {
	pkg  string // directory relative to the repo root, e.g. "broker/store"
	path string
	test bool
	ast  *ast.File
	fset *token.FileSet
}

// repoFiles parses every Go file of the main module (the nested compat
// module excluded).
func repoFiles(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var files []goFile
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || name == "data") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		full, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		files = append(files, goFile{pkg: filepath.ToSlash(rel), path: path, test: strings.HasSuffix(path, "_test.go"), ast: full, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d Go files: wrong root?", len(files))
	}
	return files
}

func imports(f goFile) []string {
	var out []string
	for _, im := range f.ast.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		out = append(out, p)
	}
	return out
}

func isStd(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

func under(pkg string, dirs ...string) bool {
	for _, d := range dirs {
		if pkg == d || strings.HasPrefix(pkg, d+"/") {
			return true
		}
	}
	return false
}

// TestForbiddenImports checks the dependency rules of STYLE.md 4.1.
func TestForbiddenImports(t *testing.T) {
	for _, f := range repoFiles(t) {
		if f.test {
			continue
		}
		for _, im := range imports(f) {
			switch {
			case strings.HasPrefix(im, "github.com/spf13/viper") && !under(f.pkg, "conf"):
				t.Errorf("%s imports viper: only conf may", f.path)
			case strings.HasPrefix(im, "github.com/cloudwego/netpoll") && !under(f.pkg, "internal/remoting"):
				t.Errorf("%s imports netpoll: only internal/remoting may", f.path)
			case under(f.pkg, "commitlog", "internal/message", "internal/filter") && !isStd(im):
				t.Errorf("%s imports %s: %s uses the standard library only", f.path, im, f.pkg)
			case under(f.pkg, "consumequeue") && !isStd(im) && im != "golang.org/x/sys/unix":
				t.Errorf("%s imports %s: consumequeue uses the standard library (and x/sys) only", f.path, im)
			case under(f.pkg, "client") && (strings.HasPrefix(im, module+"broker") || strings.HasPrefix(im, module+"nameserver") ||
				strings.HasPrefix(im, module+"commitlog") || strings.HasPrefix(im, module+"consumequeue")):
				t.Errorf("%s imports %s: the client never imports server packages", f.path, im)
			case (strings.HasPrefix(im, module+"broker") || im == module+"nameserver") && !under(f.pkg, "broker", "nameserver", "cmd"):
				t.Errorf("%s imports %s: only cmd/* import broker and nameserver", f.path, im)
			}
		}
	}
}

// layerViolation says why package pkg (a directory relative to the repo
// root) may not import im, or "" if it may. Test files count too: an
// import arrow runs up whether or not only a test follows it.
//   - internal/ is the ground floor: it imports nothing above it (client,
//     broker, nameserver, cmd). The console, an application built on the
//     client, lives in cmd/internal/console.
//   - conf is a leaf: it imports nothing of the project (the ACL file is
//     read and validated by internal/acl, called by the binaries).
func layerViolation(pkg, im string) string {
	if !strings.HasPrefix(im, module) {
		return ""
	}
	target := strings.TrimPrefix(im, module)
	switch {
	case under(pkg, "conf"):
		return "conf is a leaf: it imports nothing of the project"
	case under(pkg, "internal") && under(target, "client", "broker", "nameserver", "cmd"):
		return "internal/ imports nothing above it (client, broker, nameserver, cmd)"
	}
	return ""
}

// TestLayering checks that no import arrow runs up (issue 43, part 4).
func TestLayering(t *testing.T) {
	for _, f := range repoFiles(t) {
		for _, im := range imports(f) {
			if why := layerViolation(f.pkg, im); why != "" {
				t.Errorf("%s imports %s: %s", f.path, im, why)
			}
		}
	}
}

// TestLayering_CatchesViolations proves the rule bites: each file below
// holds an import that runs up, and the check names it.
func TestLayering_CatchesViolations(t *testing.T) {
	for _, tc := range []struct{ pkg, src string }{
		{"internal/console", "package console\nimport \"github.com/sluicemq/sluice/client\"\n"},
		{"internal/acl", "package acl\nimport \"github.com/sluicemq/sluice/broker/store\"\n"},
		{"internal/testutil", "package testutil\nimport \"github.com/sluicemq/sluice/nameserver\"\n"},
		{"internal/cli", "package cli\nimport \"github.com/sluicemq/sluice/cmd/internal/console\"\n"},
		{"conf", "package conf\nimport \"github.com/sluicemq/sluice/internal/acl\"\n"},
	} {
		fset := token.NewFileSet()
		full, err := parser.ParseFile(fset, "x.go", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := goFile{pkg: tc.pkg, path: "x.go", ast: full, fset: fset}
		found := false
		for _, im := range imports(f) {
			found = found || layerViolation(f.pkg, im) != ""
		}
		if !found {
			t.Errorf("%s importing %v: not reported", tc.pkg, imports(f))
		}
	}
	// And what is allowed stays allowed.
	for _, ok := range [][2]string{
		{"internal/cli", module + "conf"},
		{"internal/acl", module + "internal/acl/sig"},
		{"cmd/internal/console", module + "client"},
		{"broker", module + "internal/acl"},
		{"conf", "github.com/spf13/viper"},
	} {
		if why := layerViolation(ok[0], ok[1]); why != "" {
			t.Errorf("%s importing %s reported: %s", ok[0], ok[1], why)
		}
	}
}

// TestRawAtomics forbids sync/atomic's function API: typed atomics only.
func TestRawAtomics(t *testing.T) {
	for _, f := range repoFiles(t) {
		name := ""
		for _, im := range f.ast.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "sync/atomic" {
				name = "atomic"
				if im.Name != nil {
					name = im.Name.Name
				}
			}
		}
		if name == "" {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
				for _, prefix := range []string{"Add", "Load", "Store", "Swap", "CompareAndSwap", "And", "Or"} {
					if strings.HasPrefix(sel.Sel.Name, prefix) {
						t.Errorf("%s: raw atomic.%s; use a typed atomic (atomic.Int64, ...)", f.fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
}

// TestPanicArgs allows panic outside tests only for broken invariants and
// programming errors, with a message that starts "<package>: " (pebble's
// rule): decoders of disk and network bytes return errors, never panic(err).
func TestPanicArgs(t *testing.T) {
	for _, f := range repoFiles(t) {
		if f.test {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" && len(call.Args) == 1 {
				lit := leftmostString(call.Args[0])
				if !panicMsg.MatchString(lit) {
					t.Errorf("%s: panic outside a test must name its invariant as \"pkg: ...\" (got %q)", f.fset.Position(call.Pos()), lit)
				}
			}
			return true
		})
	}
}
