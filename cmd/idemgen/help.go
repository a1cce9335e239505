package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// subcommandFlags are the flag sets of the subcommands that take flags, in
// the order help lists them.
var subcommandFlags = []struct {
	name  string
	flags func(stderr io.Writer) *flag.FlagSet
}{
	{"generate", func(w io.Writer) *flag.FlagSet { fs, _ := generateFlags(w); return fs }},
	{"lint", func(w io.Writer) *flag.FlagSet { fs, _ := lintFlags(w); return fs }},
	{"routes", func(w io.Writer) *flag.FlagSet { fs, _ := routesFlags(w); return fs }},
	{"spec", func(w io.Writer) *flag.FlagSet { fs, _ := specFlags(w); return fs }},
	{"probe", func(w io.Writer) *flag.FlagSet { fs, _ := probeFlags(w); return fs }},
}

// runHelp prints the usage and every flag of every subcommand, or, given
// a subcommand's name, that subcommand's usage.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "keys" {
		return runKeys(context.Background(), []string{"help"}, nil, stdout, stderr)
	}
	if len(args) > 0 {
		for _, sc := range subcommandFlags {
			if sc.name == args[0] {
				fs := sc.flags(stdout)
				fs.Usage()
				return exitOK
			}
		}
		fmt.Fprintf(stderr, "idemgen help: unknown command %q\n", args[0])
		return exitUsage
	}
	fmt.Fprint(stdout, usage)
	for _, sc := range subcommandFlags {
		fmt.Fprintf(stdout, "\nFlags of idemgen %s:\n", sc.name)
		fs := sc.flags(stdout)
		fs.PrintDefaults()
	}
	return exitOK
}
