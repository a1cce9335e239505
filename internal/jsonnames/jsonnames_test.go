package jsonnames_test

import (
	"testing"

	"github.com/idemgen/idemgen/internal/jsonnames"
	_ "github.com/idemgen/idemgen/internal/testutil"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"id":"a","amount":1}`, true},
		{`{"id":{"id":1},"x":[{"id":2},{"id":3}]}`, true},
		{`[{"a":1},{"a":2}]`, true},
		{`{"a":{},"b":[],"c":"a"}`, true},
		{`{"id":"a","id":"b"}`, false},
		{`{"id":"a","ID":"b"}`, false},
		{`{"event":{"id":"a","Id":"b"}}`, false},
		{`[{"k":1,"\u212a":2}]`, false}, // the Kelvin sign folds to k
		{`{"a":1,"b":{"a":1},"A":2}`, false},
		{`{"a":`, false},
	} {
		err := jsonnames.Check([]byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.body, err, tc.ok)
		}
	}
}
