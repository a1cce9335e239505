package generator

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/internal/policysyntax"
)

// annotation is one decoded x-idempotent object (or x-idempotent-defaults):
// every field a pointer or nil slice, so that merging can tell "not set".
type annotation struct {
	key           *keySpec
	required      *bool
	scope         *string
	principal     *Principal
	fingerprint   *fingerprintSpec
	ttl           *durationAt
	lease         *durationAt
	wait          *durationAt
	replayHeaders []string
	replaySet     bool
	save          *SaveRule
	maxResponse   *int64
	maxRequest    *int64
	transactional *bool
	// bad names the fields written with a value that was rejected (or,
	// for an unknown field, the field it is a likely typo of), so that
	// the checks that depend on them do not report follow-on errors; all
	// is set when the annotation as a whole is not an object.
	bad map[string]bool
	all bool
	// fields are the fields the annotation writes.
	fields map[string]bool
}

// unsure reports whether the layer wrote field with a rejected value.
func (a *annotation) unsure(field string) bool { return a.all || a.bad[field] }

type durationAt struct {
	d   time.Duration
	pos Pos
}

type keySpec struct {
	source    KeySource
	name      string
	fields    []string
	fieldsPos Pos
	namePos   Pos // of key.header or key.query
}

type fingerprintSpec struct {
	include, exclude []string
	pos              Pos // of include or exclude
}

// locator returns the position of a sub-key of the annotation being
// decoded (no path: the annotation's own key).
type locator func(path ...string) Pos

var annotationFields = []string{
	"fingerprint", "key", "lease", "max-request-bytes", "max-response-bytes", "principal",
	"replay-headers", "required", "save", "scope", "transactional", "ttl", "wait",
}

// decodeAnnotation decodes the value v of the extension named ext
// (x-idempotent or x-idempotent-defaults), reporting every problem to d.
// It returns nil for `x-idempotent: false` only: an annotation with
// errors comes back with its valid fields set and the others marked bad,
// so that the operation's other checks still run in the same pass.
func decodeAnnotation(ext string, v any, at locator, d *diags) *annotation {
	switch v := v.(type) {
	case bool:
		if ext != extOp {
			d.add(at(), "%s: want an object, got %s", ext, describe(v))
			return &annotation{all: true}
		}
		if !v {
			return nil
		}
		return &annotation{}
	case map[string]any:
		return decodeObject(ext, v, at, d)
	}
	if ext == extOp {
		d.add(at(), "%s: want true, false or an object, got %s", ext, describe(v))
	} else {
		d.add(at(), "%s: want an object, got %s", ext, describe(v))
	}
	return &annotation{all: true}
}

