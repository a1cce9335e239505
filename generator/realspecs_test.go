package generator

import (
	"bytes"
	"context"
	"errors"
	"go/format"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/tools/go/packages"

	"github.com/idemgen/idemgen/internal/testutil"
)

// mutatingOps is the number of POST/PUT/PATCH/DELETE operations under
// `paths` of each spec of the corpus (../shared/specs/SOURCES.md) that
// -annotate-mutating annotates: all of them but those whose response
// streams (OpenAI's 7 text/event-stream operations) and those under a path
// key with a query string, which no policy can match (OpenAI's 4 mutating
// /responses...?beta=true operations that do not stream).
var mutatingOps = map[string]int{
	"adyen-checkout-v72.json":             25,
	"discord-api-v10.json":                139,
	"oai-api-with-examples-3.0.yaml":      0,
	"oai-callback-example-3.0.yaml":       1,
	"oai-link-example-3.0.yaml":           1,
	"oai-non-oauth-scopes-3.1.yaml":       0,
	"oai-petstore-3.0.yaml":               1,
	"oai-petstore-expanded-3.0.yaml":      2,
	"oai-tictactoe-3.1.yaml":              1,
	"oai-uspto-3.0.yaml":                  1,
	"oai-webhook-example-3.1.yaml":        0,
	"openai-api-2.3.0.yaml":               155,
	"paypal-checkout-orders-v2-2.13.json": 7,
	"paypal-payments-v2-2.5.json":         4,
	"square-connect-2025-04-16.json":      189,
	"stripe-api-2023-08-16.yaml":          252,
	"twilio-api-v2010-1.0.0.json":         94,
}

// withStore are the specs whose output includes a key store (the store
// does not depend on the spec; type-checking it for every spec would only
// slow the test down).
var withStore = map[string]string{
	"stripe-api-2023-08-16.yaml":     "postgres",
	"square-connect-2025-04-16.json": "sqlite",
	"openai-api-2.3.0.yaml":          "mysql",
}

// danglingRef is the spec of the corpus that cannot load.
const danglingRef = "square-connect-2025-08-20.json"

