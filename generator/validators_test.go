package generator

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// TestGenerateRefusesWhatMiddlewareRefuses goes over every error the
// runtime's validators can return (each f.add of runtime/validate.go; a
// new one fails this test until it has an entry): a spec that would give
// a policy with that error must fail to generate, or the entry says why no
// spec can give it (the typed decoding cannot produce the value, or the
// error is about the application's Options, not the spec).
// runtime/validate_test.go proves the other half: NewMiddleware refuses
// exactly what ValidatePolicy returns.
func TestGenerateRefusesWhatMiddlewareRefuses(t *testing.T) {
	type entry struct {
		path, annotation, servers string // a spec to generate from
		unreachable               string // or why no spec gives it
	}
	body := "      requestBody:\n        content:\n          application/json:\n            schema: {type: object, additionalProperties: true}\n"
	many := make([]string, 65)
	for i := range many {
		many[i] = "/f" + strings.Repeat("x", i)
	}
	entries := map[string]entry{
		"method %q is not an upper-case HTTP method": {unreachable: "the method is the operation's key in the spec, upper-cased"},
		"%v":                                 {path: "/files/{name}{ext}", annotation: "true"},
		"base path %q does not start with /": {unreachable: "base paths are URL paths made to start with / (urlBasePath); Config.BasePaths is checked by Config.check"},
		"key header %q is not a valid header name":                                   {path: "/a", annotation: "{key: {header: 'Bad Key'}}"},
		"key from query needs KeyName":                                               {path: "/a", annotation: "{key: {query: ''}}"},
		"key from fields needs KeyFields":                                            {path: "/a", annotation: "{key: {fields: []}}"},
		"key field %q is not a dotted path such as order.id":                         {path: "/a", annotation: "{key: {fields: [a..b]}}"},
		"unknown key source %d":                                                      {unreachable: "the key source is one of the four the decoder knows"},
		"KeyName %q set for a key that is not read from a header or query parameter": {unreachable: "the decoder sets a key name for header and query keys only"},
		"principal mode is auth (keys per caller) but Options.Principal is nil; supply a principal function, or set the operation's principal to anonymous for one shared key space": {unreachable: "about the application's Options (generationEnv takes a principal function as given); the generated Middleware's doc comment names the auth operations"},
		"unknown principal mode %d":                                         {unreachable: "the principal is auth or anonymous, decoded or defaulted"},
		"Challenges set on an anonymous operation, which never answers 401": {unreachable: "challenges are generated for auth operations only"},
		"challenge %q is not a WWW-Authenticate challenge (an auth-scheme token, then optional parameters, on one line)": {unreachable: "challenges are Bearer, or Basic with a realm made of the title's printable characters (realm)"},
		"fingerprint include and exclude are both set":                                                                   {path: "/a", annotation: "{fingerprint: {include: [/a], exclude: [/b]}}"},
		"fingerprint include: %v":                                               {path: "/a", annotation: "{fingerprint: {include: [a]}}"},
		"more than %d fingerprint exclude pointers":                             {path: "/a", annotation: "{fingerprint: {exclude: [" + strings.Join(many, ", ") + "]}}"},
		"fingerprint exclude: %v":                                               {path: "/a", annotation: "{fingerprint: {exclude: [/a~2]}}"},
		"fingerprint exclude %q would exclude the whole body":                   {path: "/a", annotation: `{fingerprint: {exclude: [""]}}`},
		"negative ttl, lease or wait (%v, %v, %v)":                              {path: "/a", annotation: "{wait: -1s}"},
		"ttl %v is shorter than lease %v":                                       {path: "/a", annotation: "{ttl: 1s, lease: 1m}"},
		"negative max-response-bytes or max-request-bytes":                      {path: "/a", annotation: "{max-request-bytes: -1}"},
		"save rule has unknown status classes %b":                               {unreachable: "the decoder sets the five classes 1xx-5xx only"},
		"save rule lists status %d, not a status code":                          {path: "/a", annotation: "{save: [600]}"},
		"replay header %q is not a valid header name":                           {path: "/a", annotation: "{replay-headers: ['Bad Header']}"},
		"transactional mode needs a store that implements TxStore; %T does not": {unreachable: "about the application's store (generationEnv takes a TxStore as given); every generated SQL store is one"},
	}
	src, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "runtime", "validate.go"))
	if err != nil {
		t.Fatal(err)
	}
	calls := regexp.MustCompile(`f\.add\((?:\w+|"\w+"), [-\w]+, "((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(string(src), -1)
	if n := strings.Count(string(src), "f.add("); len(calls) != n || n < 20 {
		t.Fatalf("the pattern matches %d of the %d f.add calls in runtime/validate.go", len(calls), n)
	}
	seen := map[string]bool{}
	for _, call := range calls {
		format := strings.ReplaceAll(call[1], `\"`, `"`)
		seen[format] = true
		e, ok := entries[format]
		if !ok {
			t.Errorf("the runtime error %q has no entry: add a spec that gives it (generate must refuse it) or say why none can", format)
			continue
		}
		if e.unreachable != "" {
			continue
		}
		spec := "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\n" + e.servers + "paths:\n  " + e.path + ":\n    post:\n      operationId: op\n      x-idempotent: " + e.annotation + "\n" + body + "      responses:\n        \"201\": {description: created}\n"
		_, err := Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(spec), Package: "api", SkipStore: true})
		if err == nil {
			t.Errorf("%q: generate accepted a policy the middleware refuses:\n%s", format, spec)
		}
	}
	for format := range entries {
		if !seen[format] {
			t.Errorf("entry %q is no error of runtime/validate.go any more", format)
		}
	}
}
