package generator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/generator/internal/location"
)

// specFiles are the files of one spec: its main document and the files its
// $refs name, each read once and kept for placing diagnostics.
type specFiles struct {
	main   *location.Source
	byName map[string]*location.Source
	read   []*location.Source // in the order the loader read them, main first
	// dir is the absolute folder of the main document: local $refs may
	// name files under it only.
	dir         string
	allowRemote bool
	// last is the file the loader was given last: a YAML error is in it
	// (the loader parses each file right after reading it).
	last *location.Source
	// noPos, while set, makes find return the main file alone: the
	// positions of a run that will report nothing are never read.
	noPos bool
	// loadText replaces, for the loader, the text of files whose
	// repeated keys have been reported (see give and dedupe); repeats are
	// those reports.
	loadText map[*location.Source][]byte
	repeats  Diagnostics
	// unrefs are the $refs the loader could not follow, reported and
	// hidden from it (see unref).
	unrefs Diagnostics
	// unparsed are the files other than the main one that do not parse,
	// by the message readURI refuses them with; syntax are their syntax
	// errors, and parsed the files checked already (see unparsable).
	unparsed map[*location.Source]string
	parsed   map[*location.Source]bool
	syntax   Diagnostics
}

func newSpecFiles(cfg Config, data []byte) *specFiles {
	main := location.NewSource(cfg.Spec, data)
	fs := &specFiles{main: main, byName: map[string]*location.Source{filepath.Clean(cfg.Spec): main}, read: []*location.Source{main}, allowRemote: cfg.AllowRemoteRefs}
	if abs, err := filepath.Abs(filepath.Dir(cfg.Spec)); err == nil {
		fs.dir = realPath(abs)
	}
	return fs
}

// realPath is p with symbolic links resolved, or p when that fails.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// refError is a $ref the generator refuses to read.
type refError struct {
	target string // the file or URL, as the loader resolved it
	msg    string
}

func (e *refError) Error() string { return e.msg }

// readURI is the loader's ReadFromURIFunc: it reads local files under the
// main document's folder, and remote documents only when allowed.
func (fs *specFiles) readURI(loader *openapi3.Loader, u *url.URL) ([]byte, error) {
	if u.Scheme == "http" || u.Scheme == "https" {
		name := u.String()
		if s := fs.byName[name]; s != nil {
			return fs.given(s, name)
		}
		if !fs.allowRemote {
			return nil, &refError{name, fmt.Sprintf("$ref %s: remote references are not followed (no network at generate time); pass -allow-remote-refs to allow them", name)}
		}
		data, err := fetch(loader.Context, u)
		if err != nil {
			return nil, &refError{name, fmt.Sprintf("$ref %s: %v", name, err)}
		}
		return fs.add(name, data), nil
	}
	if u.Scheme != "" && u.Scheme != "file" || u.Host != "" {
		return nil, &refError{u.String(), fmt.Sprintf("$ref %s: only relative references to local files (and, with -allow-remote-refs, http(s) URLs) are followed", u)}
	}
	name := filepath.Clean(filepath.FromSlash(u.Path))
	if s := fs.byName[name]; s != nil {
		return fs.given(s, name)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	// A symbolic link under the folder may not lead out of it either.
	abs = realPath(abs)
	if rel, err := filepath.Rel(fs.dir, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, &refError{name, fmt.Sprintf("$ref %s: outside the spec's folder; only files under it are read", name)}
	}
	data, err := os.ReadFile(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &refError{name, fmt.Sprintf("$ref %s: no such file", name)}
		}
		return nil, err
	}
	return fs.add(name, data), nil
}

// fetch GETs a remote document (-allow-remote-refs).
func fetch(ctx context.Context, u *url.URL) ([]byte, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET answered %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRemoteBytes+1))
	if err == nil && len(data) > maxRemoteBytes {
		return nil, fmt.Errorf("larger than %d MiB", maxRemoteBytes>>20)
	}
	return data, err
}

// maxRemoteBytes bounds one remote document.
const maxRemoteBytes = 64 << 20

// given is the text of a file read before, or the refusal of a file that
// does not parse (see unparsable).
func (fs *specFiles) given(s *location.Source, name string) ([]byte, error) {
	if msg, bad := fs.unparsed[s]; bad {
		return nil, &refError{name, msg}
	}
	return fs.give(s), nil
}

