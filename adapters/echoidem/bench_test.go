package echoidem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/adapters/echoidem"
	"github.com/idemgen/idemgen/internal/contracttest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkReplay: a replay through echo and the adapter, in process; the
// net/http case is the generated middleware around a ServeMux, for
// comparison.
func BenchmarkReplay(b *testing.B) {
	p := contracttest.Policy("createCharge", "/charges")
	var runs atomic.Int64
	e := echo.New()
	mw, err := echoidem.Middleware(echoidem.Config{Options: idemrt.Options{Store: idemrt.NewMemoryStore()}}, p)
	if err != nil {
		b.Fatal(err)
	}
	e.Use(mw)
	e.POST("/charges", created(&runs))

	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ch_1"}`))
	})
	std, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, p)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"echo", e}, {"net-http", std(mux)}} {
		b.Run(c.name, func(b *testing.B) {
			serve := func() int {
				r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "bench")
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, r)
				return w.Code
			}
			if code := serve(); code != http.StatusCreated {
				b.Fatalf("first: %d", code)
			}
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}
