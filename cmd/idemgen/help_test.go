package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// help lists every flag of every subcommand that takes flags.
func TestHelpListsEveryFlag(t *testing.T) {
	code, out, _ := runCLI(t, "", "help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, sc := range []struct {
		name string
		fs   *flag.FlagSet
	}{
		{"generate", func() *flag.FlagSet { fs, _ := generateFlags(io.Discard); return fs }()},
		{"lint", func() *flag.FlagSet { fs, _ := lintFlags(io.Discard); return fs }()},
		{"routes", func() *flag.FlagSet { fs, _ := routesFlags(io.Discard); return fs }()},
	} {
		i := strings.Index(out, "Flags of idemgen "+sc.name+":")
		if i < 0 {
			t.Errorf("help has no section for %s", sc.name)
			continue
		}
		section := out[i:]
		if j := strings.Index(section[1:], "Flags of idemgen "); j >= 0 {
			section = section[:j+1]
		}
		sc.fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(section, "  -"+f.Name+" ") && !strings.Contains(section, "  -"+f.Name+"\n") {
				t.Errorf("help lacks %s -%s", sc.name, f.Name)
			}
		})
	}
	if code, out, _ := runCLI(t, "", "help", "routes"); code != 0 || !strings.Contains(out, "-markdown") {
		t.Errorf("help routes: exit %d, stdout %q", code, out)
	}
	if code, _, errs := runCLI(t, "", "help", "frob"); code != 2 || !strings.Contains(errs, "frob") {
		t.Errorf("help frob: exit %d, stderr %q", code, errs)
	}
}

func TestUnknownDialectSuggests(t *testing.T) {
	code, _, errs := runCLI(t, spec, "generate", "-spec", "-", "-out", t.TempDir(), "-dialect", "postgress")
	if code != 2 || !strings.Contains(errs, `unknown dialect "postgress"`) || !strings.Contains(errs, `did you mean "postgres"?`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if _, _, errs := runCLI(t, spec, "generate", "-spec", "-", "-out", t.TempDir(), "-dialect", "oracle"); strings.Contains(errs, "did you mean") {
		t.Errorf("oracle got a suggestion: %q", errs)
	}
}
