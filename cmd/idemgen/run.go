package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // spec or generation errors, stale files under -check
	exitUsage = 2
)

const usage = `idemgen generates idempotent net/http wrappers and their SQL key store
from the x-idempotent annotations of an OpenAPI 3.0 or 3.1 document.

Usage:
  idemgen generate -spec FILE -out DIR -dialect postgres|sqlite|mysql [flags]
  idemgen generate [flags]       (reads idemgen.yaml: spec and outputs)
  idemgen lint -spec FILE
  idemgen routes -spec FILE [-markdown]
  idemgen spec -spec FILE [-o FILE] [-overlay] [-annotate-mutating JSON]
  idemgen probe -spec FILE -base URL [-H 'Name: value' ...] [-full]
  idemgen keys inspect|release|purge|help -dsn DSN -op OPERATION -key KEY [flags]
  idemgen version
  idemgen help [generate|lint|routes|spec|probe|keys]

Example (from go generate, in the package that will hold the output):
  //go:generate go tool idemgen generate -spec ../../api/openapi.yaml -out . -package idem -dialect postgres

or from a shell:
  idemgen generate -spec api/openapi.yaml -out internal/idem -package idem -dialect sqlite

Every file idemgen writes is named idemgen_*; files of that name it no
longer emits are removed. With -check nothing is written: the stale
files (each with a unified diff from disk to what generate would write),
missing and extra files are listed and the exit code is 1.

With no -spec, generate, lint, routes and spec read idemgen.yaml in the current
folder; generate runs once per output, and flags override the file:
  version: 1
  spec: openapi.yaml
  outputs:
    - {out: internal/idem, package: idem, dialect: postgres}
Each generate flag is a key of an output (base-path: one path or a list);
allow-remote-refs: true goes at the top.

lint lists the POST, PUT, PATCH and DELETE operations that carry no
x-idempotent (x-idempotent: false marks one as deliberately unprotected),
with the annotation to write when one already declares an idempotency key;
warns about key parameters an annotation names that the operation does not
declare; and reports every problem generate would report.

spec writes the spec for clients with the contract made explicit for each
annotated operation (key parameter, problem responses, Idempotent-Replayed,
the resolved policy in x-idempotent); -overlay writes the same changes as an
OpenAPI Overlay 1.0.0 document.

probe sends a running deployment the probes CheckCoverage sends in process
(refused by the middleware before any handler runs) and lists every
annotated operation it does not prove protected, and why; exit 1 if any.

keys inspects, releases or purges one idempotency record in a PostgreSQL,
MySQL, SQLite or Redis store (idemgen keys help); it runs the command
idemgen-keys, which holds the database drivers so that idemgen builds none.

Exit codes: 0 ok, 1 spec or generation errors (or stale files, or lint
findings), 2 usage.
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "generate", "gen":
		return runGenerate(ctx, args[1:], stdin, stdout, stderr)
	case "lint":
		return runLint(ctx, args[1:], stdin, stdout, stderr)
	case "routes":
		return runRoutes(ctx, args[1:], stdin, stdout, stderr)
	case "spec":
		return runSpec(ctx, args[1:], stdin, stdout, stderr)
	case "probe":
		return runProbe(ctx, args[1:], stdin, stdout, stderr)
	case "keys":
		return runKeys(ctx, args[1:], stdin, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "idemgen", generator.Version())
		return exitOK
	case "help", "-h", "-help", "--help":
		return runHelp(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "idemgen: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

type genFlags struct {
	spec, out, pkg, dialect, table, annotate string
	store, check, allowRemote                bool
	basePaths                                basePathsFlag
}

// basePathsFlag collects -base-path, which may be repeated; nil when it is
// not given (the spec's servers then say).
type basePathsFlag []string

func (b *basePathsFlag) String() string { return strings.Join(*b, ",") }

func (b *basePathsFlag) Set(v string) error {
	*b = append(*b, v)
	return nil
}

func generateFlags(stderr io.Writer) (*flag.FlagSet, *genFlags) {
	g := &genFlags{}
	fs := flag.NewFlagSet("idemgen generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&g.spec, "spec", "", "the OpenAPI document (YAML or JSON; - reads standard input)")
	fs.StringVar(&g.out, "out", "", "the folder of the generated package")
	fs.StringVar(&g.pkg, "package", "", "the Go package name (default: the -out folder's name)")
	fs.StringVar(&g.dialect, "dialect", "", "the key store's SQL dialect: postgres, sqlite or mysql")
	fs.StringVar(&g.table, "table", generator.DefaultTable, "the key table's name")
	fs.BoolVar(&g.store, "store", true, "generate the SQL schema and key store (false: policies and middleware only)")
	fs.StringVar(&g.annotate, "annotate-mutating", "", annotateMutatingUsage)
	fs.Var(&g.basePaths, "base-path", "serve the operations under this base `path` instead of the spec's servers' (repeatable; \"/\" is the root):\n-base-path / for a router generated by oapi-codegen (HandlerFromMux) or ogen (NewServer without WithPathPrefix)")
	remoteRefsFlag(fs, &g.allowRemote)
	fs.BoolVar(&g.check, "check", false, "write nothing; list stale (with a diff), missing and extra idemgen_* files and exit 1 if any")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: idemgen generate -spec FILE -out DIR -dialect postgres|sqlite|mysql [flags]\n\n"+
			"Example:\n  idemgen generate -spec api/openapi.yaml -out internal/idem -package idem -dialect postgres\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, g
}

func runGenerate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, g := generateFlags(stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemgen generate: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if g.spec == "" {
		if code, ok := generateFromConfig(ctx, args, stdin, stdout, stderr); ok {
			return code // one run per output of idemgen.yaml
		}
	}
	var missing []string
	if g.spec == "" {
		missing = append(missing, "-spec")
	}
	if g.out == "" {
		missing = append(missing, "-out")
	}
	if g.store && g.dialect == "" {
		missing = append(missing, "-dialect")
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "idemgen generate: missing %s\n", strings.Join(missing, ", "))
		fs.Usage()
		return exitUsage
	}
	if g.pkg == "" {
		abs, err := filepath.Abs(g.out)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
			return exitUsage
		}
		g.pkg = strings.ReplaceAll(filepath.Base(abs), "-", "_")
	}
	cfg := generator.Config{
		Package:         g.pkg,
		Dialect:         g.dialect,
		Table:           g.table,
		SkipStore:       !g.store,
		BasePaths:       g.basePaths,
		AllowRemoteRefs: g.allowRemote,
	}
	var ok bool
	if cfg.AnnotateMutating, ok = annotateMutating("idemgen generate", g.annotate, stderr); !ok {
		return exitUsage
	}
	if !readSpec("idemgen generate", g.spec, stdin, &cfg, stderr) {
		return exitError
	}
	res, err := generator.Generate(ctx, cfg)
	if err != nil {
		return reportErr("idemgen generate", err, stderr)
	}
	printAll(stderr, res.Warnings)
	if g.check {
		return check(g.out, res.Files, stdout, stderr)
	}
	if err := write(g.out, res.Files); err != nil {
		fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
		return exitError
	}
	return exitOK
}

// ours reports whether a file in the output folder is one idemgen manages.
func ours(name string) bool { return strings.HasPrefix(name, "idemgen_") }

// existing lists the idemgen_* regular files in dir.
func existing(dir string) (map[string]bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range entries {
		if e.Type().IsRegular() && ours(e.Name()) {
			out[e.Name()] = true
		}
	}
	return out, nil
}

// check compares files with dir and lists every difference.
func check(dir string, files map[string][]byte, stdout, stderr io.Writer) int {
	have, err := existing(dir)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
		return exitError
	}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(dir, name)
		if !have[name] {
			problems = append(problems, "missing: "+path)
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
			return exitError
		}
		if !bytes.Equal(old, files[name]) {
			problems = append(problems, "stale: "+path+"\n"+strings.TrimSuffix(unifiedDiff(path+" (on disk)", path+" (generated)", old, files[name]), "\n"))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if _, ok := files[name]; !ok {
			problems = append(problems, "extra: "+filepath.Join(dir, name))
		}
	}
	if len(problems) == 0 {
		return exitOK
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, p)
	}
	fmt.Fprintf(stderr, "idemgen generate -check: %d file(s) out of date; run idemgen generate without -check\n", len(problems))
	return exitError
}

// write writes the files that changed and removes the idemgen_* files that
// are no longer generated.
func write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	have, err := existing(dir)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(dir, name)
		if have[name] {
			if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, files[name]) {
				continue
			}
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

type lintOpts struct {
	spec        string
	allowRemote bool
}

func lintFlags(stderr io.Writer) (*flag.FlagSet, *lintOpts) {
	fs := flag.NewFlagSet("idemgen lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	l := &lintOpts{}
	fs.StringVar(&l.spec, "spec", "", "the OpenAPI document (YAML or JSON; - reads standard input)")
	remoteRefsFlag(fs, &l.allowRemote)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: idemgen lint -spec FILE\n\nExample:\n  idemgen lint -spec api/openapi.yaml\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, l
}

func runLint(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, l := lintFlags(stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if _, ok := specOrConfig("idemgen lint", fs, &l.spec, &l.allowRemote, stderr); !ok {
		return exitUsage
	}
	cfg := generator.Config{AllowRemoteRefs: l.allowRemote}
	if !readSpec("idemgen lint", l.spec, stdin, &cfg, stderr) {
		return exitError
	}
	ds, err := generator.Lint(ctx, cfg)
	var loadErrs generator.Diagnostics
	switch {
	case errors.As(err, &loadErrs):
		ds = loadErrs
	case err != nil:
		fmt.Fprintf(stderr, "idemgen lint: %v\n", err)
		return exitError
	}
	printAll(stdout, ds)
	if len(ds) > 0 {
		return exitError
	}
	return exitOK
}

// annotateMutatingUsage is the help of -annotate-mutating.
const annotateMutatingUsage = "annotate every POST, PUT, PATCH and DELETE operation that has no x-idempotent with this\nannotation: true, or a JSON object such as '{\"principal\":\"anonymous\"}' (for specs you cannot edit)"

// annotateMutating decodes -annotate-mutating (nil for ""): true or a
// JSON object. It is checked before the spec is loaded: a mistake in the
// flag is one usage error, not one spec-located error per operation. It
// reports false after printing the error (exit 2).
func annotateMutating(cmd, value string, stderr io.Writer) (map[string]any, bool) {
	if value == "" {
		return nil, true
	}
	if value == "true" {
		return map[string]any{}, true
	}
	var a map[string]any
	if err := json.Unmarshal([]byte(value), &a); err != nil || a == nil {
		fmt.Fprintf(stderr, "%s: -annotate-mutating: want true or a JSON object, got %q\n", cmd, value)
		return nil, false
	}
	if err := generator.CheckAnnotation(a); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "%s: -annotate-mutating: %s\n", cmd, line)
		}
		return nil, false
	}
	return a, true
}

// remoteRefsFlag adds -allow-remote-refs, which every command that loads
// the spec takes (the loader's error names it).
func remoteRefsFlag(fs *flag.FlagSet, allow *bool) {
	fs.BoolVar(allow, "allow-remote-refs", false, "follow $refs to http(s) URLs (by default only relative $refs to files under the spec's folder are read)")
}

// parseFlags parses a subcommand's flags; ok is false when the command
// ends there: after -h (exit 0) or a flag error the flag package printed
// (exit 2).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}

// specOrConfig takes the spec from idemgen.yaml when no -spec was given
// (lint and routes), and checks that the command has a spec and no
// arguments. It returns the file when the spec came from it, and reports
// false after printing why (exit 2).
func specOrConfig(cmd string, fs *flag.FlagSet, spec *string, allowRemote *bool, stderr io.Writer) (*fileConfig, bool) {
	var fc *fileConfig
	if *spec == "" && fs.NArg() == 0 {
		var ok bool
		if fc, ok = specFromConfig(cmd, spec, allowRemote, stderr); !ok {
			return nil, false
		}
	}
	if *spec == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: want -spec FILE and nothing else\n", cmd)
		fs.Usage()
		return nil, false
	}
	return fc, true
}

// readSpec sets cfg.Spec from -spec; "-" reads the document from stdin
// into cfg.SpecData (diagnostics then name it <stdin>). It reports false
// after printing the error (exit 1).
func readSpec(cmd, spec string, stdin io.Reader, cfg *generator.Config, stderr io.Writer) bool {
	cfg.Spec = spec
	if spec != "-" {
		return true
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "%s: reading standard input: %v\n", cmd, err)
		return false
	}
	cfg.Spec, cfg.SpecData = "<stdin>", data
	return true
}

// reportErr prints an error of the generator (each diagnostic on a line
// of its own) and returns the exit code: 2 for a configuration error, 1
// for the spec's.
func reportErr(cmd string, err error, stderr io.Writer) int {
	var ds generator.Diagnostics
	switch {
	case errors.As(err, &ds):
		printAll(stderr, ds)
	case errors.Is(err, generator.ErrConfig):
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	}
	return exitError
}

// printAll prints diagnostics one a line.
func printAll(w io.Writer, lists ...generator.Diagnostics) {
	for _, ds := range lists {
		for _, d := range ds {
			fmt.Fprintln(w, d)
		}
	}
}
