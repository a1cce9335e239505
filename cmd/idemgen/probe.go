package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/idemgen/idemgen/generator"
	idemrt "github.com/idemgen/idemgen/runtime"
)

const probeUsage = `Usage: idemgen probe -spec FILE -base URL [-H 'Name: value' ...] [-full]

Sends a running deployment the probes that idemrt.CheckCoverage sends in
process: for each annotated operation, a request the idempotency
middleware refuses before any handler runs (a malformed key, a body
without the key's fields, or a body over max-request-bytes), then a
request with a method no policy protects, which the router must answer
405, not 404. Nothing is claimed or stored: safe against production.

It prints every annotated operation with PROTECTED or NOT PROVEN and why
(not served, stopped in front of the middleware, base path, answered by a
handler), and exits 1 when any is not proven, 2 on usage or an
unreachable -base. -base is the deployment's root URL; the spec's servers
(or -base-path) give the paths under it. Give credentials the stack wants
in front of the middleware with -H (repeatable), e.g. an Authorization
header, or the signature of a webhook's probe body {}.

-full, for staging only, then sends real requests to each operation with a
header or query key: a fresh key twice (the second must replay, when the
first answer is one the operation saves), a changed body with the same key
(422), and 4 concurrent duplicates of a new key (at most one runs; the
others replay, get 409 or wait). Those requests run the handlers. The body
is {"idemgen_probe":true}, or the JSON object that -body OP=FILE gives for
operation OP (repeatable). An operation whose key comes from its body gets
real requests only with -body: 4 concurrent copies of it (at most one runs),
one more (it must replay), and, for a fields key, the body with a member
added (422: the same key, another request). Give a body whose key is new,
e.g. a fresh order id, and valid for the handler, so that it saves its answer.

Flags:
`

type probeOpts struct {
	spec, base, annotate string
	headers              headerFlag
	basePaths            basePathsFlag
	allowRemote, full    bool
	timeout              time.Duration
	bodies               bodyFlag
}

// bodyFlag collects -body OP=FILE: the JSON object -full sends to OP.
type bodyFlag map[string][]byte

func (b *bodyFlag) String() string { return "" }

func (b *bodyFlag) Set(v string) error {
	op, file, ok := strings.Cut(v, "=")
	if !ok || op == "" || file == "" {
		return errors.New("want OP=FILE")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("%s: want a JSON object: %v", file, err)
	}
	if *b == nil {
		*b = bodyFlag{}
	}
	if _, dup := (*b)[op]; dup {
		return fmt.Errorf("%s: given twice", op)
	}
	(*b)[op] = data
	return nil
}

// withProbeMember is body (a JSON object) with the member "idemgen_probe"
// set: another request under the same fields key.
func withProbeMember(body []byte) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return []byte(`{"idemgen_probe":false}`)
	}
	obj["idemgen_probe"] = json.RawMessage(`"changed"`)
	out, _ := json.Marshal(obj)
	return out
}

// headerFlag collects -H 'Name: value'.
type headerFlag []string

func (h *headerFlag) String() string { return strings.Join(*h, "; ") }

func (h *headerFlag) Set(v string) error {
	name, _, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(strings.TrimSpace(name), " \t") {
		return errors.New("want 'Name: value'")
	}
	*h = append(*h, v)
	return nil
}

func probeFlags(stderr io.Writer) (*flag.FlagSet, *probeOpts) {
	o := &probeOpts{}
	fs := flag.NewFlagSet("idemgen probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.spec, "spec", "", "the OpenAPI document (YAML or JSON; - reads standard input)")
	fs.StringVar(&o.base, "base", "", "the deployment's root URL (http://host:port or https://host/prefix)")
	fs.Var(&o.headers, "H", "a header `'Name: value'` added to every probe (repeatable)")
	fs.Var(&o.basePaths, "base-path", "as generate's: probe the operations under this base `path` instead of the spec's servers' (repeatable)")
	fs.StringVar(&o.annotate, "annotate-mutating", "", "as generate's: probe the operations it annotates too")
	fs.BoolVar(&o.full, "full", false, "staging only: also send real requests (replay, 422 on a changed body, concurrent duplicates)")
	fs.Var(&o.bodies, "body", "with -full: `OP=FILE`, the JSON object sent to operation OP (repeatable)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long one request may take")
	remoteRefsFlag(fs, &o.allowRemote)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), probeUsage)
		fs.PrintDefaults()
	}
	return fs, o
}