// CheckAnnotation decodes v as an x-idempotent object without a document,
// as Config.AnnotateMutating is checked before the spec is loaded, and
// returns every problem with it, one per line. A scope is refused, as in
// x-idempotent-defaults: it would be shared by every operation.
func CheckAnnotation(v map[string]any) error {
	var d diags
	at := func(...string) Pos { return Pos{} }
	if _, ok := v["scope"]; ok {
		d.add(Pos{}, "%s.scope: a scope cannot be shared by every operation; set it on the operation", extOp)
		v = maps.Clone(v)
		delete(v, "scope")
	}
	decodeAnnotation(extOp, v, at, &d)
	if len(d.list) == 0 {
		return nil
	}
	msgs := make([]string, len(d.list))
	for i, x := range d.list.sorted() {
		msgs[i] = x.Msg
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func decodeObject(ext string, m map[string]any, at locator, d *diags) *annotation {
	a := &annotation{bad: map[string]bool{}, fields: map[string]bool{}}
	for _, name := range sortedKeys(m) {
		a.fields[name] = true
		n := len(d.list)
		meant := a.decodeField(ext, name, m[name], at, d)
		if len(d.list) != n {
			a.bad[name] = true
		}
		if _, written := m[meant]; meant != "" && !written {
			// The value meant for that field is not known: its checks
			// would report the consequences of the typo, not a mistake.
			a.bad[meant] = true
		}
	}
	return a
}

// decodeField decodes one field of an annotation into a. For an unknown
// field it returns the known one it is likely a typo of, if any.
func (a *annotation) decodeField(ext, name string, v any, at locator, d *diags) (meant string) {
	where := ext + "." + name
	pos := at(name)
	switch name {
	case "key":
		a.key = decodeKey(where, v, func(p ...string) Pos { return at(append([]string{"key"}, p...)...) }, d)
	case "required":
		a.required = decodeBool(where, v, pos, d)
	case "scope":
		if ext == extDefaults {
			d.add(pos, "%s: a scope cannot be shared by every operation; set it on the operation", where)
			return
		}
		if s, ok := decodeString(where, v, pos, d); ok {
			if s == "" {
				d.add(pos, "%s: must not be empty", where)
				return
			}
			a.scope = &s
		}
	case "principal":
		if s, ok := decodeString(where, v, pos, d); ok {
			switch s {
			case "auth":
				p := PrincipalAuth
				a.principal = &p
			case "anonymous":
				p := PrincipalAnonymous
				a.principal = &p
			default:
				d.add(pos, "%s: %q is not a principal mode (want auth or anonymous)", where, s)
			}
		}
	case "fingerprint":
		a.fingerprint = decodeFingerprint(where, v, func(p ...string) Pos { return at(append([]string{"fingerprint"}, p...)...) }, d)
	case "ttl", "lease":
		if dur, ok := decodeDuration(where, v, pos, d); ok {
			if dur <= 0 {
				d.add(pos, "%s: must be positive, got %s", where, dur)
				return
			}
			da := &durationAt{d: dur, pos: pos}
			if name == "ttl" {
				a.ttl = da
			} else {
				a.lease = da
			}
		}
	case "wait":
		if dur, ok := decodeDuration(where, v, pos, d); ok {
			if dur < 0 {
				d.add(pos, "%s: must not be negative, got %s", where, dur)
				return
			}
			a.wait = &durationAt{d: dur, pos: pos}
		}
	case "replay-headers":
		a.replaySet = true
		list, ok := decodeStrings(where, v, pos, d)
		if !ok {
			return
		}
		for _, h := range list {
			if !policysyntax.IsToken(h) {
				d.add(pos, "%s: %q is not a header name", where, h)
				continue
			}
			c := textproto.CanonicalMIMEHeaderKey(h)
			if neverReplayed[c] {
				d.add(pos, "%s: %s is never replayed (CONTRACT §3)", where, c)
				continue
			}
			a.replayHeaders = append(a.replayHeaders, c)
		}
	case "save":
		a.save = decodeSave(where, v, pos, d)
	case "max-response-bytes", "max-request-bytes":
		n, ok := decodeSize(v)
		if !ok {
			d.add(pos, "%s: %s is not a size (want bytes as an integer, or e.g. 64KiB, 1MiB)", where, describe(v))
			return
		}
		if name == "max-response-bytes" {
			a.maxResponse = &n
		} else {
			a.maxRequest = &n
		}
	case "transactional":
		a.transactional = decodeBool(where, v, pos, d)
	default:
		msg := fmt.Sprintf("%s: unknown field %q", ext, name)
		meant = suggest(name, annotationFields)
		if meant != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", meant)
		}
		d.add(pos, "%s", msg)
	}
	return meant
}

func decodeKey(where string, v any, at locator, d *diags) *keySpec {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(at(), "%s: want an object with one of header, query, fields or body, got %s", where, describe(v))
		return nil
	}
	var k keySpec
	var sources []string
	bad := false
	for _, name := range sortedKeys(m) {
		val := m[name]
		pos := at(name)
		w := where + "." + name
		switch name {
		case "header", "query":
			sources = append(sources, name)
			s, ok := decodeString(w, val, pos, d)
			if !ok {
				bad = true
				continue
			}
			if name == "header" && !policysyntax.IsToken(s) {
				d.add(pos, "%s: %q is not a header name", w, s)
				bad = true
				continue
			}
			if s == "" {
				d.add(pos, "%s: must not be empty", w)
				bad = true
				continue
			}
			if name == "header" {
				k.source, k.name = KeyHeader, textproto.CanonicalMIMEHeaderKey(s)
			} else {
				k.source, k.name = KeyQuery, s
			}
			k.namePos = pos
		case "fields":
			sources = append(sources, name)
			list, ok := decodeStrings(w, val, pos, d)
			if !ok {
				bad = true
				continue
			}
			if len(list) == 0 {
				d.add(pos, "%s: list at least one JSON field path", w)
				bad = true
				continue
			}
			for _, f := range list {
				if !validFieldPath(f) {
					d.add(pos, "%s: %q is not a dotted JSON field path (want e.g. order.id)", w, f)
					bad = true
				}
			}
			k.source, k.fields, k.fieldsPos = KeyFields, list, pos
		case "body":
			sources = append(sources, name)
			b, ok := val.(bool)
			if !ok || !b {
				d.add(pos, "%s: want true (a hash of the whole request), got %s", w, describe(val))
				bad = true
				continue
			}
			k.source = KeyBody
		default:
			d.add(pos, "%s: unknown key source %q (want header, query, fields or body)", where, name)
			bad = true
		}
	}
	switch {
	case len(sources) == 0 && !bad:
		d.add(at(), "%s: want one of header, query, fields or body", where)
		return nil
	case len(sources) > 1:
		d.add(at(), "%s: two key sources (%s); want exactly one", where, strings.Join(sources, " and "))
		return nil
	case bad:
		return nil
	}
	return &k
}

