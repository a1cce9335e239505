package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idemgen/idemgen/generator"
)

// idemgen spec: the spec published for clients, with the contract made
// explicit (generator.Publish).

type specOpts struct {
	spec, out, annotate             string
	overlay, checkOnly, allowRemote bool
}

func specFlags(stderr io.Writer) (*flag.FlagSet, *specOpts) {
	fs := flag.NewFlagSet("idemgen spec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &specOpts{}
	fs.StringVar(&o.spec, "spec", "", "the OpenAPI document (YAML or JSON; - reads standard input)")
	fs.StringVar(&o.out, "o", "-", "the output file (- is standard output); a name ending in .json gets JSON, any other YAML")
	fs.BoolVar(&o.overlay, "overlay", false, "write the changes as an OpenAPI Overlay 1.0.0 document instead of the changed spec")
	fs.BoolVar(&o.checkOnly, "check", false, "write nothing; exit 1 if the -o file differs from what would be written")
	fs.StringVar(&o.annotate, "annotate-mutating", "", annotateMutatingUsage+"\n(give generate's value, so that the operations it protects are published with their key)")
	remoteRefsFlag(fs, &o.allowRemote)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: idemgen spec -spec FILE [-o FILE] [-overlay] [-check] [-annotate-mutating JSON]\n"+
			"       idemgen spec [flags]    (reads idemgen.yaml: its spec, and the annotate-mutating and\n"+
			"                                base-path its outputs share)\n\n"+
			"Writes the spec with the idempotency contract of every annotated operation made explicit:\n"+
			"the key parameter, the problem responses (400, 401, 409, 413, 422, 503), the\n"+
			"Idempotent-Replayed header on saved responses, and the resolved policy in x-idempotent.\n"+
			"Notes on stderr say which responses the spec already defined were merged or left.\n\n"+
			"Example:\n  idemgen spec -spec api/openapi.yaml -o api/published.yaml\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, o
}

func runSpec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, o := specFlags(stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.checkOnly && o.out == "-" {
		fmt.Fprintln(stderr, "idemgen spec: want -spec FILE, optionally -o FILE (-check needs one), -overlay, and nothing else")
		fs.Usage()
		return exitUsage
	}
	fc, ok := specOrConfig("idemgen spec", fs, &o.spec, &o.allowRemote, stderr)
	if !ok {
		return exitUsage
	}
	var basePaths []string
	if fc != nil {
		// Published as generate protects the operations: the outputs'
		// annotate-mutating and base-path (the flag replaces the first).
		set := given(fs)
		var annotate string
		var err error
		if basePaths, annotate, err = fc.shared(set); err != nil {
			fmt.Fprintf(stderr, "idemgen spec: %v\n", err)
			return exitUsage
		}
		if !set["annotate-mutating"] {
			o.annotate = annotate
		}
	}
	cfg := generator.Config{AllowRemoteRefs: o.allowRemote, BasePaths: basePaths}
	if cfg.AnnotateMutating, ok = annotateMutating("idemgen spec", o.annotate, stderr); !ok {
		return exitUsage
	}
	if !readSpec("idemgen spec", o.spec, stdin, &cfg, stderr) {
		return exitError
	}
	pub, err := generator.Publish(ctx, cfg, generator.PublishOptions{Overlay: o.overlay, JSON: strings.HasSuffix(o.out, ".json")})
	if err != nil {
		return reportErr("idemgen spec", err, stderr)
	}
	printAll(stderr, pub.Warnings, pub.Notes)
	switch {
	case o.checkOnly:
		old, err := os.ReadFile(o.out)
		if err != nil || !bytes.Equal(old, pub.Data) {
			fmt.Fprintf(stdout, "stale: %s\n", o.out)
			fmt.Fprintf(stderr, "idemgen spec -check: %s is out of date; run idemgen spec without -check\n", o.out)
			return exitError
		}
	case o.out == "-":
		if _, err := stdout.Write(pub.Data); err != nil {
			fmt.Fprintf(stderr, "idemgen spec: %v\n", err)
			return exitError
		}
	default:
		if err := os.WriteFile(o.out, pub.Data, 0o644); err != nil {
			fmt.Fprintf(stderr, "idemgen spec: %v\n", err)
			return exitError
		}
	}
	return exitOK
}