func runProbe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const cmd = "idemgen probe"
	fs, o := probeFlags(stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.base == "" {
		fmt.Fprintf(stderr, "%s: want -base URL\n", cmd)
		return exitUsage
	}
	base, err := url.Parse(o.base)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintf(stderr, "%s: -base %q is not an http:// or https:// URL\n", cmd, o.base)
		return exitUsage
	}
	fc, ok := specOrConfig(cmd, fs, &o.spec, &o.allowRemote, stderr)
	if !ok {
		return exitUsage
	}
	if fc != nil {
		set := given(fs)
		basePaths, annotate, err := fc.shared(set)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
			return exitUsage
		}
		if !set["base-path"] {
			o.basePaths = basePaths
		}
		if !set["annotate-mutating"] {
			o.annotate = annotate
		}
	}
	cfg := generator.Config{Package: "probe", SkipStore: true, AllowRemoteRefs: o.allowRemote, BasePaths: o.basePaths}
	if cfg.AnnotateMutating, ok = annotateMutating(cmd, o.annotate, stderr); !ok {
		return exitUsage
	}
	if !readSpec(cmd, o.spec, stdin, &cfg, stderr) {
		return exitError
	}
	res, err := generator.Generate(ctx, cfg)
	if err != nil {
		return reportErr(cmd, err, stderr)
	}
	printAll(stderr, res.Warnings)

	if err := checkBodies(o, res.Model.Operations); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitUsage
	}
	rt := newRemote(base, o)
	// One request first, so that a wrong URL is one line, not one error
	// per operation.
	if err := rt.reachable(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: cannot reach %s: %v\n", cmd, o.base, err)
		return exitUsage
	}
	var failed int
	for _, op := range res.Model.Operations {
		if !probeOperation(ctx, rt, o, op, stdout) {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "%s: %d of %d operations not proven protected at %s\n", cmd, failed, len(res.Model.Operations), o.base)
		return exitError
	}
	fmt.Fprintf(stderr, "%s: %d operations protected at %s\n", cmd, len(res.Model.Operations), o.base)
	return exitOK
}

// checkBodies refuses a -body for an operation the spec does not annotate,
// and -body without -full.
func checkBodies(o *probeOpts, ops []*generator.Operation) error {
	if len(o.bodies) == 0 {
		return nil
	}
	if !o.full {
		return errors.New("-body needs -full")
	}
	known := map[string]bool{}
	for _, op := range ops {
		known[op.OperationID] = true
	}
	for id := range o.bodies {
		if !known[id] {
			return fmt.Errorf("-body %s: the spec has no annotated operation %s", id, id)
		}
	}
	return nil
}

