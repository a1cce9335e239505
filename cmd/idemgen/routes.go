package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemgen/idemgen/generator"
)

const routesUsage = `Usage: idemgen routes -spec FILE [-markdown] [-base-path PATH]... [-annotate-mutating JSON]

Lists the operations that x-idempotent protects, as the generator reads
them: method, full path (under every server base path), key source,
principal, ttl, lease and transactional mode. -markdown prints a table for
a pull request description. -base-path and -annotate-mutating are
generate's; with no -spec, idemgen.yaml gives the spec and the values of
those its outputs share.

Example:
  idemgen routes -spec api/openapi.yaml -markdown

Flags:
`

type routesOpts struct {
	spec, annotate        string
	basePaths             basePathsFlag
	markdown, allowRemote bool
}

func routesFlags(stderr io.Writer) (*flag.FlagSet, *routesOpts) {
	fs := flag.NewFlagSet("idemgen routes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	r := &routesOpts{}
	fs.StringVar(&r.spec, "spec", "", "the OpenAPI document (YAML or JSON; - reads standard input)")
	fs.BoolVar(&r.markdown, "markdown", false, "print a Markdown table instead of aligned columns")
	remoteRefsFlag(fs, &r.allowRemote)
	fs.StringVar(&r.annotate, "annotate-mutating", "", "as generate's: list the operations it annotates too")
	fs.Var(&r.basePaths, "base-path", "as generate's: show the paths under this base `path` instead of the spec's servers' (repeatable)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), routesUsage)
		fs.PrintDefaults()
	}
	return fs, r
}

func runRoutes(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, r := routesFlags(stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fc, ok := specOrConfig("idemgen routes", fs, &r.spec, &r.allowRemote, stderr)
	if !ok {
		return exitUsage
	}
	if fc != nil {
		// The outputs' base-path and annotate-mutating, as generate uses
		// them; the flags replace them.
		set := given(fs)
		basePaths, annotate, err := fc.shared(set)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen routes: %v\n", err)
			return exitUsage
		}
		if !set["base-path"] {
			r.basePaths = basePaths
		}
		if !set["annotate-mutating"] {
			r.annotate = annotate
		}
	}
	// The model is the generator's: the same annotations, defaults and
	// base paths that generate would emit.
	cfg := generator.Config{Package: "routes", SkipStore: true, AllowRemoteRefs: r.allowRemote, BasePaths: r.basePaths}
	if cfg.AnnotateMutating, ok = annotateMutating("idemgen routes", r.annotate, stderr); !ok {
		return exitUsage
	}
	if !readSpec("idemgen routes", r.spec, stdin, &cfg, stderr) {
		return exitError
	}
	res, err := generator.Generate(ctx, cfg)
	if err != nil {
		return reportErr("idemgen routes", err, stderr)
	}
	printAll(stderr, res.Warnings)
	rows := routeRows(res.Model)
	if len(rows) == 0 {
		fmt.Fprintf(stderr, "idemgen routes: no operation of %s carries x-idempotent\n", cfg.Spec)
		return exitOK
	}
	if r.markdown {
		writeMarkdown(stdout, rows)
	} else {
		writeColumns(stdout, rows)
	}
	return exitOK
}

var routeHeader = []string{"OPERATION", "METHOD", "PATH", "KEY", "PRINCIPAL", "TTL", "LEASE", "TRANSACTIONAL"}

// route is one row of the table.
type route struct {
	id, method string
	// paths are the full paths of a routed operation; where says how a
	// webhook or callback (no route of its own) is served instead.
	paths                          []string
	where                          string
	key, principal, ttl, lease, tx string
}

// routeRows turns the model into one row per operation, in the model's
// order.
func routeRows(m *generator.Model) []route {
	var rows []route
	for _, o := range m.Operations {
		r := route{id: o.ID(), method: o.Method, key: keySource(o), principal: "anonymous",
			ttl: shortDuration(o.TTL), lease: shortDuration(o.Lease), tx: "no"}
		if o.Principal == generator.PrincipalAuth {
			r.principal = "auth"
		}
		if o.Transactional {
			r.tx = "yes"
		}
		switch o.Kind {
		case generator.InWebhooks:
			r.where = fmt.Sprintf("webhook %s (Wrap%s)", o.Path, o.GoName)
		case generator.InCallbacks:
			r.where = fmt.Sprintf("callback %s %s of %s (Wrap%s)", o.Callback, o.Path, o.ParentOp, o.GoName)
		default:
			r.paths = fullPaths(o)
		}
		rows = append(rows, r)
	}
	// The opt-outs, marked, so that a reviewer sees them too.
	for _, o := range m.OptOuts {
		mark := "opted out (x-idempotent: false)"
		if o.Reason != "" {
			mark = "opted out: " + o.Reason
		}
		r := route{id: o.OperationID, method: o.Method, key: mark, principal: "-", ttl: "-", lease: "-", tx: "-"}
		switch o.Kind {
		case generator.InPaths:
			r.paths = []string{o.Path}
		case generator.InWebhooks:
			r.where = "webhook " + o.Path
		default:
			r.where = "callback " + o.Path
		}
		if r.id == "" {
			r.id = "-"
		}
		rows = append(rows, r)
	}
	return rows
}

// fullPaths is the operation's path under every base path.
func fullPaths(o *generator.Operation) []string {
	if len(o.BasePaths) == 0 {
		return []string{o.Path}
	}
	paths := make([]string, len(o.BasePaths))
	for i, b := range o.BasePaths {
		paths[i] = strings.TrimSuffix(b, "/") + o.Path
	}
	return paths
}

func keySource(o *generator.Operation) string {
	var s string
	switch o.Key {
	case generator.KeyHeader:
		s = "header " + o.KeyName
	case generator.KeyQuery:
		s = "query " + o.KeyName
	case generator.KeyFields:
		s = "fields " + strings.Join(o.KeyFields, ",")
	case generator.KeyBody:
		s = "body hash"
	}
	if o.Optional {
		s += " (optional)"
	}
	return s
}

// shortDuration writes 24h rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func (r route) cells(path string) []string {
	return []string{r.id, r.method, path, r.key, r.principal, r.ttl, r.lease, r.tx}
}

func writeColumns(w io.Writer, rows []route) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(routeHeader, "\t"))
	for _, r := range rows {
		path := r.where
		if r.paths != nil {
			path = strings.Join(r.paths, " ")
		}
		fmt.Fprintln(tw, strings.Join(r.cells(path), "\t"))
	}
	_ = tw.Flush()
}

func writeMarkdown(w io.Writer, rows []route) {
	head := make([]string, len(routeHeader))
	for i, h := range routeHeader {
		head[i] = strings.ToLower(h)
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, r := range rows {
		path := r.where
		if r.paths != nil {
			code := make([]string, len(r.paths))
			for i, p := range r.paths {
				code[i] = "`" + p + "`"
			}
			path = strings.Join(code, "<br>")
		}
		cells := r.cells(path)
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}
