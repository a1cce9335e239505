package runtime

import "testing"

// mediaKind's exact "application/json" (no folding) classifies as its
// general path does the same type in other spellings, and fingerprints
// the same: every spelling of a JSON type hashes as JSON.
func TestMediaKindExactJSONMatchesFolded(t *testing.T) {
	body := []byte(`{"b":1, "a":[true,null]}`)
	want, err := fingerprintAt(FingerprintVersion, "POST", "/orders", nil, "application/json", nil, body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range []string{"application/json", "Application/JSON", "application/json; charset=utf-8", " application/json ", "application/problem+json"} {
		if k := mediaKind(ct); k != bodyJSON {
			t.Errorf("mediaKind(%q) = %q, want %q", ct, k, bodyJSON)
		}
		got, err := fingerprintAt(FingerprintVersion, "POST", "/orders", nil, ct, nil, body, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%q: fingerprint %x, want %x (as application/json)", ct, got, want)
		}
	}
	raw, err := fingerprintAt(FingerprintVersion, "POST", "/orders", nil, "text/plain", nil, body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if raw == want {
		t.Error("a text/plain body fingerprints as JSON")
	}
	for _, ct := range []string{"application/jsonx", "application/json2", "text/json", ""} {
		if k := mediaKind(ct); k == bodyJSON {
			t.Errorf("mediaKind(%q) = JSON", ct)
		}
	}
}