// newRemote is the forwarder to base with the -H headers and -timeout.
func newRemote(base *url.URL, o *probeOpts) *remote {
	rt := &remote{base: base, client: &http.Client{Timeout: o.timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, h := range o.headers {
		name, value, _ := strings.Cut(h, ":")
		rt.header = append(rt.header, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
	}
	return rt
}

// probeOperation sends one operation CheckCoverage's probes (and with
// -full, real requests), prints its line and reports whether it is proven.
func probeOperation(ctx context.Context, rt *remote, o *probeOpts, op *generator.Operation, stdout io.Writer) bool {
	p := policyOf(op)
	if !op.Routed() {
		fmt.Fprintf(stdout, "%-28s %-6s %-32s NOT PROVEN: a webhook or callback has no route of its own; probe where it is mounted with CheckCoverage\n", p.OperationID, p.Method, op.Path)
		return false
	}
	rt.reset()
	err := idemrt.CheckCoverage(rt, []*idemrt.Policy{p}, idemrt.CoverageOptions{})
	if netErr := rt.failure(); netErr != nil {
		err = netErr
	} else if why := rt.stripped(p); err == nil && why != "" {
		err = errors.New(why)
	}
	paths := strings.Join(fullPaths(op), " ")
	if err != nil {
		fmt.Fprintf(stdout, "%-28s %-6s %-32s NOT PROVEN: %s\n", p.OperationID, p.Method, paths, probeReason(err))
		return false
	}
	line, ok := "PROTECTED", true
	if o.full {
		line, ok = probeFull(ctx, rt, o, op, p)
	}
	fmt.Fprintf(stdout, "%-28s %-6s %-32s %s\n", p.OperationID, p.Method, paths, line)
	return ok
}

// probeFull is -full's verdict on an operation CheckCoverage proved: real
// requests with its key (fullCheck), or with its -body when the key comes
// from the body (fullCheckBody).
func probeFull(ctx context.Context, rt *remote, o *probeOpts, op *generator.Operation, p *idemrt.Policy) (string, bool) {
	body, given := o.bodies[p.OperationID]
	if !given {
		body = []byte(`{"idemgen_probe":true}`)
	}
	check, done := fullCheck, "PROTECTED (-full: replay, 422, duplicates)"
	if p.Key != idemrt.KeyFromHeader && p.Key != idemrt.KeyFromQuery {
		if !given {
			return "PROTECTED (-full: no real request: its key comes from the body; give -body " + p.OperationID + "=FILE)", true
		}
		check = fullCheckBody
		if p.Key == idemrt.KeyFromBody {
			done = "PROTECTED (-full: replay, duplicates; a changed body is a new key)"
		}
	}
	if why := check(ctx, rt, op, p, body); why != "" {
		return "NOT PROVEN (-full): " + why, false
	}
	return done, true
}

// probeReason is CheckCoverage's error for one operation, without the
// prefix every line repeats.
func probeReason(err error) string {
	var msgs []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if _, rest, ok := strings.Cut(line, ": answered "); ok {
			line = "answered " + rest
		}
		msgs = append(msgs, line)
	}
	r := strings.Join(msgs, "; ")
	return strings.NewReplacer("with CoverageOptions.Prepare", "with -H", "Options.BasePaths / -base-path", "-base-path (and the middleware's Options.BasePaths)").Replace(r)
}

// policyOf is the runtime policy of a generated operation: what the
// generated Policies() holds for it.
func policyOf(o *generator.Operation) *idemrt.Policy {
	p := o.Policy
	p.Route = o.Path
	return &p
}

// remote is an http.Handler that forwards each request to the deployment
// and writes its answer back: CheckCoverage's probes then cross the
// network unchanged.
type remote struct {
	base   *url.URL
	client *http.Client
	header [][2]string

	mu  sync.Mutex
	err error
	// refusal is the problem type of the last answer to a probe that is
	// not the IDEMGEN-PROBE follow-up.
	refusal string
}

func (rt *remote) reset() {
	rt.mu.Lock()
	rt.err, rt.refusal = nil, ""
	rt.mu.Unlock()
}

// failure is the first transport error since reset, as a probe's error.
func (rt *remote) failure() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.err == nil {
		return nil
	}
	return fmt.Errorf("not served: %v", rt.err)
}

func (rt *remote) reachable(ctx context.Context) error {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, rt.base.String(), nil)
	if err != nil {
		return err
	}
	res, err := rt.client.Do(r)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	res.Body.Close()
	return nil
}

// target is path (escaped) under the base URL.
func (rt *remote) target(path, rawQuery string) string {
	u := *rt.base
	u.RawPath = ""
	u.Path = ""
	prefix := strings.TrimSuffix(rt.base.EscapedPath(), "/")
	s := u.String() + prefix + path
	if rawQuery != "" {
		s += "?" + rawQuery
	}
	return s
}

