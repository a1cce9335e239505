package harness

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// MountedTwice checks a wrapper mounted inside another one for the same
// key over two Store values of one table (a and b, made by two NewStore
// calls over one database): every request, of 16 concurrent clients, is
// answered 500 mounted-twice, without waiting on the outer claim, and the
// handler never runs, plain and transactional (for a TxStore); the key
// runs once the wiring is fixed. elsewhere is a store of another table
// (another database or schema): over a and it, both wrappers claim, as
// over two stores (transactional too, unless !elsewhereTx: the PostgreSQL
// stores of two schemas of one database share the key's advisory lock, so
// the inner transactional claim waits on the outer one and answers 409
// in-progress).
func MountedTwice(t *testing.T, a, b, elsewhere idemrt.Store, elsewhereTx bool) {
	t.Helper()
	ida, idb := identity(a), identity(b)
	if ida == "" || ida != idb {
		t.Fatalf("two stores of one table: identities %q and %q, want one, not empty", ida, idb)
	}
	if ide := identity(elsewhere); ide == "" || ide == ida {
		t.Fatalf("a store of another table: identity %q, beside %q", ide, ida)
	}
	for _, transactional := range []bool{false, true} {
		if _, ok := a.(idemrt.TxStore); transactional && !ok {
			continue
		}
		p := Policy(transactional)
		p.Lease = time.Minute
		var ran atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran.Add(1)
			w.WriteHeader(http.StatusCreated)
		})
		wrap := func(st idemrt.Store, h http.Handler) http.Handler {
			w, err := idemrt.Wrap(idemrt.Options{Store: st}, p, h)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		inner := wrap(b, h)
		outer := wrap(a, inner)
		key := UniqueKey(t, fmt.Sprintf("twice-%v", transactional))
		var wg sync.WaitGroup
		for c := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 4 {
					// A key of its own: two requests of one key would
					// meet at the outer claim, and one get 409.
					start := time.Now()
					w := Do(outer, fmt.Sprintf("%s-%d-%d", key, c, i))
					// Not after waiting on the outer claim until its lease
					// (a minute) ends; the bound is loose, as 16 clients'
					// claims queue on SQLite's write lock on a loaded machine.
					if d := time.Since(start); w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), idemrt.ProblemMountedTwice) || d > p.Lease/2 {
						t.Errorf("transactional %v: %d %s after %v; want 500 mounted-twice, without waiting out the lease", transactional, w.Code, w.Body, d)
					}
				}
			}()
		}
		wg.Wait()
		if n := ran.Load(); n != 0 {
			t.Errorf("transactional %v: the handler ran %d times", transactional, n)
		}
		if w := Do(inner, key+"-0-0"); w.Code != http.StatusCreated || ran.Load() != 1 {
			t.Errorf("transactional %v: once the wiring is fixed: %d %s, %d runs; want 201 and 1", transactional, w.Code, w.Body, ran.Load())
		}
		ran.Store(0)
		if transactional && !elsewhereTx {
			continue
		}
		if w := Do(wrap(a, wrap(elsewhere, h)), key+"-elsewhere"); w.Code != http.StatusCreated || ran.Load() != 1 {
			t.Errorf("transactional %v: over two tables: %d %s, %d runs; want 201 and 1", transactional, w.Code, w.Body, ran.Load())
		}
	}
}

func identity(st idemrt.Store) string {
	if si, ok := st.(idemrt.StoreIdentifier); ok {
		return si.StoreIdentity()
	}
	return ""
}
