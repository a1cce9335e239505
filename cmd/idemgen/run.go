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
	"runtime/debug"
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
  idemgen version
  idemgen help [generate|lint|routes]

Example (from go generate, in the package that will hold the output):
  //go:generate go tool idemgen generate -spec ../../api/openapi.yaml -out . -package idem -dialect postgres

or from a shell:
  idemgen generate -spec api/openapi.yaml -out internal/idem -package idem -dialect sqlite

Every file idemgen writes is named idemgen_*; files of that name it no
longer emits are removed. With -check nothing is written: the stale
files (each with a unified diff from disk to what generate would write),
missing and extra files are listed and the exit code is 1.

With no -spec, generate, lint and routes read idemgen.yaml in the current
folder; generate runs once per output, and flags override the file:
  version: 1
  spec: openapi.yaml
  outputs:
    - {out: internal/idem, package: idem, dialect: postgres}

lint lists the POST, PUT, PATCH and DELETE operations that carry no
x-idempotent (x-idempotent: false marks one as deliberately unprotected),
and every problem generate would report.

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
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "idemgen", version())
		return exitOK
	case "help", "-h", "-help", "--help":
		return runHelp(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "idemgen: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

type genFlags struct {
	spec, out, pkg, dialect, table, annotate string
	store, check                             bool
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
	fs.StringVar(&g.annotate, "annotate-mutating", "", "annotate every POST, PUT, PATCH and DELETE operation that has no x-idempotent with this\nannotation: true, or a JSON object such as '{\"principal\":\"anonymous\"}' (for specs you cannot edit)")
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
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
		Spec:      g.spec,
		Package:   g.pkg,
		Dialect:   g.dialect,
		Table:     g.table,
		SkipStore: !g.store,
	}
	if g.annotate != "" {
		if g.annotate == "true" {
			cfg.AnnotateMutating = map[string]any{}
		} else if err := json.Unmarshal([]byte(g.annotate), &cfg.AnnotateMutating); err != nil || cfg.AnnotateMutating == nil {
			fmt.Fprintf(stderr, "idemgen generate: -annotate-mutating: want true or a JSON object, got %q\n", g.annotate)
			return exitUsage
		}
	}
	if g.spec == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen generate: reading standard input: %v\n", err)
			return exitError
		}
		cfg.Spec, cfg.SpecData = "<stdin>", data
	}
	res, err := generator.Generate(ctx, cfg)
	if err != nil {
		var ds generator.Diagnostics
		switch {
		case errors.As(err, &ds):
			for _, d := range ds {
				fmt.Fprintln(stderr, d)
			}
		case errors.Is(err, generator.ErrConfig):
			fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
			return exitUsage
		default:
			fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
		}
		return exitError
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, w)
	}
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

func lintFlags(stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("idemgen lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("spec", "", "the OpenAPI document (YAML or JSON; - reads standard input)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: idemgen lint -spec FILE\n\nExample:\n  idemgen lint -spec api/openapi.yaml\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, spec
}

func runLint(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, spec := lintFlags(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *spec == "" && fs.NArg() == 0 && !specFromConfig("idemgen lint", spec, stderr) {
		return exitUsage
	}
	if *spec == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "idemgen lint: want -spec FILE and nothing else")
		fs.Usage()
		return exitUsage
	}
	cfg := generator.Config{Spec: *spec}
	if *spec == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen lint: reading standard input: %v\n", err)
			return exitError
		}
		cfg.Spec, cfg.SpecData = "<stdin>", data
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
	for _, d := range ds {
		fmt.Fprintln(stdout, d)
	}
	if len(ds) > 0 {
		return exitError
	}
	return exitOK
}