func (fs *specFiles) add(name string, data []byte) []byte {
	s := location.NewSource(name, data)
	fs.byName[name] = s
	fs.read = append(fs.read, s)
	return fs.give(s)
}

// give returns the text of s for the loader. A JSON file is checked for
// repeated keys the first time it is given: the loader would keep the last
// of each silently (see location.JSONRepeats).
func (fs *specFiles) give(s *location.Source) []byte {
	fs.last = s
	if !s.Checked {
		s.Checked = true
		// jsonRepeats gives up at the first byte that is not JSON, at
		// once for a YAML document's first key.
		if reps, ok := location.JSONRepeats(s.Text); ok && len(reps) > 0 {
			fs.repeats = append(fs.repeats, repeatDiags(s, reps, "JSON", "object")...)
			fs.setLoadText(s, location.DropRepeats(s.Text, reps))
		}
	}
	if t, ok := fs.loadText[s]; ok {
		return t
	}
	return s.Text
}

func (fs *specFiles) setLoadText(s *location.Source, text []byte) {
	if fs.loadText == nil {
		fs.loadText = map[*location.Source][]byte{}
	}
	fs.loadText[s] = text
}

// dedupe handles a load error made only of YAML's duplicate keys: it
// reports every repeated key of the file (the loader names only those of
// the mappings it reached), and gives the loader the file with the earlier
// occurrences blanked (the last one wins, as in JSON), so that the next
// load attempt can go on and find the document's other problems, at their
// lines and columns in the file as written. False when err is anything
// else, the file was deduplicated already, or the blanked text would not
// load as the original less its repeats.
func (fs *specFiles) dedupe(err error) bool {
	var many *yaml.LoadErrors
	s := fs.last
	if !errors.As(err, &many) || len(many.Errors) == 0 || s == nil || fs.loadText[s] != nil {
		return false
	}
	for _, e := range many.Errors {
		if !strings.Contains(e.Message, "already defined") {
			return false
		}
	}
	var root yaml.Node
	if yaml.Unmarshal(s.Text, &root) != nil {
		return false
	}
	reps, ok := location.YAMLRepeats(s, &root)
	if !ok || len(reps) == 0 {
		return false
	}
	text := location.DropRepeats(s.Text, reps)
	// Blanking an entry whose key is written in an unusual way (an
	// explicit ? key) could change what the rest means; then the repeats
	// are reported as the load error they are.
	var again yaml.Node
	if yaml.Unmarshal(text, &again) != nil {
		return false
	}
	if left, ok := location.YAMLRepeats(location.NewSource(s.Name, text), &again); !ok || len(left) > 0 {
		return false
	}
	fs.repeats = append(fs.repeats, repeatDiags(s, reps, "YAML", "mapping")...)
	fs.setLoadText(s, text)
	return true
}

// unparsable handles a load error caused by a file other than the main
// one that does not parse (a tab used for indentation, a JSON file with a
// missing comma): it reports the file's syntax errors, each at its line
// and column, and makes readURI refuse the file from then on, so that the
// next load attempt fails on a $ref to it and unref reports and hides
// every such $ref; the load then goes on and finds the document's other
// problems. The loader names the file only when a $ref takes all of it
// (through a fragment its error is a string), so every file read since the
// last call is parsed here, the way the loader parses it: as YAML, else
// (a file that may be JSON) as JSON. False when no file newly fails.
// Repeated keys alone do not make a file unparsable: dedupe and give
// handle them.
func (fs *specFiles) unparsable(error) bool {
	found := false
	for _, s := range fs.read[1:] {
		if fs.parsed[s] {
			continue
		}
		if fs.parsed == nil {
			fs.parsed = map[*location.Source]bool{}
		}
		fs.parsed[s] = true
		text := s.Text
		if t, ok := fs.loadText[s]; ok {
			text = t
		}
		var root yaml.Node
		err := yaml.Unmarshal(text, &root)
		if err == nil || onlyRepeats(err) || mayBeJSON(text) && json.Valid(text) {
			continue
		}
		ds := syntaxDiags(s, err)
		if fs.unparsed == nil {
			fs.unparsed = map[*location.Source]string{}
		}
		fs.unparsed[s] = fmt.Sprintf("$ref %s: the file does not parse (its syntax error is reported at %s)", s.Name, ds[0].Pos)
		fs.syntax = append(fs.syntax, ds...)
		found = true
	}
	return found
}

