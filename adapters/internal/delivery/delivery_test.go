package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/idemgen/idemgen/internal/testutil" // -update
	idemrt "github.com/idemgen/idemgen/runtime"
)

func TestSourceID(t *testing.T) {
	hdr := map[string]string{"Event-Id": "h-1"}
	msg := func(broker, body string) Message {
		return Message{BrokerID: broker, Header: func(k string) string { return hdr[k] }, Body: []byte(body)}
	}
	for _, c := range []struct {
		name string
		src  Source
		msg  Message
		want string // "" wants ErrNoID
	}{
		{"broker", Broker(), msg("b-1", ""), "b-1"},
		{"zero is broker", Source{}, msg("b-1", ""), "b-1"},
		{"broker absent", Broker(), msg("", `{"id":"x"}`), ""},
		{"header", Header("Event-Id"), msg("b-1", ""), "h-1"},
		{"header absent", Header("Other"), msg("b-1", ""), ""},
		{"header, no headers", Header("Event-Id"), Message{BrokerID: "b"}, ""},
		{"body string", BodyField("/event/id"), msg("", `{"event":{"id":"e-7"}}`), "e-7"},
		{"body number as written", BodyField("/n"), msg("", `{"n":12345678901234567890}`), "12345678901234567890"},
		{"body array index", BodyField("/a/1"), msg("", `{"a":["x","y"]}`), "y"},
		{"body escaped pointer", BodyField("/a~1b"), msg("", `{"a/b":"z"}`), "z"},
		{"body absent", BodyField("/id"), msg("", `{"other":1}`), ""},
		{"body empty string", BodyField("/id"), msg("", `{"id":""}`), ""},
		{"body null", BodyField("/id"), msg("", `{"id":null}`), ""},
		{"body object", BodyField("/id"), msg("", `{"id":{}}`), ""},
		{"body not JSON", BodyField("/id"), msg("", `id=1`), ""},
		{"body two values", BodyField("/id"), msg("", `{"id":"a"} {"id":"b"}`), ""},
		{"body leading zero index", BodyField("/a/01"), msg("", `{"a":["x","y"]}`), ""},
		// encoding/json would give a handler the last "id" (or "ID"): the
		// id is not taken from such a body.
		{"body name twice", BodyField("/id"), msg("", `{"id":"a","id":"b"}`), ""},
		{"body name in two cases", BodyField("/id"), msg("", `{"id":"a","ID":"b"}`), ""},
		{"body folded name on the path", BodyField("/event/id"), msg("", `{"event":{"id":"a"},"EVENT":{"id":"b"}}`), ""},
		// encoding/json decodes invalid UTF-8 and lone surrogates to
		// U+FFFD: such ids would be one id for different messages.
		{"body invalid UTF-8", BodyField("/id"), msg("", "{\"id\":\"a\xff\"}"), ""},
		{"body lone high surrogate", BodyField("/id"), msg("", `{"id":"a\ud800"}`), ""},
		{"body lone low surrogate", BodyField("/id"), msg("", `{"id":"\udc00a"}`), ""},
		{"body surrogates reversed", BodyField("/id"), msg("", `{"id":"\udc00\ud800"}`), ""},
		{"body surrogate pair", BodyField("/id"), msg("", `{"id":"\ud83d\ude00"}`), "\U0001F600"},
		{"body escapes", BodyField("/id"), msg("", `{"id":"a\\ud800\"\u00e9"}`), `a\ud800"é`},
		{"body U+FFFD itself", BodyField("/id"), msg("", `{"id":"\ufffd"}`), "\ufffd"},
		{"body invalid UTF-8 elsewhere", BodyField("/id"), msg("", "{\"id\":\"k\",\"x\":\"\xff\"}"), "k"},
		{"body bool", BodyField("/id"), msg("", `{"id":true}`), ""},
		{"body negative number", BodyField("/id"), msg("", `{"id":-1.50}`), "-1.50"},
		{"hash", ContentHash(), msg("", "abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"too long", Broker(), msg(strings.Repeat("x", MaxID+1), ""), ""},
		{"longest", Broker(), msg(strings.Repeat("x", MaxID), ""), strings.Repeat("x", MaxID)},
	} {
		got, err := c.src.ID(c.msg)
		if c.want == "" {
			if !errors.Is(err, ErrNoID) {
				t.Errorf("%s: ID = %q, %v; want ErrNoID", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: ID = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	for _, bad := range []Source{Header(""), BodyField("id"), BodyField("")} {
		if bad.Validate() == nil {
			t.Errorf("%s validates", bad)
		}
	}
}

func TestDefaultBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := DefaultBackoff(i + 1); got != w {
			t.Errorf("DefaultBackoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

// failingStore fails BeginTx.
type failingStore struct{ idemrt.MessageStore }

func (failingStore) BeginTx(context.Context) (idemrt.Tx, error) {
	return nil, errors.New("database down")
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	st := idemrt.NewMemoryStore()
	p := Policy{MaxDeliveries: 3, Backoff: func(n int) time.Duration { return time.Duration(n) * time.Second }}
	boom := errors.New("boom")
	if r := Run(ctx, st, "c", "m1", 1, p, func(context.Context) error { return boom }); r.Action != Retry || r.Delay != time.Second || !errors.Is(r.Err, boom) || r.StoreErr {
		t.Errorf("failure on delivery 1: %+v", r)
	}
	if r := Run(ctx, st, "c", "m1", 3, p, func(context.Context) error { return boom }); r.Action != DeadLetter || !errors.Is(r.Err, boom) {
		t.Errorf("failure on delivery 3 of 3: %+v", r)
	}
	r := Run(ctx, st, "c", "m1", 2, p, func(context.Context) error { panic("kaboom") })
	if r.Action != Retry || r.Err == nil || !strings.Contains(r.Err.Error(), "kaboom") {
		t.Errorf("panic: %+v", r)
	}
	if r := Run(ctx, st, "c", "m1", 4, p, func(ctx context.Context) error {
		if _, ok := idemrt.TxFromContext(ctx); !ok {
			return errors.New("no tx")
		}
		return nil
	}); r.Action != Ack || !r.Ran {
		t.Errorf("success after failures: %+v", r)
	}
	if r := Run(ctx, st, "c", "m1", 5, p, func(context.Context) error { t.Error("duplicate ran"); return nil }); r.Action != Ack || r.Ran {
		t.Errorf("duplicate: %+v", r)
	}
	// A store failure is retried however many deliveries it took: the
	// message itself may be fine.
	if r := Run(ctx, failingStore{st}, "c", "m2", 10, p, func(context.Context) error { return nil }); r.Action != Retry || !r.StoreErr {
		t.Errorf("store failure on delivery 10 of 3: %+v", r)
	}
	if err := (Policy{MaxDeliveries: -1}).Check(); err == nil {
		t.Error("negative MaxDeliveries accepted")
	}
}
