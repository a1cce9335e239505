package runtime

import (
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"testing"
)

func TestRouteMatch(t *testing.T) {
	cases := []struct {
		route, path string
		ok          bool
		params      []string
	}{
		{"/orders", "/orders", true, nil},
		{"/orders", "/orders/", false, nil},
		{"/orders/", "/orders/", true, nil},
		{"/orders/", "/orders", false, nil},
		{"/", "/", true, nil},
		{"/", "/x", false, nil},
		{"/orders/{id}", "/orders/42", true, []string{"42"}},
		{"/orders/{id}", "/orders/", false, nil},
		{"/orders/{id}", "/orders/42/items", false, nil},
		{"/orders/{id}", "/Orders/42", false, nil},
		{"/orders/{id}", "/orders/a%2Fb", true, []string{"a/b"}},
		{"/orders/{id}", "/orders/%zz", false, nil},
		// Literal segments are compared unescaped, as ServeMux routes them.
		{"/orders/{id}", "/ord%65rs/1", true, []string{"1"}},
		{"/orders", "/%6Frders", true, nil},
		{"/orders", "/ord%zzrs", false, nil},
		{"/a/b", "/a%2Fb", false, nil},
		{"/v1 beta/orders", "/v1%20beta/orders", true, nil},
		{"/files/{name}.{ext}", "/files/report.q1.pdf", true, []string{"report", "q1.pdf"}},
		{"/files/{name}.{ext}", "/files/.pdf", false, nil},
		{"/files/{name}.{ext}", "/files/report.", false, nil},
		{"/files/{name}.{ext}", "/files/", false, nil}, // an empty segment (this panicked)
		{"/files/v{version}.{ext}", "/files/v", false, nil},
		{"/files/v{version}", "/files/v2", true, []string{"2"}},
		{"/files/v{version}", "/files/x2", false, nil},
		{"/a/{x}/b/{y}", "/a/1/b/2", true, []string{"1", "2"}},
		{"/a/{x}/b/{y}", "/a/1/c/2", false, nil},
		{"/a//b", "/a//b", true, nil},
	}
	for _, tc := range cases {
		rp, err := parseRoute(tc.route)
		if err != nil {
			t.Fatalf("parseRoute(%q): %v", tc.route, err)
		}
		got, ok := rp.match(tc.path, nil)
		if ok != tc.ok || (ok && !slices.Equal(got, tc.params)) {
			t.Errorf("%s ~ %s = %q, %v; want %q, %v", tc.route, tc.path, got, ok, tc.params, tc.ok)
		}
	}
	for _, bad := range []string{"orders", "/a/{", "/a/}", "/a/{}", "/a/{x}{y}", "/a/{x}/b/{x}"} {
		if _, err := parseRoute(bad); err == nil {
			t.Errorf("parseRoute(%q) accepted", bad)
		}
	}
}

func TestRouteMatchDoesNotAllocate(t *testing.T) {
	rp, _ := parseRoute("/v1/orders/{id}/items/{item}")
	var buf [8]string
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := rp.match("/v1/orders/42/items/7", buf[:0]); !ok {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Errorf("match allocates %v times", allocs)
	}
}

// The fast number path agrees with ParseFloat + ECMAScript formatting.
func TestFastNumberMatchesSlowPath(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(lit string) {
		c := &canonicalizer{in: []byte(lit)}
		if _, err := c.number(0); err != nil {
			t.Fatalf("number(%q): %v", lit, err)
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			t.Fatal(err)
		}
		if want := string(appendES6Number(nil, f)); string(c.out) != want {
			t.Fatalf("number(%q) = %q, want %q", lit, c.out, want)
		}
	}
	for _, lit := range []string{"0", "-0", "0.0", "-0.000", "1.50", "100", "100.0", "0.000001", "0.0000001", "0.00000123", "123456789012345", "1234567890123456", "999999999999999.9", "0.1", "-2.5", "12.3450"} {
		check(lit)
	}
	for range 200000 {
		check(randDecimal(r, 18, 18))
	}
}

// randDecimal is a random JSON number literal: an optional sign, up to
// maxInt integer digits (no leading zero) and, two times in three, a
// fraction of 1 to maxFrac digits, a third of them zeros.
func randDecimal(r *rand.Rand, maxInt, maxFrac int) string {
	var b []byte
	if r.IntN(4) == 0 {
		b = append(b, '-')
	}
	ni := r.IntN(maxInt)
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
		nf := 1 + r.IntN(maxFrac)
		for j := 0; j < nf; j++ {
			d := byte('0' + r.IntN(10))
			if r.IntN(3) == 0 {
				d = '0'
			}
			b = append(b, d)
		}
	}
	return string(b)
}

// Matching the request's path as it is (matchPath, when it was sent
// without escapes and holds no '%') finds what matching its escaped form
// finds, with the same parameters, for any request target.
func TestMatchPathAgreesWithEscapedPath(t *testing.T) {
	routes := []string{"/orders/{id}", "/v1 beta/orders", "/files/{name}.{ext}", "/a/{x}/b/{y}", "/é/{x}", "/{x}"}
	var pats []*routePattern
	for _, rt := range routes {
		rp, err := parseRoute(rt)
		if err != nil {
			t.Fatal(err)
		}
		pats = append(pats, rp)
	}
	alphabet := []string{"/", "a", "b", "orders", "files", "x.y", " ", "%20", "%2F", "%25", "%zz", "é", "%C3%A9", "+", ";", "?q", "#", "[", "]", "v1 beta", "v1%20beta", "'", "@", ":"}
	r := rand.New(rand.NewPCG(5, 6))
	seen := 0
	for range 20000 {
		target := "/"
		for range 1 + r.IntN(6) {
			target += alphabet[r.IntN(len(alphabet))]
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			continue
		}
		seen++
		for _, rp := range pats {
			wantP, wantOK := rp.match(u.EscapedPath(), nil)
			gotP, gotOK := rp.match(matchPath(u), nil)
			if gotOK != wantOK || !slices.Equal(gotP, wantP) {
				t.Fatalf("%q (Path %q, RawPath %q) against %s: matchPath %v %q, escaped path %v %q", target, u.Path, u.RawPath, rp.template, gotOK, gotP, wantOK, wantP)
			}
		}
	}
	if seen < 10000 {
		t.Fatalf("only %d request targets parsed", seen)
	}
}