// onlyRepeats reports whether a YAML error is made of duplicate keys only.
func onlyRepeats(err error) bool {
	var many *yaml.LoadErrors
	if !errors.As(err, &many) || len(many.Errors) == 0 {
		return false
	}
	for _, e := range many.Errors {
		if !strings.Contains(e.Message, "already defined") {
			return false
		}
	}
	return true
}

// mayBeJSON reports whether text could be one JSON value, as the loader
// decides whether to try it as JSON after YAML refused it: by its first
// byte past JSON's whitespace.
func mayBeJSON(text []byte) bool {
	text = bytes.TrimLeft(text, " \t\r\n")
	return len(text) > 0 && strings.IndexByte(`{["-0123456789tfn`, text[0]) >= 0
}

// syntaxDiags are the diagnostics of a YAML parse error of s, each at its
// line and column with the line shown; at least one.
func syntaxDiags(s *location.Source, err error) Diagnostics {
	var many *yaml.LoadErrors
	var one *yaml.LoadError
	var ds Diagnostics
	switch {
	case errors.As(err, &many) && len(many.Errors) > 0:
		for _, e := range many.Errors {
			ds = append(ds, yamlDiag(s, e, ""))
		}
	case errors.As(err, &one):
		ds = Diagnostics{yamlDiag(s, one, "")}
	default:
		ds = Diagnostics{{Pos: Pos{File: s.Name}, Msg: "syntax error: " + err.Error()}}
	}
	for i := range ds {
		ds[i].Cause = err
		if ds[i].Pos.Line > 0 {
			ds[i].Frame = s.Frame(ds[i].Pos)
		}
	}
	return ds
}

// loadErrors turns a loader error into located diagnostics: each YAML
// error at its line and column in the file being read, a refused or
// missing $ref (and a dangling one) where it is written; each with the
// offending line shown.
func (fs *specFiles) loadErrors(err error) Diagnostics {
	const prefix = "cannot load the OpenAPI document: "
	var ds Diagnostics
	var re *refError
	var many *yaml.LoadErrors
	var one *yaml.LoadError
	last := fs.last
	if last == nil {
		last = fs.main
	}
	switch {
	case errors.As(err, &re):
		p := fs.refPos(re.target)
		ds = Diagnostics{{Pos: p, Msg: prefix + re.msg}}
	case errors.As(err, &many) && len(many.Errors) > 0:
		for _, e := range many.Errors {
			ds = append(ds, yamlDiag(last, e, prefix))
		}
	case errors.As(err, &one):
		ds = Diagnostics{yamlDiag(last, one, prefix)}
	default:
		ds = Diagnostics{{Pos: fs.fragmentPos(err.Error()), Msg: prefix + err.Error()}}
	}
	for i := range ds {
		ds[i].Cause = err
		if s := fs.byName[filepath.Clean(ds[i].Pos.File)]; s != nil && ds[i].Pos.Line > 0 {
			ds[i].Frame = s.Frame(ds[i].Pos)
		}
	}
	return ds.sorted()
}

func yamlDiag(s *location.Source, e *yaml.LoadError, prefix string) Diagnostic {
	msg := e.Message
	if e.ContextMsg != "" && e.ContextMark.Line > 0 && e.ContextMark != e.Mark {
		msg += fmt.Sprintf(" (%s at line %d)", e.ContextMsg, e.ContextMark.Line)
	}
	kind := "syntax error: " // JSON documents are parsed as YAML too
	switch {
	case strings.Contains(e.Message, "already defined"):
		kind = "invalid YAML: "
	case e.Stage == yaml.ConstructorStage:
		kind = "wrong type: "
	}
	return Diagnostic{Pos: Pos{File: s.Name, Line: e.Mark.Line, Col: e.Mark.Column}, Msg: prefix + kind + msg}
}

