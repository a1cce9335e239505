package storekit_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/storekit"
)

func TestCheckRecordKey(t *testing.T) {
	long := strings.Repeat("k", storekit.MaxField+1)
	for _, tc := range []struct {
		scope, key string
		want       string // "" for no error
	}{
		{"op", "k", ""},
		{"op", strings.Repeat("k", storekit.MaxField), ""},
		{"", "k", "scope must be 1 to 255 bytes, got 0"},
		{long, "k", "scope must be 1 to 255 bytes, got 256"},
		{"op", "", "key must be 1 to 255 bytes, got 0"},
		{"op", long, "key must be 1 to 255 bytes, got 256"},
	} {
		err := storekit.CheckRecordKey(idemrt.RecordKey{Scope: tc.scope, Key: tc.key})
		if got := errText(err); !strings.Contains(got, tc.want) || (tc.want == "") != (err == nil) {
			t.Errorf("CheckRecordKey(%d-byte scope, %d-byte key) = %v, want %q", len(tc.scope), len(tc.key), err, tc.want)
		}
	}
}

func TestCheckMessage(t *testing.T) {
	long := strings.Repeat("m", storekit.MaxField+1)
	if err := storekit.CheckMessage("billing", "msg-1"); err != nil {
		t.Errorf("a valid message: %v", err)
	}
	for _, tc := range [][2]string{{"", "m"}, {long, "m"}, {"c", ""}, {"c", long}} {
		if err := storekit.CheckMessage(tc[0], tc[1]); err == nil {
			t.Errorf("CheckMessage(%d-byte consumer, %d-byte id): no error", len(tc[0]), len(tc[1]))
		}
	}
}

func TestDurationUnitsRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d, unit time.Duration
		want    int64
	}{
		{0, time.Millisecond, 0},
		{-time.Second, time.Millisecond, 0},
		{time.Nanosecond, time.Millisecond, 1},
		{time.Millisecond, time.Millisecond, 1},
		{time.Millisecond + 1, time.Millisecond, 2},
		{1500 * time.Microsecond, time.Microsecond, 1500},
		{10 * time.Second, time.Millisecond, 10000},
	} {
		if got := storekit.DurationUnits(tc.d, tc.unit); got != tc.want {
			t.Errorf("DurationUnits(%v, %v) = %d, want %d", tc.d, tc.unit, got, tc.want)
		}
	}
}

func TestCompletionOf(t *testing.T) {
	key := idemrt.RecordKey{Scope: "createCharge", Key: "k1"}
	got, err := storekit.CompletionOf(idemrt.Completion{RecordKey: key})
	if err != nil || !reflect.DeepEqual(got, storekit.Tombstone()) || got.Headers == nil || got.Body == nil {
		t.Errorf("no response: %+v, %v; want a tombstone with empty, non-nil headers and body", got, err)
	}
	h := http.Header{"Location": {"/v1/charges/1"}}
	got, err = storekit.CompletionOf(idemrt.Completion{RecordKey: key, Response: &idemrt.SavedResponse{Status: 201, Header: h}})
	if err != nil || got.Status != 201 || got.Tombstone || got.Body == nil || len(got.Body) != 0 {
		t.Fatalf("a response without a body: %+v, %v", got, err)
	}
	if back, err := storekit.DecodeHeader(got.Headers); err != nil || !reflect.DeepEqual(back, h) {
		t.Errorf("headers decode to %v, %v; want %v", back, err, h)
	}
	if _, err := storekit.CompletionOf(idemrt.Completion{RecordKey: idemrt.RecordKey{Scope: "op"}}); err == nil {
		t.Error("an empty key: no error")
	}
}

func TestRecordResult(t *testing.T) {
	fp := make([]byte, 32)
	fp[0], fp[31] = 7, 9
	h := http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"a=1", "b=2"}}

	res, err := storekit.Record{State: storekit.StateInProgress, Epoch: 4, Fingerprint: fp, FingerprintVersion: 2, LeaseRemaining: 3 * time.Second}.Result()
	if err != nil || res.State != idemrt.InProgress || res.Epoch != 4 || res.FingerprintVersion != 2 || res.LeaseRemaining != 3*time.Second ||
		res.Fingerprint[0] != 7 || res.Fingerprint[31] != 9 || res.Response != nil {
		t.Errorf("in progress: %+v, %v", res, err)
	}
	res, err = storekit.Record{State: storekit.StateInProgress, Fingerprint: fp, LeaseRemaining: -time.Second}.Result()
	if err != nil || res.LeaseRemaining != 0 {
		t.Errorf("in progress with a negative lease left: %+v, %v; want LeaseRemaining 0", res, err)
	}
	res, err = storekit.Record{State: storekit.StateCompleted, Epoch: 5, Fingerprint: fp, Status: 201, Headers: storekit.EncodeHeader(h), Body: []byte(`{"id":1}`)}.Result()
	if err != nil || res.State != idemrt.Completed || res.Tombstone || res.Response == nil ||
		res.Response.Status != 201 || !reflect.DeepEqual(res.Response.Header, h) || string(res.Response.Body) != `{"id":1}` {
		t.Errorf("completed: %+v, %v", res, err)
	}
	res, err = storekit.Record{State: storekit.StateCompleted, Fingerprint: fp, Tombstone: true, Headers: []byte{0xff}}.Result()
	if err != nil || !res.Tombstone || res.Response != nil {
		t.Errorf("tombstone: %+v, %v; want a tombstone whose headers are not read", res, err)
	}

	for name, r := range map[string]storekit.Record{
		"short fingerprint": {State: storekit.StateCompleted, Fingerprint: fp[:31]},
		"released":          {State: storekit.StateReleased, Fingerprint: fp},
		"unknown state":     {State: 9, Fingerprint: fp},
		"corrupt headers":   {State: storekit.StateCompleted, Fingerprint: fp, Headers: []byte{1, 5}},
	} {
		if res, err := r.Result(); err == nil {
			t.Errorf("%s: %+v, no error", name, res)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
