package runtime_test

import (
	"errors"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

func TestParseKey(t *testing.T) {
	for in, want := range map[string]string{
		"abc":                                  "abc",
		`"abc"`:                                "abc",
		`"a\"b\\c"`:                            `a"b\c`,
		"8e03978e-40d5-43e8-bc93-6894a57f9324": "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`a"b`:                                  `a"b`,
		"!~":                                   "!~",
		strings.Repeat("x", 255):               strings.Repeat("x", 255),
		`"` + strings.Repeat("x", 255) + `"`:   strings.Repeat("x", 255),
	} {
		got, err := idemrt.ParseKey(in)
		if err != nil || got != want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]error{
		"":                       idemrt.ErrKeyEmpty,
		`""`:                     idemrt.ErrKeyEmpty,
		strings.Repeat("x", 256): idemrt.ErrKeyTooLong,
		"a b":                    idemrt.ErrKeyInvalid,
		`"a b"`:                  idemrt.ErrKeyInvalid,
		"tab\t":                  idemrt.ErrKeyInvalid,
		"\u00e9":                 idemrt.ErrKeyInvalid,
		"a\x7f":                  idemrt.ErrKeyInvalid,
		`"abc`:                   idemrt.ErrKeyBadQuote,
		`"a"b"`:                  idemrt.ErrKeyBadQuote,
		`"a\b"`:                  idemrt.ErrKeyBadQuote,
		`"a\"`:                   idemrt.ErrKeyBadQuote,
		`"`:                      idemrt.ErrKeyBadQuote,
	} {
		if got, err := idemrt.ParseKey(in); !errors.Is(err, want) {
			t.Errorf("ParseKey(%q) = %q, %v; want %v", in, got, err, want)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"`, "", "a b", "\xff", strings.Repeat("k", 256), `"\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := idemrt.ParseKey(in)
		if err != nil {
			if k != "" {
				t.Fatalf("ParseKey(%q) returned %q with error %v", in, k, err)
			}
			return
		}
		if len(k) < 1 || len(k) > 255 {
			t.Fatalf("ParseKey(%q) = %q: length %d", in, k, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x21 || k[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x is not visible ASCII", in, k, k[i])
			}
		}
		// A bare key is its own parse; quoting any key round-trips.
		if k[0] != '"' {
			if k2, err := idemrt.ParseKey(k); err != nil || k2 != k {
				t.Fatalf("ParseKey(%q) = %q, %v; want it unchanged", k, k2, err)
			}
		}
		q := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
		if k3, err := idemrt.ParseKey(q); err != nil || k3 != k {
			t.Fatalf("ParseKey(%q) = %q, %v; want %q", q, k3, err, k)
		}
		if in[0] != '"' && k != in {
			t.Fatalf("bare key %q changed to %q", in, k)
		}
	})
}

func TestHashPrincipal(t *testing.T) {
	a, b := idemrt.HashPrincipal("alice"), idemrt.HashPrincipal("bob")
	if a == b || a == idemrt.HashPrincipal("") || a != idemrt.HashPrincipal("alice") {
		t.Fatal("HashPrincipal is not a stable injective-looking hash")
	}
	if a == ([32]byte{}) {
		t.Fatal("HashPrincipal returned the anonymous (zero) hash")
	}
}
