package storekit

import (
	"bytes"
	"net/http"
	"reflect"
	"slices"
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

// FuzzSplitRecord: SplitRecord finds the end of the encoded headers
// whatever body follows them (one that looks like headers too), never
// panics on stored bytes, and always returns the column's bytes in order.
func FuzzSplitRecord(f *testing.F) {
	f.Add([]byte(`{"id":"ch_1"}`), []byte{}, "Link", "v1", "v2")
	f.Add([]byte{}, []byte{1, 1, 4, 'L', 'i', 'n', 'k', 1, 0}, "X", "caf\xe9", "")
	f.Add(EncodeHeader(http.Header{"A": {"b"}}), []byte{1, 255, 255, 255, 255, 15}, "", "", "")
	f.Fuzz(func(t *testing.T, body, stored []byte, name, v1, v2 string) {
		fp, headers, rest := SplitRecord(stored)
		if got := string(fp) + string(headers) + string(rest); got != string(stored) {
			t.Fatalf("SplitRecord(%q) = %q, %q, %q", stored, fp, headers, rest)
		}
		fingerprint := bytes.Repeat([]byte{7}, 32)
		h := http.Header{name: {v1, v2}, "Content-Type": {"application/json"}}
		encoded := EncodeHeader(h)
		fp, headers, rest = SplitRecord(slices.Concat(fingerprint, encoded, body))
		if !bytes.Equal(fp, fingerprint) || !bytes.Equal(headers, encoded) || !bytes.Equal(rest, body) {
			t.Fatalf("SplitRecord(fingerprint || %q || %q) = %q, %q, %q", encoded, body, fp, headers, rest)
		}
		if got, err := DecodeHeader(headers); err != nil || !reflect.DeepEqual(got, h) {
			t.Fatalf("the split headers decode to %q, %v; want %q", got, err, h)
		}
	})
}

// TestSplitRecordWithoutResponse: a record with no saved response (in
// progress, released, a tombstone) is its fingerprint alone; a remainder
// that is not encoded headers comes back as the headers, which
// DecodeHeader refuses, and a short column as the fingerprint.
func TestSplitRecordWithoutResponse(t *testing.T) {
	fingerprint := bytes.Repeat([]byte{7}, 32)
	for _, c := range []struct {
		name                 string
		in                   []byte
		fp, headers, body    []byte
		headersDecodeToEmpty bool
	}{
		{"fingerprint alone", fingerprint, fingerprint, nil, nil, true},
		{"short", fingerprint[:5], fingerprint[:5], nil, nil, true},
		{"not headers", slices.Concat(fingerprint, []byte(`{"a":1}`)), fingerprint, []byte(`{"a":1}`), nil, false},
		{"truncated headers", slices.Concat(fingerprint, EncodeHeader(http.Header{"A": {"b"}})[:4]), fingerprint, EncodeHeader(http.Header{"A": {"b"}})[:4], nil, false},
	} {
		fp, headers, body := SplitRecord(c.in)
		if !bytes.Equal(fp, c.fp) || !bytes.Equal(headers, c.headers) || !bytes.Equal(body, c.body) {
			t.Errorf("%s: SplitRecord = %q, %q, %q; want %q, %q, %q", c.name, fp, headers, body, c.fp, c.headers, c.body)
		}
		h, err := DecodeHeader(headers)
		if c.headersDecodeToEmpty != (err == nil && len(h) == 0) {
			t.Errorf("%s: DecodeHeader(%q) = %q, %v", c.name, headers, h, err)
		}
	}
}
