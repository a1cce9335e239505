package generator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/testutil"
)

var _ = testutil.Update

func TestGoName(t *testing.T) {
	cases := map[string]string{
		"find pet by id":         "FindPetByID",
		"createCharge":           "CreateCharge",
		"orders.create":          "OrdersCreate",
		"create-payment-link":    "CreatePaymentLink",
		"getUserId":              "GetUserID",
		"PostV1Charges":          "PostV1Charges",
		"v1Charges":              "V1Charges",
		"HTTPServerURL":          "HTTPServerURL",
		"123abc":                 "Op123abc",
		"get_api_json":           "GetAPIJSON",
		"!!!":                    "",
		"payments/{id}/captures": "PaymentsIDCaptures",
	}
	for in, want := range cases {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := derivedName("POST", "/pets/{petId}/photos"); got != "PostPetsPetIDPhotos" {
		t.Errorf("derivedName = %q", got)
	}
}

func TestDecodeSize(t *testing.T) {
	good := map[any]int64{
		"1MiB": 1 << 20, "64KiB": 64 << 10, "512KB": 512000, "2048": 2048, "3 GiB": 3 << 30,
		1024: 1024, float64(4096): 4096, uint64(7): 7, "10B": 10,
	}
	for in, want := range good {
		if got, ok := decodeSize(in); !ok || got != want {
			t.Errorf("decodeSize(%#v) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []any{"1 MiBs", "-1", 0, -5, 1.5, "1.5MiB", true, nil, "99999999999999999999GiB", "MiB"} {
		if got, ok := decodeSize(in); ok {
			t.Errorf("decodeSize(%#v) = %d, accepted", in, got)
		}
	}
}

func TestServerBasePath(t *testing.T) {
	cases := []struct {
		url  string
		vars map[string]string
		want string
	}{
		{"https://api.example.com", nil, ""},
		{"https://api.example.com/", nil, ""},
		{"https://api.example.com/v1/", nil, "/v1"},
		{"/api", nil, "/api"},
		{"api/v2", nil, "/api/v2"},
		{"//cdn.example.com/files", nil, "/files"},
		{"{scheme}://developer.uspto.gov/ds-api", map[string]string{"scheme": "https"}, "/ds-api"},
		{"https://{host}/{base}", map[string]string{"host": "x.com", "base": "v3"}, "/v3"},
		{"https://x.com/a%20b?q=1", nil, "/a b"},
	}
	for _, c := range cases {
		s := &openapi3.Server{URL: c.url, Variables: map[string]*openapi3.ServerVariable{}}
		for k, v := range c.vars {
			s.Variables[k] = &openapi3.ServerVariable{Default: v}
		}
		if got := serverBasePath(s); got != c.want {
			t.Errorf("serverBasePath(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

func TestLocateYAMLAndFlow(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n"} {
		testLocateYAMLAndFlow(t, eol)
	}
}

func testLocateYAMLAndFlow(t *testing.T, eol string) {
	fs := testFiles(strings.ReplaceAll(`paths:
  /a/{id}:
    post:
      x-idempotent:
        # a comment
        key:
          fields: [a]
        ttl: 1h
      x-other: {ttl: 2h}
      x-flow: {key: {header: X}, "ttl": 3h}
`, "\n", eol))
	op := []string{"paths", "/a/{id}", "post"}
	at := func(keys ...string) Pos { return fs.find(append(op, keys...)...) }
	base := Pos{File: "s.yaml", Line: 4, Col: 7}
	if got := at("x-idempotent"); got != base {
		t.Errorf("x-idempotent at %v", got)
	}
	if got := at("x-idempotent", "ttl"); got != (Pos{File: "s.yaml", Line: 8, Col: 9}) {
		t.Errorf("ttl at %v", got)
	}
	if got := at("x-idempotent", "key", "fields"); got != (Pos{File: "s.yaml", Line: 7, Col: 11}) {
		t.Errorf("key.fields at %v", got)
	}
	if got := at("x-idempotent", "nope"); got != base {
		t.Errorf("missing key at %v, want the base", got)
	}
	if got := at("x-flow", "ttl"); got != (Pos{File: "s.yaml", Line: 10, Col: 34}) {
		t.Errorf("flow ttl at %v", got)
	}
	if got := at("x-flow", "key", "header"); got != (Pos{File: "s.yaml", Line: 10, Col: 22}) {
		t.Errorf("flow key.header at %v", got)
	}
}

// TestLocateThroughRefs follows $refs into other files and fragments, and
// reports the file where the key is written.
func TestLocateThroughRefs(t *testing.T) {
	fs := testFiles(`openapi: 3.1.0
paths:
  /orders:
    $ref: paths/orders.yaml
  /items:
    $ref: "./paths/orders.yaml#/x-items"
  /loop: {$ref: '#/paths/~1loop'}
`, filepath.Join("paths", "orders.yaml"), `post:
  operationId: createOrder
  x-idempotent: {ttl: 1h}
x-items:
  put:
    x-idempotent:
      ttl: 2h
`)
	orders := filepath.Join("paths", "orders.yaml")
	for _, c := range []struct {
		keys []string
		want Pos
	}{
		{[]string{"paths", "/orders", "post", "x-idempotent", "ttl"}, Pos{File: orders, Line: 3, Col: 18}},
		{[]string{"paths", "/items", "put", "x-idempotent", "ttl"}, Pos{File: orders, Line: 7, Col: 7}},
		{[]string{"paths", "/items", "get"}, Pos{File: orders, Line: 4, Col: 1}}, // the path item it names
		{[]string{"paths", "/loop", "post"}, Pos{File: "s.yaml", Line: 7, Col: 3}},
	} {
		if got := fs.find(c.keys...); got != c.want {
			t.Errorf("%v at %v, want %v", c.keys, got, c.want)
		}
	}
}

// TestLocateJSONWithSurrogates places keys in a JSON document holding a
// surrogate-pair escape, which kin-openapi's origins do not survive.
func TestLocateJSONWithSurrogates(t *testing.T) {
	fs := testFiles(`{
  "info": {"title": "\uD83D\uDC4D \"quoted\" \\"},
  "paths": {
    "/\u00e9": {"post": {"x-idempotent": {"ttl": 3}}}
  }
}`)
	if got := fs.find("paths", "/é", "post", "x-idempotent", "ttl"); got != (Pos{File: "s.yaml", Line: 4, Col: 43}) {
		t.Errorf("ttl at %v", got)
	}
}

const minimal = `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /b:
    post:
      operationId: b
      x-idempotent: {ttl: 2h}
      responses: {"200": {description: ok}}
  /a:
    post:
      operationId: a
      x-idempotent: true
      responses: {"200": {description: ok}}
`

func gen(t *testing.T, spec string) (*Result, error) {
	t.Helper()
	return Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(spec), Package: "api", SkipStore: true})
}

func TestGenerateIsDeterministicAndConcurrent(t *testing.T) {
	first, err := gen(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	src := first.Files[PoliciesFile]
	if !regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`).Match(src) || !bytes.HasPrefix(src, []byte("// Code generated by idemgen "+Version()+". DO NOT EDIT.\n")) {
		t.Errorf("header missing:\n%s", src)
	}
	if i, j := bytes.Index(src, []byte("var APolicy")), bytes.Index(src, []byte("var BPolicy")); i < 0 || j < 0 || i > j {
		t.Errorf("policies not sorted by name")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := gen(t, minimal)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(res.Files[PoliciesFile], src) {
				t.Error("two runs gave different bytes")
			}
		})
	}
	wg.Wait()
}

func TestDiagnosticsAreSortedAndComplete(t *testing.T) {
	spec := strings.Replace(minimal, "{ttl: 2h}", "{ttl: 2 hours, lease: x}", 1)
	spec = strings.Replace(spec, "x-idempotent: true", "x-idempotent: {colour: red}", 1)
	_, err := gen(t, spec)
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("got %v, want Diagnostics", err)
	}
	want := []string{
		`openapi.yaml:7:22: x-idempotent.ttl: "2 hours" is not a duration (want e.g. 24h)`,
		`openapi.yaml:7:36: x-idempotent.lease: "x" is not a duration (want e.g. 24h)`,
		`openapi.yaml:12:22: x-idempotent: unknown field "colour"`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []Config{
		{Spec: "x", Package: "func", SkipStore: true},
		{Spec: "x", Package: "api"},
		{Spec: "x", Package: "api", Dialect: "oracle"},
		{Spec: "x", Package: "api", Dialect: "postgres", Table: "Keys"},
		{Spec: "x", Package: "api", Dialect: "postgres", Table: strings.Repeat("k", 49)},
		{Spec: "x", Package: "api", Dialect: "postgres", Table: "select"},
		{Spec: "x", Package: "api", Dialect: "postgres", Table: "1keys"},
		{Package: "api", SkipStore: true},
		// Checked before the spec (x, which does not exist) is read.
		{Spec: "x", Package: "api", SkipStore: true, AnnotateMutating: map[string]any{"tll": "1h"}},
		{Spec: "x", Package: "api", SkipStore: true, AnnotateMutating: map[string]any{"scope": "all"}},
	}
	for _, c := range cases {
		if _, err := Generate(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", c, err)
		}
	}
	for _, ok := range []string{"idempotency_keys", "_k", strings.Repeat("k", 48), "k2"} {
		c := Config{Spec: "x", Package: "api", Dialect: "postgres", Table: ok}
		if err := c.check(); err != nil {
			t.Errorf("table %q: %v", ok, err)
		}
	}
}

func TestPrincipalDefaultFollowsSecurity(t *testing.T) {
	spec := `openapi: 3.1.0
info: {title: t, version: "1"}
security: [{k: []}]
paths:
  /secured:
    post: {operationId: secured, x-idempotent: true, responses: {"200": {description: ok}}}
  /open:
    post: {operationId: open, security: [], x-idempotent: true, responses: {"200": {description: ok}}}
  /optional:
    post: {operationId: optional, security: [{}, {k: []}], x-idempotent: true, responses: {"200": {description: ok}}}
  /emptyOnly:
    post: {operationId: emptyOnly, security: [{}, {}], x-idempotent: true, responses: {"200": {description: ok}}}
  /forced:
    post: {operationId: forced, security: [], x-idempotent: {principal: auth}, responses: {"200": {description: ok}}}
  /subscribe:
    post:
      operationId: subscribe
      responses: {"200": {description: ok}}
      callbacks:
        onEvent:
          "{$request.body#/url}":
            post: {operationId: cbPlain, x-idempotent: true, responses: {"200": {description: ok}}}
            put: {operationId: cbSecured, security: [{k: []}], x-idempotent: true, responses: {"200": {description: ok}}}
webhooks:
  plain:
    post: {operationId: whPlain, x-idempotent: true, responses: {"200": {description: ok}}}
  secured:
    post: {operationId: whSecured, security: [{k: []}], x-idempotent: true, responses: {"200": {description: ok}}}
  optional:
    post: {operationId: whOptional, security: [{}, {k: []}], x-idempotent: true, responses: {"200": {description: ok}}}
components:
  securitySchemes:
    k: {type: apiKey, in: header, name: K}
`
	res, err := gen(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Principal{
		"secured": PrincipalAuth, "open": PrincipalAnonymous, "forced": PrincipalAuth,
		// An optional {} next to a real scheme still authenticates the
		// callers that present a key: their records must not be pooled.
		"optional": PrincipalAuth, "emptyOnly": PrincipalAnonymous,
		// The document's security is how clients call the API, not how the
		// provider calls webhooks and callbacks.
		"whPlain": PrincipalAnonymous, "whSecured": PrincipalAuth, "whOptional": PrincipalAuth,
		"cbPlain": PrincipalAnonymous, "cbSecured": PrincipalAuth,
	}
	got := map[string]Principal{}
	for _, o := range res.Model.Operations {
		got[o.ID()] = o.Principal
	}
	for id, w := range want {
		if p, ok := got[id]; !ok {
			t.Errorf("%s: no operation", id)
		} else if p != w {
			t.Errorf("%s: principal %v, want %v", id, p, w)
		}
	}
}

// TestAnonymousOnAuthenticatedWarns: principal: anonymous written on an
// operation that authenticates its callers generates (it may be meant) but
// warns, at the field; from x-idempotent-defaults it warns at the
// operation's annotation. Unauthenticated operations, auth, the default,
// and -annotate-mutating's flag do not warn.
func TestAnonymousOnAuthenticatedWarns(t *testing.T) {
	spec := `openapi: 3.1.0
info: {title: t, version: "1"}
security: [{k: []}]
x-idempotent-defaults: {ttl: 1h}
paths:
  /shared:
    post:
      operationId: shared
      x-idempotent:
        principal: anonymous
      responses: {"200": {description: ok}}
  /open:
    post: {operationId: open, security: [], x-idempotent: {principal: anonymous}, responses: {"200": {description: ok}}}
  /own:
    post: {operationId: own, x-idempotent: {principal: auth}, responses: {"200": {description: ok}}}
  /byDefault:
    post: {operationId: byDefault, x-idempotent: true, responses: {"200": {description: ok}}}
  /unannotated:
    post: {operationId: unannotated, responses: {"200": {description: ok}}}
components:
  securitySchemes:
    k: {type: apiKey, in: header, name: K}
`
	res, err := gen(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 {
		t.Fatalf("warnings %v, want one", res.Warnings)
	}
	w := res.Warnings[0].String()
	if !strings.HasPrefix(w, "openapi.yaml:10:9: warning: x-idempotent: principal anonymous (from x-idempotent) on POST /shared") || !strings.Contains(w, "another caller's key") {
		t.Errorf("warning = %q", w)
	}
	for _, o := range res.Model.Operations {
		if o.ID() == "shared" && o.Principal != PrincipalAnonymous {
			t.Errorf("shared: principal %v, want the anonymous it asks for", o.Principal)
		}
	}

	withDefaults := strings.Replace(spec, "x-idempotent-defaults: {ttl: 1h}", "x-idempotent-defaults: {principal: anonymous}", 1)
	res, err = gen(t, withDefaults)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range res.Warnings {
		got = append(got, d.String())
	}
	// shared (its own), byDefault (the defaults'); own overrides with auth.
	if len(got) != 2 || !strings.Contains(got[1], "(from x-idempotent-defaults) on POST /byDefault") {
		t.Errorf("with defaults: %q", got)
	}

	flag, err := Generate(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(spec), Package: "api", SkipStore: true,
		AnnotateMutating: map[string]any{"principal": "anonymous"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(flag.Warnings) != 1 {
		t.Errorf("-annotate-mutating: warnings %v, want only the spec's own", flag.Warnings)
	}
	ds, err := Lint(context.Background(), Config{Spec: "openapi.yaml", SpecData: []byte(spec)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ds.Error(), "warning: x-idempotent: principal anonymous") {
		t.Errorf("lint does not report the warning:\n%v", ds)
	}
}

// TestChallengesFollowSecurity: an auth operation's 401 challenges come from
// its effective security schemes, in requirement order and without repeats;
// an apiKey gives none, and anonymous operations carry none.
func TestChallengesFollowSecurity(t *testing.T) {
	spec := `openapi: 3.1.0
info: {title: 'Pay "Me" \ now ✓', version: "1"}
security: [{bearer: []}]
paths:
  /default:
    post: {operationId: byDefault, x-idempotent: true, responses: {"200": {description: ok}}}
  /either:
    post: {operationId: either, security: [{oauth: [write]}, {basic: []}, {bearer: []}], x-idempotent: true, responses: {"200": {description: ok}}}
  /both:
    post: {operationId: both, security: [{key: [], basic: []}], x-idempotent: true, responses: {"200": {description: ok}}}
  /keyOnly:
    post: {operationId: keyOnly, security: [{key: []}], x-idempotent: true, responses: {"200": {description: ok}}}
  /digest:
    post: {operationId: digest, security: [{digest: []}], x-idempotent: true, responses: {"200": {description: ok}}}
  /open:
    post: {operationId: open, security: [], x-idempotent: true, responses: {"200": {description: ok}}}
components:
  securitySchemes:
    bearer: {type: http, scheme: Bearer}
    basic: {type: http, scheme: basic}
    digest: {type: http, scheme: digest}
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://a.example/token", scopes: {write: w}}}}
    key: {type: apiKey, in: header, name: X-API-Key}
`
	res, err := gen(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	basic := `Basic realm="Pay \"Me\" \\ now "`
	want := map[string][]string{
		"byDefault": {"Bearer"},
		"either":    {"Bearer", basic},
		"both":      {basic},
		"keyOnly":   nil,
		"digest":    nil,
		"open":      nil,
	}
	for _, o := range res.Model.Operations {
		if w, ok := want[o.ID()]; !ok {
			t.Errorf("unexpected operation %s", o.ID())
		} else if !slices.Equal(o.Challenges, w) {
			t.Errorf("%s: challenges %q, want %q", o.ID(), o.Challenges, w)
		}
	}
	if src := string(res.Files["idemgen_policies.go"]); !strings.Contains(src, "Challenges:") {
		t.Error("the policies file sets no Challenges")
	}
	// Security naming schemes that a document without components lacks:
	// no challenge, and no panic.
	noComponents := `openapi: 3.0.3
info: {title: t, version: "1"}
security: [{bearer: []}]
paths:
  /x:
    post: {operationId: x, x-idempotent: true, responses: {"200": {description: ok}}}
`
	res, err = gen(t, noComponents)
	if err != nil {
		t.Fatalf("a document without components: %v", err)
	}
	if o := res.Model.Operations[0]; o.Principal != PrincipalAuth || len(o.Challenges) != 0 {
		t.Errorf("without components: principal %v, challenges %q; want auth and none", o.Principal, o.Challenges)
	}
}

func TestServerEnumBasePaths(t *testing.T) {
	mk := func(url string, vars map[string]*openapi3.ServerVariable) *openapi3.Server {
		return &openapi3.Server{URL: url, Variables: vars}
	}
	cases := []struct {
		s    *openapi3.Server
		want []string
	}{
		{mk("https://api.x/{version}", map[string]*openapi3.ServerVariable{"version": {Default: "v1", Enum: []string{"v2", "v1", "v2"}}}), []string{"/v1", "/v2"}},
		// Host enums do not multiply base paths.
		{mk("https://{region}.x.com/{version}/api", map[string]*openapi3.ServerVariable{
			"region":  {Default: "eu", Enum: []string{"eu", "us", "ap"}},
			"version": {Default: "v1", Enum: []string{"v1", "beta"}},
		}), []string{"/beta/api", "/v1/api"}},
		// No enum, a whole segment: a parameter, any value matches.
		{mk("https://api.x/{base}", map[string]*openapi3.ServerVariable{"base": {Default: "v3"}}), []string{"/{base}"}},
		{mk("https://{host}/t/{tenant}/api", map[string]*openapi3.ServerVariable{"host": {Default: "x.com"}, "tenant": {Default: "acme"}}), []string{"/t/{tenant}/api"}},
		// No enum, not a whole segment, or several: the default.
		{mk("https://api.x/api-{version}", map[string]*openapi3.ServerVariable{"version": {Default: "v3"}}), []string{"/api-v3"}},
		{mk("https://api.x/{basePath}", map[string]*openapi3.ServerVariable{"basePath": {Default: "api/v3"}}), []string{"/api/v3"}},
		{mk("https://api.x/{v}/{v}", map[string]*openapi3.ServerVariable{"v": {Default: "a"}}), []string{"/a/a"}},
		// Named like a path parameter of the route: the default.
		{mk("https://api.x/{id}", map[string]*openapi3.ServerVariable{"id": {Default: "v1"}}), []string{"/v1"}},
		// Decoded, whichever value it comes from.
		{mk("https://api.x/{p}", map[string]*openapi3.ServerVariable{"p": {Default: "a%20b", Enum: []string{"a%20b", "c"}}}), []string{"/a b", "/c"}},
		{mk("https://api.x", nil), []string{""}},
	}
	for _, c := range cases {
		if got := serverBasePaths(c.s, map[string]bool{"id": true}); !slices.Equal(got, c.want) {
			t.Errorf("serverBasePaths(%q) = %q, want %q", c.s.URL, got, c.want)
		}
	}
	// An enum per variable: bounded, never an explosion.
	vars := map[string]*openapi3.ServerVariable{}
	url := "https://x"
	for i := range 12 {
		n := fmt.Sprintf("v%d", i)
		vars[n] = &openapi3.ServerVariable{Default: "a", Enum: []string{"a", "b", "c"}}
		url += "/{" + n + "}"
	}
	if got := serverBasePaths(mk(url, vars), nil); len(got) == 0 || len(got) > maxServerURLs {
		t.Errorf("12 enum variables: %d base paths", len(got))
	}
}

func TestEmitValues(t *testing.T) {
	spec := strings.Replace(minimal, "{ttl: 2h}", `{ttl: 36h, lease: 1500ms, wait: 1s, max-request-bytes: 1000, max-response-bytes: 2MiB, transactional: true, save: ["1xx", 3xx, "425"]}`, 1)
	res, err := gen(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Join(strings.Fields(string(res.Files[PoliciesFile])), " ")
	for _, want := range []string{
		"TTL: 36 * time.Hour,",
		"Lease: 1500 * time.Millisecond,",
		"Wait: time.Second,",
		"MaxRequestBytes: 1000,",
		"MaxResponseBytes: 2 << 20,",
		"Transactional: true,",
		"Classes: idemrt.Class1xx | idemrt.Class3xx,",
		"Codes: []int{425},",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("output lacks %q:\n%s", want, src)
		}
	}
	if o := res.Model.Operations[1]; o.TTL != 36*time.Hour || o.MaxResponseBytes != 2<<20 {
		t.Errorf("model %+v", o)
	}
}

func TestNotOpenAPI3(t *testing.T) {
	for _, spec := range []string{
		"swagger: '2.0'\ninfo: {title: t, version: '1'}\npaths: {}\n",
		"openapi: 2.5.0\ninfo: {title: t, version: '1'}\npaths: {}\n",
	} {
		_, err := gen(t, spec)
		var ds Diagnostics
		if !errors.As(err, &ds) || !strings.Contains(err.Error(), "not an OpenAPI 3.0 or 3.1 document") {
			t.Errorf("%q: got %v", spec, err)
		}
	}
}
