package runtime_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// validatorCases holds, for every error the runtime's validators can
// return (TestValidatorCasesCoverEveryError checks that), a policy that
// has it and nothing else.
var validatorCases = []struct {
	name    string
	mutate  func(*idemrt.Policy)
	env     idemrt.PolicyEnv
	section string
	field   string
	msg     string
}{
	{"method", func(p *idemrt.Policy) { p.Method = "post" }, fullEnv, "route", "Method", `method "post" is not an upper-case HTTP method`},
	{"route", func(p *idemrt.Policy) { p.Route = "orders" }, fullEnv, "route", "Route", `path "orders" does not start with /`},
	{"route query", func(p *idemrt.Policy) { p.Route = "/orders?beta=true" }, fullEnv, "route", "Route", `path "/orders?beta=true" holds a query string or fragment (?beta=true), which no request's path does, so it would never match`},
	{"base path slash", func(p *idemrt.Policy) { p.BasePaths = []string{"v1"} }, fullEnv, "route", "BasePaths", `base path "v1" does not start with /`},
	{"base path template", func(p *idemrt.Policy) { p.BasePaths = []string{"/{a"} }, fullEnv, "route", "BasePaths", `path "/{a/orders"`},
	{"key header", func(p *idemrt.Policy) { p.KeyName = "Bad Key" }, fullEnv, "key", "KeyName", `key header "Bad Key" is not a valid header name`},
	{"key query", func(p *idemrt.Policy) { p.Key = idemrt.KeyFromQuery }, fullEnv, "key", "KeyName", `key from query needs KeyName`},
	{"key fields", func(p *idemrt.Policy) { p.Key = idemrt.KeyFromFields }, fullEnv, "key", "KeyFields", `key from fields needs KeyFields`},
	{"key field path", func(p *idemrt.Policy) { p.Key, p.KeyFields = idemrt.KeyFromFields, []string{"a..b"} }, fullEnv, "key", "KeyFields", `key field "a..b" is not a dotted path such as order.id`},
	{"key source", func(p *idemrt.Policy) { p.Key = 9 }, fullEnv, "key", "Key", `unknown key source 9`},
	{"key name for body", func(p *idemrt.Policy) { p.Key, p.KeyName = idemrt.KeyFromBody, "X" }, fullEnv, "key", "KeyName", `KeyName "X" set for a key that is not read from a header or query parameter`},
	{"principal function", func(p *idemrt.Policy) { p.Principal = idemrt.PrincipalAuth }, idemrt.PolicyEnv{TxStore: true}, "principal", "Principal", `principal mode is auth (keys per caller) but Options.Principal is nil`},
	{"principal mode", func(p *idemrt.Policy) { p.Principal = 7 }, fullEnv, "principal", "Principal", `unknown principal mode 7`},
	{"challenges anonymous", func(p *idemrt.Policy) { p.Challenges = []string{"Bearer"} }, fullEnv, "principal", "Challenges", `Challenges set on an anonymous operation, which never answers 401`},
	{"challenge", func(p *idemrt.Policy) { p.Principal, p.Challenges = idemrt.PrincipalAuth, []string{"Bearer\nx"} }, fullEnv, "principal", "Challenges", `challenge "Bearer\nx" is not a WWW-Authenticate challenge`},
	{"include and exclude", func(p *idemrt.Policy) { p.FingerprintInclude, p.FingerprintExclude = []string{"/a"}, []string{"/b"} }, fullEnv, "fingerprint", "FingerprintInclude", `fingerprint include and exclude are both set`},
	{"include pointer", func(p *idemrt.Policy) { p.FingerprintInclude = []string{"a"} }, fullEnv, "fingerprint", "FingerprintInclude", `fingerprint include: JSON pointer "a" does not start with /`},
	{"exclude count", func(p *idemrt.Policy) { p.FingerprintExclude = manyPointers(65) }, fullEnv, "fingerprint", "FingerprintExclude", `more than 64 fingerprint exclude pointers`},
	{"exclude pointer", func(p *idemrt.Policy) { p.FingerprintExclude = []string{"/a~2"} }, fullEnv, "fingerprint", "FingerprintExclude", `fingerprint exclude: JSON pointer "/a~2": ~ must be followed by 0 or 1`},
	{"exclude whole body", func(p *idemrt.Policy) { p.FingerprintExclude = []string{""} }, fullEnv, "fingerprint", "FingerprintExclude", `fingerprint exclude "" would exclude the whole body`},
	{"negative wait", func(p *idemrt.Policy) { p.Wait = -time.Second }, fullEnv, "limits", "Wait", `negative ttl, lease or wait (0s, 0s, -1s)`},
	{"ttl shorter than lease", func(p *idemrt.Policy) { p.TTL, p.Lease = time.Second, time.Minute }, fullEnv, "limits", "TTL", `ttl 1s is shorter than lease 1m0s`},
	{"negative size", func(p *idemrt.Policy) { p.MaxRequestBytes = -1 }, fullEnv, "limits", "MaxRequestBytes", `negative max-response-bytes or max-request-bytes`},
	{"save classes", func(p *idemrt.Policy) { p.Save.Classes = 1 << 6 }, fullEnv, "save", "Save", `save rule has unknown status classes 1000000`},
	{"save code", func(p *idemrt.Policy) { p.Save.Codes = []int{600} }, fullEnv, "save", "Save", `save rule lists status 600, not a status code`},
	{"replay header", func(p *idemrt.Policy) { p.ReplayHeaders = []string{"Bad Header"} }, fullEnv, "replay", "ReplayHeaders", `replay header "Bad Header" is not a valid header name`},
	{"transactional", func(p *idemrt.Policy) { p.Transactional = true }, idemrt.PolicyEnv{Principal: true, Store: plainStore{}}, "tx", "Transactional", `transactional mode needs a store that implements TxStore; runtime_test.plainStore does not`},
}

