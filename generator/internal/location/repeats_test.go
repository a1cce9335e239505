package location

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/internal/testutil"
)

// refRepeat is a Repeat as the reference checker sees it: the key, and
// the offsets just past the repeated key and past the occurrence before it
// (json.Decoder tells where a token ends, not where it starts).
type refRepeat struct {
	key            string
	atEnd, prevEnd int
}

// refJSONRepeats is the reference: encoding/json's own tokenizer, each
// object's keys in a map.
func refJSONRepeats(t testing.TB, data []byte) []refRepeat {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object  bool
		wantKey bool
		seen    map[string]int // key -> end of its last occurrence
	}
	var stack []*frame
	var out []refRepeat
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reference tokenizer: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				stack = append(stack, &frame{object: d == '{', wantKey: d == '{', seen: map[string]int{}})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantKey = true
				}
			}
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if top.wantKey {
			key := tok.(string)
			end := int(dec.InputOffset())
			if prev, dup := top.seen[key]; dup {
				out = append(out, refRepeat{key, end, prev})
			}
			top.seen[key] = end
			top.wantKey = false
		} else {
			top.wantKey = true
		}
	}
}

// keyEnd is the offset just past the JSON string starting at off.
func keyEnd(data []byte, off int) int {
	for i := off + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// checkJSONRepeats checks JSONRepeats on data against json.Valid and the
// reference, and DropRepeats' output: valid JSON without repeats, decoding
// to what data decodes to (encoding/json keeps the last of each key), with
// every line as many characters long as before.
func checkJSONRepeats(t *testing.T, data []byte) []Repeat {
	t.Helper()
	if rest, bom := bytes.CutPrefix(data, utf8BOM); bom {
		// A leading byte-order mark is skipped, the offsets staying those
		// of data: the repeats are rest's, moved by its length.
		want := checkJSONRepeats(t, rest)
		reps, ok := JSONRepeats(data)
		if ok != json.Valid(rest) || len(reps) != len(want) {
			t.Fatalf("with a byte-order mark: ok=%v, %d repeats; without: %d repeats (%q)", ok, len(reps), len(want), data)
		}
		for i, r := range reps {
			w := want[i]
			if r.Key != w.Key || r.At != w.At+len(utf8BOM) || r.Prev != w.Prev+len(utf8BOM) || r.PrevEnd != w.PrevEnd+len(utf8BOM) {
				t.Fatalf("with a byte-order mark, Repeat %+v; without, %+v (%q)", r, w, data)
			}
		}
		return reps
	}
	reps, ok := JSONRepeats(data)
	if valid := json.Valid(data); ok != valid {
		t.Fatalf("JSONRepeats ok=%v, json.Valid=%v for %q", ok, valid, data)
	}
	if !ok {
		if reps != nil {
			t.Fatalf("repeats reported for invalid JSON %q", data)
		}
		return nil
	}
	var got []refRepeat
	for _, r := range reps {
		got = append(got, refRepeat{r.Key, keyEnd(data, r.At), keyEnd(data, r.Prev)})
		if r.PrevEnd <= r.Prev || r.PrevEnd > r.At || data[r.PrevEnd-1] != ',' {
			t.Fatalf("Repeat %+v: the earlier entry does not end with its comma before the Repeat in %q", r, data)
		}
	}
	// The reference lists repeats in the order of the repeated keys; so
	// does JSONRepeats.
	if want := refJSONRepeats(t, data); !slices.Equal(got, want) {
		t.Fatalf("repeats of %q:\n got %+v\nwant %+v", data, got, want)
	}
	blanked := DropRepeats(data, reps)
	if !json.Valid(blanked) {
		t.Fatalf("blanked text is not valid JSON: %q -> %q", data, blanked)
	}
	if again, _ := JSONRepeats(blanked); len(again) > 0 {
		t.Fatalf("blanked text still has repeats %+v: %q", again, blanked)
	}
	if a, b := decodeAny(t, data), decodeAny(t, blanked); !reflect.DeepEqual(a, b) {
		t.Fatalf("blanked text decodes differently:\n%q -> %#v\n%q -> %#v", data, a, blanked, b)
	}
	la, lb := bytes.Split(data, []byte("\n")), bytes.Split(blanked, []byte("\n"))
	if len(la) != len(lb) {
		t.Fatalf("blanking changed the number of lines: %q -> %q", data, blanked)
	}
	for i := range la {
		if utf8.RuneCount(la[i]) != utf8.RuneCount(lb[i]) {
			t.Fatalf("blanking changed the length of line %d: %q -> %q", i+1, la[i], lb[i])
		}
	}
	return reps
}

func decodeAny(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

var jsonRepeatSeeds = []string{
	`{"a":1,"a":2}`,
	`{"a":1,"b":2,"a":3,"a":4}`,
	`{"a":{"a":1,"a":2},"b":[{"a":1},{"a":2}],"a":[]}`,
	`{"a":"}{\"a\":1,","\u0061":2}`,
	`{"\ud800":1,"\udfff":2,"` + "\xff" + `":3,"\ufffd":4}`,
	`{"é":1,"\u00e9":2,"e\u0301":3}`,
	`{ "x-idempotent" : {"ttl":"1h",` + "\n\t" + `"ttl" : "2h"} , "x-idempotent":true }`,
	`[{"a":1,"a":2},[[{"b":{}}]],"a",1,-0.5e+3,true,false,null]`,
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":33,"k\u0031\u0037":1717}`,
	"{\"a\":\"ünë\",\r\n\"a\":\"deux\"}",
	`{}`, `[]`, `"a"`, `0`, `  {"a" :1 }  `,
	// Invalid: not one JSON value.
	``, `{`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1,]`, `01`, `1.`, `-`, `1e`, `tru`, `"\x"`, "\"\x01\"", `{"a":1}{}`, `{"a":1,"a":2`,
	"\ufeff{}", `{"a":1} x`, `'a'`,
}

func TestJSONRepeats(t *testing.T) {
	for _, s := range jsonRepeatSeeds {
		checkJSONRepeats(t, []byte(s))
	}
	deep := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	checkJSONRepeats(t, []byte(deep))
	checkJSONRepeats(t, []byte("["+deep+"]")) // one too deep: invalid
	if _, ok := JSONRepeats([]byte(strings.Repeat(`{"a":`, 1e6))); ok {
		t.Fatal("unterminated deep document is valid")
	}

	// Each Repeat is against the occurrence before it, and blanks that one.
	data := []byte(`{"a":1, "b":2, "a":3, "\u0061":4}`)
	reps := checkJSONRepeats(t, data)
	want := []Repeat{
		{Key: "a", At: 15, Prev: 1, PrevEnd: 7},
		{Key: "a", At: 22, Prev: 15, PrevEnd: 21},
	}
	if !slices.Equal(reps, want) {
		t.Fatalf("got %+v, want %+v", reps, want)
	}
	if got := string(DropRepeats(data, reps)); got != `{       "b":2,        "\u0061":4}` {
		t.Fatalf("blanked: %q", got)
	}
}

// FuzzJSONRepeats checks the scanner against encoding/json on any input:
// it accepts exactly what json.Valid accepts, finds the repeats the
// reference tokenizer finds, and the blanked text keeps every line and
// column and decodes to what the original decodes to.
//
//	go test ./generator/internal/location -run '^$' -fuzz FuzzJSONRepeats -fuzztime 60s
func FuzzJSONRepeats(f *testing.F) {
	for _, s := range jsonRepeatSeeds {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob(filepath.Join(testutil.RepoRoot(), "golden", "errors", "json-*.txtar"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			if i := bytes.IndexByte(data, '{'); i >= 0 {
				if j := bytes.Index(data, []byte("\n-- ")); j > i {
					f.Add(data[i:j])
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkJSONRepeats(t, data)
	})
}

// TestRealSpecsRepeats runs the Repeat checks over the corpus: no JSON
// spec reports a Repeat the reference tokenizer does not find (none has
// any), and no YAML spec (the loader accepts them all) has one either.
func TestRealSpecsRepeats(t *testing.T) {
	dir := testutil.SpecsDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(name) {
		case ".json":
			n++
			reps, ok := JSONRepeats(data)
			if !ok {
				t.Errorf("%s: not valid JSON to the scanner", name)
				continue
			}
			if len(reps) > 0 {
				t.Errorf("%s: %d repeats, first %+v at %v", name, len(reps), reps[0], NewSource(name, data).Pos(reps[0].At))
			}
			if ref := refJSONRepeats(t, data); len(ref) > 0 {
				t.Errorf("%s: the reference finds %d repeats, first %+v", name, len(ref), ref[0])
			}
		case ".yaml":
			var root yaml.Node
			if err := yaml.Unmarshal(data, &root); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if reps, ok := YAMLRepeats(NewSource(name, data), &root); !ok || len(reps) > 0 {
				t.Errorf("%s: ok=%v, %d repeats %s", name, ok, len(reps), fmt.Sprint(reps))
			}
		}
	}
	if n == 0 {
		t.Fatal("no JSON spec in the corpus")
	}
}
