package storekit

import (
	"net/http"
	"reflect"
	"testing"
)

// FuzzHeaderCodec: DecodeHeader never panics on stored bytes, and what
// EncodeHeader writes decodes to the same header.
func FuzzHeaderCodec(f *testing.F) {
	f.Add([]byte{}, "Link", "v1", "v2")
	f.Add([]byte{1, 1, 4, 'L', 'i', 'n', 'k', 1, 0}, "X", "caf\xe9", "")
	f.Add([]byte{1, 255, 255, 255, 255, 15}, "", "", "")
	f.Add([]byte{2}, "A", "b", "c")
	f.Fuzz(func(t *testing.T, stored []byte, name, v1, v2 string) {
		DecodeHeader(stored) // must not panic; an error is fine
		h := http.Header{name: {v1, v2}, "Content-Type": {"application/json"}}
		got, err := DecodeHeader(EncodeHeader(h))
		if err != nil {
			t.Fatalf("decode(encode(%q)): %v", h, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("decode(encode(%q)) = %q", h, got)
		}
	})
}

func TestDecodeHeaderRejectsCorruption(t *testing.T) {
	good := EncodeHeader(http.Header{"Link": {"a", "b"}})
	for i := 1; i < len(good); i++ {
		if _, err := DecodeHeader(good[:i]); err == nil {
			t.Errorf("truncated to %d bytes: no error", i)
		}
	}
	if _, err := DecodeHeader(append(good, 0)); err == nil {
		t.Error("trailing byte: no error")
	}
	if _, err := DecodeHeader([]byte{9}); err == nil {
		t.Error("unknown format: no error")
	}
}

// DecodeHeader allocates a fixed few times, however many names it decodes
// with one value each: one string for every name and value, one array for
// every value, the map. Every replay of a SQL store decodes one.
func TestDecodeHeaderAllocations(t *testing.T) {
	enc := EncodeHeader(http.Header{
		"Content-Type": {"application/json"}, "Location": {"/orders/42"}, "Etag": {`"v1"`},
		"Cache-Control": {"no-store"}, "Content-Language": {"en"},
	})
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := DecodeHeader(enc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Errorf("DecodeHeader of 5 names allocates %v times, want at most 4", allocs)
	}
}

// A decoded header's values are slices of their own: appending to one
// name's values leaves every other name's as they were.
func TestDecodeHeaderValuesDoNotAlias(t *testing.T) {
	want := http.Header{"A": {"1"}, "B": {"2", "3"}, "C": {"4"}, "D": {}}
	h, err := DecodeHeader(EncodeHeader(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("decoded %q, want %q", h, want)
	}
	for name := range h {
		h[name] = append(h[name], "appended")
		for other, vs := range h {
			if other != name && !reflect.DeepEqual(vs, want[other]) {
				t.Fatalf("appending to %s changed %s to %q", name, other, vs)
			}
		}
		h[name] = want[name]
	}
}
