package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// A ServeMux wrapped by the middleware: the second request with the same
// key is a replay.
func ExampleNewMiddleware() {
	mux := http.NewServeMux()
	runs := 0
	mux.HandleFunc("POST /v1/charges", func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ch_%d"}`, runs)
	})
	createCharge := &idemrt.Policy{
		OperationID: "createCharge",
		Method:      http.MethodPost,
		Route:       "/charges",
		BasePaths:   []string{"/v1"},
		Key:         idemrt.KeyFromHeader,
		KeyName:     "Idempotency-Key",
		Principal:   idemrt.PrincipalAuth,
		TTL:         24 * time.Hour,
	}
	mw, err := idemrt.NewMiddleware(idemrt.Options{
		Store:     idemrt.NewMemoryStore(),
		Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
	}, createCharge)
	if err != nil {
		panic(err)
	}
	srv := mw(mux)
	for i := 0; i < 2; i++ {
		r := httptest.NewRequest("POST", "/v1/charges", strings.NewReader(`{"amount":100}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "8e03978e")
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Body)
		fmt.Println(strings.TrimSpace(fmt.Sprint(w.Code, " ", string(body), " ", w.Header().Get("Idempotent-Replayed"))))
	}
	// Output:
	// 201 {"id":"ch_1"}
	// 201 {"id":"ch_1"} true
}

// Start-up refuses an auth operation without a principal function.
func ExampleWrap_startupError() {
	_, err := idemrt.Wrap(idemrt.Options{Store: idemrt.NewMemoryStore()},
		&idemrt.Policy{OperationID: "createCharge", Method: "POST", Route: "/charges", Principal: idemrt.PrincipalAuth},
		http.NotFoundHandler())
	fmt.Println(err != nil && strings.Contains(err.Error(), "Options.Principal is nil"))
	// Output: true
}

// Expired records are deleted in batches until the context ends.
func ExampleRunSweeper() {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := idemrt.RunSweeper(ctx, idemrt.NewMemoryStore(), 10*time.Millisecond, 500)
	fmt.Println(err)
	// Output: <nil>
}
