package storekit_test

import (
	"reflect"
	"testing"
	"time"

	_ "github.com/idemgen/idemgen/internal/testutil" // -update
	"github.com/idemgen/idemgen/storekit"
)

func TestEventHeaders(t *testing.T) {
	b, err := storekit.EncodeEventHeaders(nil)
	if err != nil || b == nil || len(b) != 0 {
		t.Errorf("no headers encode to %q, %v; want an empty, non-nil slice", b, err)
	}
	if h, err := storekit.DecodeEventHeaders(b); err != nil || h != nil {
		t.Errorf("nothing decodes to %v, %v; want nil", h, err)
	}
	h := map[string]string{"trace": "abc", "content-type": "application/json"}
	b, err = storekit.EncodeEventHeaders(h)
	if err != nil || string(b) != `{"content-type":"application/json","trace":"abc"}` {
		t.Errorf("encode = %s, %v; want the keys sorted", b, err)
	}
	if back, err := storekit.DecodeEventHeaders(b); err != nil || !reflect.DeepEqual(back, h) {
		t.Errorf("decode = %v, %v; want %v", back, err, h)
	}
	if _, err := storekit.DecodeEventHeaders([]byte(`{"a":1}`)); err == nil {
		t.Error("a non-string value: no error")
	}
}

func TestCheckClaimEvents(t *testing.T) {
	if n, err := storekit.CheckClaimEvents(10, time.Second); n != 10 || err != nil {
		t.Errorf("CheckClaimEvents(10, 1s) = %d, %v", n, err)
	}
	if n, err := storekit.CheckClaimEvents(1<<40, time.Second); n != storekit.MaxClaimEvents || err != nil {
		t.Errorf("a huge limit: %d, %v; want MaxClaimEvents", n, err)
	}
	for _, tc := range []struct {
		limit int
		lease time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1, 0}, {1, -time.Second}} {
		if _, err := storekit.CheckClaimEvents(tc.limit, tc.lease); err == nil {
			t.Errorf("CheckClaimEvents(%d, %v): no error", tc.limit, tc.lease)
		}
	}
}

func TestNonNil(t *testing.T) {
	if b := storekit.NonNil(nil); b == nil {
		t.Error("NonNil(nil) is nil")
	}
	if b := storekit.NonNil([]byte("x")); string(b) != "x" {
		t.Errorf("NonNil(x) = %q", b)
	}
}