func (rt *remote) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, rt.target(r.URL.EscapedPath(), r.URL.RawQuery), r.Body)
	if err == nil {
		out.Header = r.Header.Clone()
		for _, h := range rt.header {
			out.Header.Set(h[0], h[1])
		}
		out.ContentLength = r.ContentLength
		if r.Body == http.NoBody || r.Body == nil {
			out.Body = http.NoBody
		}
	}
	var res *http.Response
	if err == nil {
		res, err = rt.client.Do(out)
	}
	if err != nil {
		rt.mu.Lock()
		if rt.err == nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			rt.err = err
		}
		rt.mu.Unlock()
		http.Error(w, "idemgen probe: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, vs := range res.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(res.StatusCode)
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	_, _ = w.Write(body)
	if r.Method != "IDEMGEN-PROBE" {
		var pb idemrt.Problem
		_ = json.Unmarshal(body, &pb)
		rt.mu.Lock()
		rt.refusal = pb.Type
		rt.mu.Unlock()
	}
}

// stripped says why a refused probe of a header or query key still does
// not prove the operation: the key it carried did not reach the
// middleware (key-missing instead of key-malformed), so a gateway or
// proxy in front removes it and every real request is refused too.
func (rt *remote) stripped(p *idemrt.Policy) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.refusal != idemrt.ProblemKeyMissing {
		return ""
	}
	switch p.Key {
	case idemrt.KeyFromHeader:
		return "header stripped: the probe's " + p.KeyName + " header did not reach the middleware (it answered key-missing): a gateway or proxy in front removes it, so every request with a key is refused"
	case idemrt.KeyFromQuery:
		return "query parameter stripped: the probe's " + p.KeyName + " did not reach the middleware (it answered key-missing): a gateway or proxy in front removes it"
	}
	return ""
}

// fullCheck sends real requests to an operation with a header or query
// key (-full) and says what is wrong, or "" when everything held.
func fullCheck(ctx context.Context, rt *remote, op *generator.Operation, p *idemrt.Policy, payload []byte) string {
	path := probePath(op)
	key := fmt.Sprintf("idemgen-probe-%d", time.Now().UnixNano())
	send := func(key, body string) (*http.Response, []byte, error) {
		return rt.send(ctx, p, path, key, body)
	}
	body := string(payload)
	first, fb, err := send(key, body)
	if err != nil {
		return err.Error()
	}
	second, sb, err := send(key, body)
	if err != nil {
		return err.Error()
	}
	saved := p.Save.Saves(first.StatusCode)
	if saved {
		if second.Header.Get("Idempotent-Replayed") != "true" || second.StatusCode != first.StatusCode || !bytes.Equal(sb, fb) {
			return fmt.Sprintf("a retry with the same key got %d (Idempotent-Replayed %q), not the replay of %d", second.StatusCode, second.Header.Get("Idempotent-Replayed"), first.StatusCode)
		}
		changed, _, err := send(key, string(withProbeMember(payload)))
		if err != nil {
			return err.Error()
		}
		if changed.StatusCode != http.StatusUnprocessableEntity {
			return fmt.Sprintf("the same key with a changed body got %d, not 422", changed.StatusCode)
		}
	}
	dup := fmt.Sprintf("idemgen-probe-dup-%d", time.Now().UnixNano())
	answers, err := concurrently(4, func() (*http.Response, []byte, error) { return send(dup, body) })
	if err != nil {
		return err.Error()
	}
	if ran := ranHandler(p, answers); len(ran) > 1 {
		return fmt.Sprintf("%d of 4 concurrent duplicates ran the handler", len(ran))
	}
	if !saved {
		return fmt.Sprintf("not checked: the first answer, %d, is not one the operation saves (send a valid body? -full sends {\"idemgen_probe\":true})", first.StatusCode)
	}
	return ""
}