func decodeFingerprint(where string, v any, at locator, d *diags) *fingerprintSpec {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(at(), "%s: want an object with include or exclude, got %s", where, describe(v))
		return nil
	}
	var f fingerprintSpec
	bad := false
	for _, name := range sortedKeys(m) {
		pos := at(name)
		w := where + "." + name
		switch name {
		case "include", "exclude":
			list, ok := decodeStrings(w, m[name], pos, d)
			if !ok {
				bad = true
				continue
			}
			if len(list) == 0 {
				d.add(pos, "%s: list at least one JSON pointer", w)
				bad = true
				continue
			}
			for _, p := range list {
				if _, err := policysyntax.SplitPointer(p); err != nil {
					d.add(pos, "%s: %q is not a JSON pointer (want e.g. /amount)", w, p)
					bad = true
				}
			}
			if name == "include" {
				f.include = list
			} else {
				f.exclude = list
			}
			f.pos = pos
		default:
			d.add(pos, "%s: unknown field %q (want include or exclude)", where, name)
			bad = true
		}
	}
	if f.include != nil && f.exclude != nil {
		d.add(at(), "%s: set include or exclude, not both", where)
		return nil
	}
	if f.include == nil && f.exclude == nil && !bad {
		d.add(at(), "%s: want include or exclude", where)
	}
	if bad || (f.include == nil && f.exclude == nil) {
		return nil
	}
	return &f
}

func decodeSave(where string, v any, pos Pos, d *diags) *SaveRule {
	list, ok := v.([]any)
	if !ok {
		d.add(pos, "%s: want a list of status classes (2xx) or codes (409), got %s", where, describe(v))
		return nil
	}
	if len(list) == 0 {
		d.add(pos, "%s: list at least one status class or code", where)
		return nil
	}
	var r SaveRule
	bad := false
	for _, e := range list {
		if s, ok := e.(string); ok {
			if len(s) == 3 && s[0] >= '1' && s[0] <= '5' && strings.EqualFold(s[1:], "xx") {
				r.Classes |= 1 << (s[0] - '1')
				continue
			}
			if n, err := strconv.Atoi(s); err == nil {
				e = n
			}
		}
		if n, ok := asInt(e); ok && n >= 100 && n <= 599 {
			if !slices.Contains(r.Codes, int(n)) {
				r.Codes = append(r.Codes, int(n))
			}
			continue
		}
		d.add(pos, "%s: %s is not a status class (2xx) or code (100-599)", where, describe(e))
		bad = true
	}
	if bad {
		return nil
	}
	slices.Sort(r.Codes)
	return &r
}

func decodeBool(where string, v any, pos Pos, d *diags) *bool {
	b, ok := v.(bool)
	if !ok {
		d.add(pos, "%s: want true or false, got %s", where, describe(v))
		return nil
	}
	return &b
}

func decodeString(where string, v any, pos Pos, d *diags) (string, bool) {
	s, ok := v.(string)
	if !ok {
		d.add(pos, "%s: want a string, got %s", where, describe(v))
	}
	return s, ok
}

func decodeStrings(where string, v any, pos Pos, d *diags) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		d.add(pos, "%s: want a list of strings, got %s", where, describe(v))
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			d.add(pos, "%s: want a list of strings, got %s in it", where, describe(e))
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func decodeDuration(where string, v any, pos Pos, d *diags) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		d.add(pos, "%s: %s is not a duration (want a string such as 24h, 90s)", where, describe(v))
		return 0, false
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.add(pos, "%s: %q is not a duration (want e.g. 24h)", where, s)
		return 0, false
	}
	return dur, true
}

var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"KB": 1e3, "MB": 1e6, "GB": 1e9,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*([KMG]i?B|B)?$`)

// decodeSize reads a positive byte count: an integer, or a string such as
// "64KiB", "1MiB", "512KB" or "2048".
func decodeSize(v any) (int64, bool) {
	if n, ok := asInt(v); ok {
		return n, n > 0
	}
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	unit := sizeUnits[m[2]]
	if n > math.MaxInt64/unit {
		return 0, false
	}
	return n * unit, true
}

// asInt accepts the integer forms a YAML or JSON decoder produces.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n), true
		}
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

// describe names a decoded value for a message: its kind and, for
// scalars, the value.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("the boolean %t", v)
	case string:
		return fmt.Sprintf("the string %q", v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	if n, ok := asInt(v); ok {
		return fmt.Sprintf("the number %d", n)
	}
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("the number %g", f)
	}
	return fmt.Sprintf("%v", v)
}

var fieldPathRE = regexp.MustCompile(`^[^.\s]+(\.[^.\s]+)*$`)

func validFieldPath(s string) bool { return fieldPathRE.MatchString(s) }

// neverReplayed are the headers CONTRACT §3 forbids replaying.
var neverReplayed = map[string]bool{
	"Set-Cookie": true, "Authorization": true, "Www-Authenticate": true, "Date": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// alwaysReplayed are the safe defaults every wrapper replays already.
var alwaysReplayed = map[string]bool{
	"Content-Type": true, "Location": true, "Content-Location": true, "Etag": true,
	"Last-Modified": true, "Link": true,
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// suggest returns the candidate within edit distance 2 of s, if any.
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
