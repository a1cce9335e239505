package runtime_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// typedTargets is how many struct types checkTyped builds per document.
const typedTargets = 6

// checkTyped decodes a and b (which share a fingerprint; v is what they
// decode to as any) into typed values built from v's shape, and fails when
// encoding/json gives them different values or fails on one only.
func checkTyped(t *testing.T, a, b []byte, v any) {
	t.Helper()
	sum := sha256.Sum256(a)
	r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[8:16]), 3))
	for range typedTargets {
		typ := typeFor(v, r, 0)
		for _, useNumber := range []bool{false, true} {
			pa, errA := decodeInto(a, typ, useNumber)
			pb, errB := decodeInto(b, typ, useNumber)
			if (errA == nil) != (errB == nil) || !reflect.DeepEqual(pa, pb) {
				t.Fatalf("%q and %q share a fingerprint, but decode into %v (UseNumber %v) as\n %#v (%v)\n %#v (%v)", a, b, typ, useNumber, pa, errA, pb, errB)
			}
		}
	}
}

func decodeInto(in []byte, typ reflect.Type, useNumber bool) (any, error) {
	p := reflect.New(typ)
	dec := json.NewDecoder(bytes.NewReader(in))
	if useNumber {
		dec.UseNumber()
	}
	err := dec.Decode(p.Interface())
	return p.Elem().Interface(), err
}

var (
	tAny     = reflect.TypeFor[any]()
	tNumber  = reflect.TypeFor[json.Number]()
	tString  = reflect.TypeFor[string]()
	tInt     = reflect.TypeFor[int]()
	tBool    = reflect.TypeFor[bool]()
	numTypes = []reflect.Type{tInt, reflect.TypeFor[int64](), reflect.TypeFor[int8](), reflect.TypeFor[uint](),
		reflect.TypeFor[uint8](), reflect.TypeFor[float64](), reflect.TypeFor[float32](), tNumber, tAny, tString,
		reflect.TypeFor[*int](), reflect.TypeFor[*float64]()}
	strTypes  = []reflect.Type{tString, tAny, tNumber, tInt, reflect.TypeFor[[]byte](), reflect.TypeFor[*string]()}
	boolTypes = []reflect.Type{tBool, tAny, tString, reflect.TypeFor[*bool]()}
	nullTypes = []reflect.Type{tAny, tInt, tString, reflect.TypeFor[*int](), reflect.TypeFor[[]int]()}
	objTypes  = []reflect.Type{tAny, reflect.TypeFor[map[string]any](), reflect.TypeFor[map[string]json.Number](),
		reflect.TypeFor[map[string]string]()}
)

// typeFor builds a Go type for a value of v's shape: an object becomes a
// struct (each member a field tagged with its name, or the name upper- or
// lower-cased, which encoding/json matches case-insensitively) or a map,
// an array a slice or an array, a number one of numTypes, and so on.
func typeFor(v any, r *rand.Rand, depth int) reflect.Type {
	pick := func(ts []reflect.Type) reflect.Type { return ts[r.IntN(len(ts))] }
	switch x := v.(type) {
	case map[string]any:
		if depth > 4 || r.IntN(5) == 0 {
			return pick(objTypes)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var fields []reflect.StructField
		used := map[string]bool{}
		for _, k := range keys {
			name := k
			switch r.IntN(4) {
			case 0:
				name = strings.ToUpper(k)
			case 1:
				name = strings.ToLower(k)
			}
			if !validTagName(name) || used[name] {
				continue
			}
			used[name] = true
			fields = append(fields, reflect.StructField{
				Name: "F" + strconv.Itoa(len(fields)),
				Type: typeFor(x[k], r, depth+1),
				Tag:  reflect.StructTag(`json:"` + name + `"`),
			})
		}
		return reflect.StructOf(fields)
	case []any:
		if r.IntN(5) == 0 {
			return tAny
		}
		elem := tAny
		if len(x) > 0 {
			elem = typeFor(x[r.IntN(len(x))], r, depth+1)
		}
		if r.IntN(3) == 0 {
			return reflect.ArrayOf(r.IntN(len(x)+2), elem)
		}
		return reflect.SliceOf(elem)
	case json.Number:
		return pick(numTypes)
	case string:
		return pick(strTypes)
	case bool:
		return pick(boolTypes)
	}
	return pick(nullTypes)
}

// validTagName is encoding/json's isValidTag (tags.go): a name it takes
// from a tag rather than falling back to the field's Go name.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
