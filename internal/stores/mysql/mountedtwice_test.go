package mysql

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// TestMountedTwiceTransactional: a transactional operation mounted twice
// answers 500 mounted-twice at once. The inner claim must not be made: on
// MySQL it waits on the outer attempt's uncommitted record, which waits on
// it, until the store bound ends the wait (5 s with a 1 minute lease), on
// every request.
func TestMountedTwiceTransactional(t *testing.T) {
	st := newTestDB(t).store(t)
	p := harness.Policy(true)
	p.Lease = time.Minute
	wrap := func(h http.Handler) http.Handler {
		w, err := idemrt.Wrap(idemrt.Options{Store: st}, p, h)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	ran := 0
	outer := wrap(wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		w.WriteHeader(http.StatusCreated)
	})))
	start := time.Now()
	w := harness.Do(outer, harness.UniqueKey(t, "twice"))
	if d := time.Since(start); w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), idemrt.ProblemMountedTwice) || d > 2*time.Second {
		t.Errorf("mounted twice, transactional: %d %s after %v; want 500 mounted-twice at once", w.Code, w.Body, d)
	}
	if ran != 0 {
		t.Errorf("the handler ran %d times", ran)
	}
}

// TestMountedTwiceOverTwoStores: two NewStore values over one database
// (each with its own *sql.DB) are one store to the runtime; a wrapper
// mounted twice over them answers 500 mounted-twice, not 409 in-progress
// for ever. A store of another database of the server is another.
func TestMountedTwiceOverTwoStores(t *testing.T) {
	db := newTestDB(t)
	harness.MountedTwice(t, db.store(t), db.store(t), newTestDB(t).store(t), true)
}
