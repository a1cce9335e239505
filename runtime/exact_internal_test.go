package runtime

import (
	"math/rand/v2"
	"testing"
)

// With exact numbers, the fast path (numbers without exponent copied as
// their own digits) agrees with appendExactNumber, and with the exponent
// spelling of the same value.
func TestExactFastNumberMatchesSlowPath(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(lit string) {
		c := &canonicalizer{in: []byte(lit), exact: true}
		if _, err := c.number(0); err != nil {
			t.Fatalf("number(%q): %v", lit, err)
		}
		neg := lit[0] == '-'
		mant := lit
		if neg {
			mant = lit[1:]
		}
		want := string((&canonicalizer{}).appendExactNumber(nil, neg, []byte(mant), nil))
		if string(c.out) != want {
			t.Fatalf("fast %q = %q, slow %q", lit, c.out, want)
		}
		e := &canonicalizer{in: []byte(lit + "e0"), exact: true}
		if _, err := e.number(0); err != nil || string(e.out) != want {
			t.Fatalf("%se0 = %q (%v), want %q", lit, e.out, err, want)
		}
	}
	for _, lit := range []string{"0", "-0", "0.0", "-0.000", "1.50", "100", "0.000001", "0.0000001", "123456789012345678901", "1234567890123456789012", "0.1", "-2.5"} {
		check(lit)
	}
	for range 100000 {
		check(randDecimal(r, 25, 25))
	}
}