// fullCheckBody sends real requests to an operation whose key comes from its
// body (-full with -body): 4 concurrent copies of body (at most one runs
// the handler), one more (a replay when an answer was saved) and, for a
// fields key, body with a member added (422). It says what is wrong, or ""
// when everything held.
func fullCheckBody(ctx context.Context, rt *remote, op *generator.Operation, p *idemrt.Policy, body []byte) string {
	path := probePath(op)
	send := func(b []byte) (*http.Response, []byte, error) { return rt.send(ctx, p, path, "", string(b)) }
	answers, err := concurrently(4, func() (*http.Response, []byte, error) { return send(body) })
	if err != nil {
		return err.Error()
	}
	ran := ranHandler(p, answers)
	saved := len(ran) > 0
	for _, a := range answers {
		saved = saved || a.res.Header.Get("Idempotent-Replayed") == "true"
	}
	if len(ran) > 1 {
		return fmt.Sprintf("%d of 4 concurrent copies of the body ran the handler", len(ran))
	}
	if !saved {
		return "not checked: no answer to the body is one the operation saves (give a -body the handler accepts, with a new key)"
	}
	again, ab, err := send(body)
	if err != nil {
		return err.Error()
	}
	if again.Header.Get("Idempotent-Replayed") != "true" {
		return fmt.Sprintf("the same body again got %d without Idempotent-Replayed, not a replay", again.StatusCode)
	}
	if len(ran) == 1 && (again.StatusCode != ran[0].res.StatusCode || !bytes.Equal(ab, ran[0].body)) {
		return fmt.Sprintf("the same body again got %d, not the replay of %d", again.StatusCode, ran[0].res.StatusCode)
	}
	if p.Key == idemrt.KeyFromFields {
		changed, _, err := send(withProbeMember(body))
		if err != nil {
			return err.Error()
		}
		if changed.StatusCode != http.StatusUnprocessableEntity {
			return fmt.Sprintf("the body with a member added (the same fields key) got %d, not 422", changed.StatusCode)
		}
	}
	return ""
}

// answer is one response to a -full request, with its body.
type answer struct {
	res  *http.Response
	body []byte
}

// concurrently sends n requests at once and returns their answers, or the
// first error.
func concurrently(n int, send func() (*http.Response, []byte, error)) ([]answer, error) {
	answers := make([]answer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, b, err := send()
			answers[i], errs[i] = answer{res, b}, err
		})
	}
	wg.Wait()
	return answers, errors.Join(errs...)
}

// ranHandler is the answers the handler produced: not replayed, not the
// middleware's 409, and a status the operation saves.
func ranHandler(p *idemrt.Policy, answers []answer) []answer {
	var ran []answer
	for _, a := range answers {
		if a.res.Header.Get("Idempotent-Replayed") != "true" && a.res.StatusCode != http.StatusConflict && p.Save.Saves(a.res.StatusCode) {
			ran = append(ran, a)
		}
	}
	return ran
}

// send sends body to the operation at path with key (in its header or
// query parameter; none when key is ""), and the -H headers.
func (rt *remote) send(ctx context.Context, p *idemrt.Policy, path, key, body string) (*http.Response, []byte, error) {
	target := rt.target(path, "")
	if p.Key == idemrt.KeyFromQuery && key != "" {
		target = rt.target(path, url.QueryEscape(p.KeyName)+"="+url.QueryEscape(key))
	}
	r, err := http.NewRequestWithContext(ctx, p.Method, target, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	if p.Key == idemrt.KeyFromHeader && key != "" {
		r.Header.Set(p.KeyName, key)
	}
	for _, h := range rt.header {
		r.Header.Set(h[0], h[1])
	}
	res, err := rt.client.Do(r)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res, b, err
}

// probePath is the operation's first full path with every parameter "1".
func probePath(op *generator.Operation) string {
	p := fullPaths(op)[0]
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '{')
		if i < 0 {
			b.WriteString(p)
			return b.String()
		}
		j := strings.IndexByte(p[i:], '}')
		if j < 0 {
			b.WriteString(p)
			return b.String()
		}
		b.WriteString(p[:i] + "1")
		p = p[i+j+1:]
	}
}
