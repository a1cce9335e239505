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