// fullEnv has every Option a policy may need.
var fullEnv = idemrt.PolicyEnv{Principal: true, TxStore: true}

// plainStore is a Store that is not a TxStore.
type plainStore struct{ idemrt.Store }

func manyPointers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "/f" + strings.Repeat("x", i)
	}
	return out
}

func validPolicy() *idemrt.Policy {
	return &idemrt.Policy{OperationID: "op", Method: http.MethodPost, Route: "/orders", Principal: idemrt.PrincipalAnonymous}
}

// TestValidatePolicyIsWhatNewMiddlewareRefuses: every validator error is
// returned by ValidatePolicy for its field alone, and NewMiddleware (in
// the same environment) refuses the policy with the same message; the
// valid policy passes both.
func TestValidatePolicyIsWhatNewMiddlewareRefuses(t *testing.T) {
	if errs := idemrt.ValidatePolicy(validPolicy(), idemrt.PolicyEnv{}); len(errs) > 0 {
		t.Fatalf("the valid policy: %v", errs)
	}
	for _, c := range validatorCases {
		t.Run(c.name, func(t *testing.T) {
			p := validPolicy()
			c.mutate(p)
			errs := idemrt.ValidatePolicy(p, c.env)
			if len(errs) != 1 {
				t.Fatalf("got %d errors %v, want one", len(errs), errs)
			}
			e := errs[0]
			if e.Section != c.section || e.Field != c.field || !strings.HasPrefix(e.Msg, c.msg) {
				t.Errorf("got %s/%s %q, want %s/%s %q", e.Section, e.Field, e.Msg, c.section, c.field, c.msg)
			}
			opts := idemrt.Options{Store: plainStore{idemrt.NewMemoryStore()}}
			if c.env.Principal {
				opts.Principal = func(*http.Request) (string, error) { return "p", nil }
			}
			if c.env.TxStore {
				opts.Store = &claimTxStore{MemoryStore: idemrt.NewMemoryStore()}
			}
			_, err := idemrt.NewMiddleware(opts, p)
			if err == nil || !strings.Contains(err.Error(), "idempotency: operation op: "+e.Msg) {
				t.Errorf("NewMiddleware: %v, want the validator's message %q", err, e.Msg)
			}
			if c.env == fullEnv || c.section != "principal" && c.section != "tx" {
				// Without the environment's needs, the policy is refused
				// for them too, never accepted.
				return
			}
			if errs := idemrt.ValidatePolicy(p, fullEnv); len(errs) != 0 {
				t.Errorf("in the generation environment: %v, want none", errs)
			}
		})
	}
}

// TestValidatorCasesCoverEveryError: each error a validator in
// validate.go can add has a case in validatorCases.
func TestValidatorCasesCoverEveryError(t *testing.T) {
	src, err := os.ReadFile("validate.go")
	if err != nil {
		t.Fatal(err)
	}
	calls := regexp.MustCompile(`f\.add\((\w+|"\w+"), [-\w]+, "((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(string(src), -1)
	if n := strings.Count(string(src), "f.add("); len(calls) != n {
		t.Fatalf("the pattern matches %d of the %d f.add calls in validate.go", len(calls), n)
	}
	if len(calls) < 20 {
		t.Fatalf("found %d f.add calls in validate.go; the pattern no longer matches them", len(calls))
	}
	verb := regexp.MustCompile(`%[vqdbTs]`)
	for _, call := range calls {
		// A field named by a variable (one of several) matches any.
		field, format := strings.Trim(call[1], `"`), call[2]
		anyField := !strings.HasPrefix(call[1], `"`)
		parts := verb.Split(strings.ReplaceAll(format, `\"`, `"`), -1)
		for i, part := range parts {
			parts[i] = regexp.QuoteMeta(part)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, "(?s:.*)") + "$")
		found := false
		for _, c := range validatorCases {
			p := validPolicy()
			c.mutate(p)
			for _, e := range idemrt.ValidatePolicy(p, c.env) {
				if (anyField || e.Field == field) && re.MatchString(e.Msg) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no case in validatorCases has the %s error %q", field, format)
		}
	}
}