// refPos is where a $ref naming target (as the loader resolved it) is
// written: the first file, in reading order, holding it.
func (fs *specFiles) refPos(target string) Pos {
	for _, s := range fs.read {
		ref := target
		if !isRemote(target) {
			rel, err := filepath.Rel(filepath.Dir(s.Name), target)
			if err != nil {
				continue
			}
			ref = filepath.ToSlash(rel)
		}
		if p, ok := s.FindRef(ref); ok {
			return p
		}
	}
	return Pos{File: fs.main.Name}
}

var fragmentInError = regexp.MustCompile(`"([^"\s]*#/[^"]+)"`)

// fragmentPos places a load error at the last $ref with a fragment that
// it names and a file of the spec holds; else at the main file.
func (fs *specFiles) fragmentPos(msg string) Pos {
	m := fragmentInError.FindAllStringSubmatch(msg, -1)
	for i := len(m) - 1; i >= 0; i-- {
		for _, s := range fs.read {
			if p, ok := s.FindRef(m[i][1]); ok {
				return p
			}
		}
	}
	return Pos{File: fs.main.Name}
}

// unref handles a load error caused by $refs the loader cannot follow (a
// file that is missing or refused, a fragment that names nothing): it
// reports every $ref in the spec's files that names the same target, each
// where it is written, and hides them from the loader (their key becomes
// an extension, x-rf, of the same length, so every position stays), so
// that the next load attempt goes on and finds the document's other
// problems. False when err is anything else or no such $ref is found.
func (fs *specFiles) unref(err error) bool {
	var re *refError
	type site struct {
		s   *location.Source
		off int
	}
	var sites []site
	msg := ""
	switch {
	case errors.As(err, &re):
		msg = re.msg
		for _, s := range fs.read {
			for _, ref := range refSpellings(s, re.target) {
				for _, off := range s.FindRefs(ref) {
					sites = append(sites, site{s, off})
				}
			}
		}
	default:
		m := fragmentInError.FindAllStringSubmatch(err.Error(), -1)
		if len(m) == 0 {
			return false
		}
		ref := m[len(m)-1][1]
		msg = "$ref " + ref + ": " + err.Error()
		for _, s := range fs.read {
			for _, off := range s.FindRefs(ref) {
				sites = append(sites, site{s, off})
			}
		}
	}
	n := 0
	for _, st := range sites {
		key := location.RefKeyBefore(st.s.Text, st.off)
		if key < 0 {
			continue
		}
		text, ok := fs.loadText[st.s]
		if !ok {
			text = bytes.Clone(st.s.Text)
		}
		if string(text[key:key+4]) != "$ref" {
			continue // hidden already
		}
		copy(text[key:], "x-rf")
		fs.setLoadText(st.s, text)
		p := st.s.Pos(st.off)
		fs.unrefs = append(fs.unrefs, Diagnostic{Pos: p, Msg: msg, Frame: st.s.Frame(p), Cause: err})
		n++
	}
	return n > 0
}

// refSpellings are the ways a $ref in s may name the file target (as the
// loader resolved it): relative to s's folder, with or without ./, or
// absolute, as a path or a file:// URL.
func refSpellings(s *location.Source, target string) []string {
	if isRemote(target) {
		return []string{target}
	}
	var out []string
	if rel, err := filepath.Rel(filepath.Dir(s.Name), target); err == nil {
		out = append(out, filepath.ToSlash(rel))
	}
	if abs, err := filepath.Abs(target); err == nil {
		out = append(out, "file://"+filepath.ToSlash(abs), filepath.ToSlash(abs))
	}
	return out
}

// repeatDiags reports each repeat of s, at the repeated key, with its line
// shown. lang and kind name the syntax: "YAML", "mapping" or "JSON",
// "object".
func repeatDiags(s *location.Source, reps []location.Repeat, lang, kind string) Diagnostics {
	var ds Diagnostics
	for _, r := range reps {
		p := s.Pos(r.At)
		ds = append(ds, Diagnostic{Pos: p, Frame: s.Frame(p), Msg: fmt.Sprintf(
			"invalid %s: %s key %q already defined at line %d (the rest of the document is checked with the last one)",
			lang, kind, r.Key, s.Pos(r.Prev).Line)})
	}
	return ds
}