// TestRealSpecs loads every spec of the corpus, annotates every mutating
// operation (principal anonymous), generates, and type-checks the output
// of every spec as a package of this module.
func TestRealSpecs(t *testing.T) {
	dir := testutil.SpecsDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.MkdirTemp(filepath.Join(testutil.RepoRoot(), "generator", "testdata"), "realspecs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })

	type job struct {
		name string
		cfg  Config
	}
	var jobs []job
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".yaml") {
			continue
		}
		if info, err := e.Info(); err == nil && raceEnabled && info.Size() > 1<<20 && name != danglingRef {
			// Under -race a 3 MB spec takes 10 s or more to load; the
			// race detector has nothing to find in this sequential code.
			t.Logf("%s: skipped under -race (%d bytes)", name, info.Size())
			continue
		}
		jobs = append(jobs, job{name, Config{
			Spec:             filepath.Join(dir, name),
			Package:          "spec",
			Dialect:          withStore[name],
			SkipStore:        withStore[name] == "",
			AnnotateMutating: map[string]any{"principal": "anonymous"},
		}})
	}
	if !raceEnabled && len(jobs) < len(mutatingOps)+1 {
		t.Errorf("found %d specs, want at least %d", len(jobs), len(mutatingOps)+1)
	}

	// Generate concurrently (Generate is safe for concurrent use), two at
	// a time per CPU at most.
	start := time.Now()
	results := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, max(1, goruntime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = Generate(context.Background(), j.cfg)
		})
	}
	wg.Wait()

	var pkgDirs []string
	for i, j := range jobs {
		name, res, err := j.name, results[i], errs[i]
		if name == danglingRef {
			var ds Diagnostics
			if !errors.As(err, &ds) || !strings.Contains(err.Error(), "CatalogModifierToggleOverrideType") {
				t.Errorf("%s: got %v, want a diagnostic naming the dangling ref CatalogModifierToggleOverrideType", name, err)
			} else {
				t.Logf("%s: %v", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want, known := mutatingOps[name]
		if !known {
			t.Logf("%s: not in the table of expected counts", name)
		} else if got := len(res.Model.Operations); got != want {
			t.Errorf("%s: %d operations annotated, want %d", name, got, want)
		}
		if src := res.Files[PoliciesFile]; !bytes.Equal(mustFormat(t, src), src) {
			t.Errorf("%s: %s is not gofmt'd", name, PoliciesFile)
		}
		startMiddleware(t, name, res.Model)
		pkgDir := filepath.Join(out, strings.NewReplacer(".", "_", "-", "_").Replace(name))
		if err := os.MkdirAll(pkgDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, data := range res.Files {
			if err := os.WriteFile(filepath.Join(pkgDir, file), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pkgDirs = append(pkgDirs, pkgDir)
	}
	t.Logf("generated %d packages in %v", len(pkgDirs), time.Since(start).Round(time.Millisecond))
	start = time.Now()
	typeCheck(t, pkgDirs)
	t.Logf("type-checked them in %v", time.Since(start).Round(time.Millisecond))
}

func mustFormat(t *testing.T, src []byte) []byte {
	t.Helper()
	out, err := format.Source(src)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// typeCheck loads the packages in dirs (inside this module, so that the
// runtime resolves) and fails on any error.
func typeCheck(t *testing.T, dirs []string) {
	t.Helper()
	if len(dirs) == 0 {
		return
	}
	patterns := make([]string, len(dirs))
	for i, d := range dirs {
		rel, err := filepath.Rel(testutil.RepoRoot(), d)
		if err != nil {
			t.Fatal(err)
		}
		patterns[i] = "./" + filepath.ToSlash(rel)
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo,
		Dir:  testutil.RepoRoot(),
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != len(dirs) {
		t.Errorf("loaded %d packages, want %d", len(pkgs), len(dirs))
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
	}
}

// TestRealSpecsOneRun writes several mistakes at once into specs of the
// corpus and checks that one run reports every one of them, and nothing
// that follows from another (before, petstore needed two runs and
// tictactoe three to show them all).
func TestRealSpecsOneRun(t *testing.T) {
	dir := testutil.SpecsDir(t)
	cases := []struct {
		spec    string
		inserts map[string]string // operationId line -> annotation to add after it
		want    []string          // messages, in position order
	}{{
		spec: "oai-petstore-3.0.yaml",
		inserts: map[string]string{
			"operationId: createPets": "x-idempotent: {ttl: 1 day, key: {fields: [nme]}, fingerprint: {include: [/tagg]}, wait: 2m}",
			"operationId: listPets":   "x-idempotent: true",
		},
		want: []string{
			`x-idempotent on GET /pets: GET is safe by definition (RFC 9110 §9.2.1): clients, caches and crawlers repeat it without a key, and every such request would get 400; remove the annotation`,
			`x-idempotent.ttl: "1 day" is not a duration (want e.g. 24h)`,
			`x-idempotent.key.fields: "nme" is not a property of the request body of POST /pets`,
			`x-idempotent.fingerprint.include: "/tagg" is not a property of the request body of POST /pets (a pointer that selects nothing compares nothing)`,
			`x-idempotent: wait (2m0s) is longer than lease (1m0s); a duplicate still waiting when the lease ends takes the claim over and runs the handler again, even while the first attempt is live (wait at most the lease, and make the lease cover the handler's longest run)`,
		},
	}, {
		spec: "oai-tictactoe-3.1.yaml",
		inserts: map[string]string{
			"operationId: get-board":             "x-idempotent: {required: false}",
			"operationId: put-square":            "x-idempotent: {lease: 1 min, ttl: 30s, key: {fields: [mark]}, fingerprint: {exclude: [/row]}}",
			"operationId: markOperationCallback": "x-idempotent: {tll: 1m, lease: 2h, fingerprint: {include: [/board/0/2, /status]}}",
			"operationId: markOperationWebhook":  "x-idempotent: {key: {query: id}, save: [2xx, 600]}",
		},
		want: []string{
			`x-idempotent on GET /board: GET is safe by definition (RFC 9110 §9.2.1): a repeat that sends a key would be answered with a saved response instead of the current state; remove the annotation`,
			`x-idempotent.lease: "1 min" is not a duration (want e.g. 24h)`,
			`x-idempotent.key.fields: "mark" is not a property of the request body of PUT /board/{row}/{column}`,
			`x-idempotent.fingerprint.exclude: "/row" is not a property of the request body of PUT /board/{row}/{column} (a pointer that selects nothing leaves nothing out)`,
			`x-idempotent: unknown field "tll" (did you mean "ttl"?)`,
			`x-idempotent.fingerprint.include: "/status" is not a property of the request body of callback statusCallback POST {$request.header.progressUrl} (a pointer that selects nothing compares nothing)`,
			`x-idempotent.save: the number 600 is not a status class (2xx) or code (100-599)`,
		},
	}}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, c.spec))
			if err != nil {
				t.Fatal(err)
			}
			text := string(data)
			for line, ann := range c.inserts {
				// The last: tictactoe names put-square in a link first.
				i := strings.LastIndex(text, line+"\n")
				if i < 0 {
					t.Fatalf("%s has no line %q", c.spec, line)
				}
				start := strings.LastIndexByte(text[:i], '\n') + 1
				end := i + len(line) + 1
				text = text[:end] + text[start:i] + ann + "\n" + text[end:]
			}
			_, err = Generate(context.Background(), Config{Spec: c.spec, SpecData: []byte(text), Package: "spec", SkipStore: true})
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("got %v, want diagnostics", err)
			}
			var got []string
			for _, d := range ds {
				got = append(got, d.Msg)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("one run reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestTwilioLintPositions: the Twilio spec's JSON holds surrogate-pair
// escapes (\uD83D...), which take every position kin-openapi records away;
// each of its lint findings must still point at its operation's key.
func TestTwilioLintPositions(t *testing.T) {
	const name = "twilio-api-v2010-1.0.0.json"
	if raceEnabled {
		t.Skipf("%s: skipped under -race (see TestRealSpecs)", name)
	}
	path := filepath.Join(testutil.SpecsDir(t), name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(string(data)), `\ud83d`) {
		t.Fatalf("%s no longer holds a surrogate-pair escape; the test tests nothing", name)
	}
	ds, err := Lint(context.Background(), Config{Spec: path})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != mutatingOps[name] {
		t.Errorf("%d findings, want %d", len(ds), mutatingOps[name])
	}
	lines := strings.Split(string(data), "\n")
	for _, d := range ds {
		if d.Pos.File != path || d.Pos.Line < 1 || d.Pos.Line > len(lines) || d.Pos.Col < 1 {
			t.Errorf("finding without a position: %v", d)
			continue
		}
		method := strings.ToLower(strings.Fields(strings.TrimPrefix(d.Msg, "operation "))[0])
		line := []rune(lines[d.Pos.Line-1])
		if at := string(line[min(d.Pos.Col-1, len(line)):]); !strings.HasPrefix(at, `"`+method+`"`) {
			t.Errorf("%v points at %q, want the key %q", d, at, method)
		}
	}
}
