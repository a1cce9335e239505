package runtime

import (
	"slices"
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
		{"/files/{name}.{ext}", "/files/report.q1.pdf", true, []string{"report", "q1.pdf"}},
		{"/files/{name}.{ext}", "/files/.pdf", false, nil},
		{"/files/{name}.{ext}", "/files/report.", false, nil},
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
