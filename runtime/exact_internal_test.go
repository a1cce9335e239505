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
	for i := 0; i < 100000; i++ {
		var b []byte
		if r.IntN(4) == 0 {
			b = append(b, '-')
		}
		ni := r.IntN(25)
		if ni == 0 {
			b = append(b, '0')
		} else {
			b = append(b, byte('1'+r.IntN(9)))
			for j := 1; j < ni; j++ {
				b = append(b, byte('0'+r.IntN(10)))
			}
		}
		if r.IntN(3) > 0 {
			b = append(b, '.')
			nf := 1 + r.IntN(25)
			for j := 0; j < nf; j++ {
				d := byte('0' + r.IntN(10))
				if r.IntN(3) == 0 {
					d = '0'
				}
				b = append(b, d)
			}
		}
		check(string(b))
	}
}
