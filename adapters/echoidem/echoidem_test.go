package echoidem_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/adapters/echoidem"
	"github.com/idemgen/idemgen/internal/contracttest"
	_ "github.com/idemgen/idemgen/internal/testutil" // -update
	idemrt "github.com/idemgen/idemgen/runtime"
)

func middleware(t *testing.T, cfg echoidem.Config, policies ...*idemrt.Policy) echo.MiddlewareFunc {
	t.Helper()
	if cfg.Options.Store == nil {
		cfg.Options.Store = idemrt.NewMemoryStore()
	}
	mw, err := echoidem.Middleware(cfg, policies...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// created answers 201 with the run number and the request body.
func created(runs *atomic.Int64) echo.HandlerFunc {
	return func(c echo.Context) error {
		n := runs.Add(1)
		body, _ := io.ReadAll(c.Request().Body)
		c.Response().Header().Set("Location", fmt.Sprintf("/charges/ch_%d", n))
		return c.JSON(http.StatusCreated, map[string]any{"id": fmt.Sprintf("ch_%d", n), "request": string(body)})
	}
}

func TestReplayMismatchAndInProgress(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	e := echo.New()
	e.Use(middleware(t, echoidem.Config{},
		contracttest.Policy("createCharge", "/charges"),
		contracttest.Policy("slow", "/slow")))
	e.POST("/charges", created(&runs))
	e.POST("/slow", func(c echo.Context) error {
		close(started)
		<-release
		return c.NoContent(http.StatusNoContent)
	})
	url := contracttest.Serve(t, e)

	contracttest.Basics(t, url, &runs, started, release)
}

// A returned error is written by e.HTTPErrorHandler before the response is
// captured: a 500 releases the key, a 400 is saved and replayed.
func TestReturnedErrors(t *testing.T) {
	t.Parallel()
	var fails, rejects atomic.Int64
	e := echo.New()
	e.Use(middleware(t, echoidem.Config{},
		contracttest.Policy("fail", "/fail"),
		contracttest.Policy("reject", "/reject")))
	e.POST("/fail", func(c echo.Context) error {
		fails.Add(1)
		return errors.New("the database is down")
	})
	e.POST("/reject", func(c echo.Context) error {
		rejects.Add(1)
		return echo.NewHTTPError(http.StatusBadRequest, "amount must be positive")
	})
	url := contracttest.Serve(t, e)

	for i := 1; i <= 2; i++ {
		res := contracttest.Post(t, url+"/fail", "f1", `{}`)
		if res.Status != http.StatusInternalServerError || res.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %v %s, want a fresh 500", i, res.Status, res.Header, res.Body)
		}
	}
	if n := fails.Load(); n != 2 {
		t.Errorf("failing handler ran %d times, want 2 (a 500 releases the key)", n)
	}

	first := contracttest.Post(t, url+"/reject", "r1", `{"amount":-1}`)
	if first.Status != http.StatusBadRequest || first.Body != "{\"message\":\"amount must be positive\"}\n" {
		t.Fatalf("first: %d %q", first.Status, first.Body)
	}
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/reject", "r1", `{"amount":-1}`))
	if n := rejects.Load(); n != 1 {
		t.Errorf("rejecting handler ran %d times, want 1", n)
	}
}

// The principal comes from what echo's auth middleware put on the context.
func TestPrincipalFromEchoContext(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	auth := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if u := c.Request().Header.Get("X-User"); u != "" {
				c.Set("user", u)
			}
			return next(c)
		}
	}
	e := echo.New()
	e.Use(auth, middleware(t, echoidem.Config{
		Principal: func(c echo.Context) (string, error) {
			u, _ := c.Get("user").(string)
			return u, nil
		},
	}, contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) {
		p.Principal = idemrt.PrincipalAuth
		p.Challenges = []string{"Bearer"}
	})))
	e.POST("/charges", created(&runs))
	url := contracttest.Serve(t, e)

	alice := contracttest.Post(t, url+"/charges", "k1", `{}`, "X-User", "alice")
	bob := contracttest.Post(t, url+"/charges", "k1", `{}`, "X-User", "bob")
	if alice.Status != http.StatusCreated || bob.Status != http.StatusCreated || alice.Body == bob.Body {
		t.Fatalf("alice %d %s, bob %d %s: want two executions", alice.Status, alice.Body, bob.Status, bob.Body)
	}
	contracttest.Replayed(t, alice, contracttest.Post(t, url+"/charges", "k1", `{}`, "X-User", "alice"))
	anon := contracttest.Post(t, url+"/charges", "k1", `{}`)
	contracttest.Problem(t, anon, http.StatusUnauthorized, idemrt.ProblemUnauthenticated)
	if anon.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("401 WWW-Authenticate %q", anon.Header.Get("WWW-Authenticate"))
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

// Middleware on a group under a prefix (the policy's base path), and other
// routes of the group left to echo.
func TestGroup(t *testing.T) {
	t.Parallel()
	var runs, others atomic.Int64
	e := echo.New()
	g := e.Group("/api")
	g.Use(middleware(t, echoidem.Config{}, contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) {
		p.BasePaths = []string{"/api"}
	})))
	g.POST("/charges", created(&runs))
	g.POST("/other", func(c echo.Context) error {
		others.Add(1)
		return echo.NewHTTPError(http.StatusTeapot, "not protected")
	})
	url := contracttest.Serve(t, e)

	first := contracttest.Post(t, url+"/api/charges", "k1", `{}`)
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/api/charges", "k1", `{}`))
	contracttest.Problem(t, contracttest.Post(t, url+"/api/charges", "", `{}`), http.StatusBadRequest, idemrt.ProblemKeyMissing)
	for range 2 {
		if res := contracttest.Post(t, url+"/api/other", "k1", `{}`); res.Status != http.StatusTeapot {
			t.Errorf("unprotected route: %d %s, want echo's 418", res.Status, res.Body)
		}
	}
	if runs.Load() != 1 || others.Load() != 2 {
		t.Errorf("runs %d (want 1), unprotected runs %d (want 2)", runs.Load(), others.Load())
	}
}

// Wrap as route middleware: echo's path parameters stand for the policy's
// wherever the route is mounted, so the same operation under two prefixes
// shares its keys.
func TestWrapRoute(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	mw, err := echoidem.Wrap(echoidem.Config{Options: idemrt.Options{Store: idemrt.NewMemoryStore()}},
		contracttest.Policy("createOrder", "/orders/{id}"))
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.POST("/orders/:id", created(&runs), mw)
	e.Group("/v2").POST("/orders/:id", created(&runs), mw)
	e.PUT("/orders/:id", created(&runs), mw) // another method: not protected
	url := contracttest.Serve(t, e)

	first := contracttest.Post(t, url+"/orders/7", "k1", `{}`)
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/v2/orders/7", "k1", `{}`))
	contracttest.Problem(t, contracttest.Post(t, url+"/v2/orders/8", "k1", `{}`), http.StatusUnprocessableEntity, idemrt.ProblemFingerprintMismatch)
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// Start-up errors are the engine's: an auth policy needs a principal.
func TestStartupError(t *testing.T) {
	t.Parallel()
	_, err := echoidem.Middleware(echoidem.Config{Options: idemrt.Options{Store: idemrt.NewMemoryStore()}},
		contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) { p.Principal = idemrt.PrincipalAuth }))
	if err == nil {
		t.Fatal("no error for an auth policy without a principal")
	}
}

// recoverer is echo's Recover in short: a panic becomes c.Error.
func recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				c.Error(fmt.Errorf("panic: %v", p))
			}
		}()
		return next(c)
	}
}

// A panicking handler releases the key, and a recovering middleware outside
// ours answers the client (on echo's response, restored).
func TestPanicReleases(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	e := echo.New()
	e.Use(recoverer, middleware(t, echoidem.Config{}, contracttest.Policy("boom", "/boom")))
	e.POST("/boom", func(c echo.Context) error {
		runs.Add(1)
		panic("boom")
	})
	url := contracttest.Serve(t, e)
	for i := 1; i <= 2; i++ {
		if res := contracttest.Post(t, url+"/boom", "b1", `{}`); res.Status != http.StatusInternalServerError {
			t.Fatalf("attempt %d: %d %s, want the recoverer's 500", i, res.Status, res.Body)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (a panic releases the key)", n)
	}
}

// In transactional mode the handler reads the transaction from
// c.Request()'s context: the adapter hands echo the engine's request.
func TestTransactional(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	e := echo.New()
	e.Use(middleware(t, echoidem.Config{}, contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) { p.Transactional = true })))
	e.POST("/charges", func(c echo.Context) error {
		if _, ok := idemrt.TxFromContext(c.Request().Context()); !ok {
			return echo.NewHTTPError(http.StatusInternalServerError, "no transaction in the request's context")
		}
		return created(&runs)(c)
	})
	url := contracttest.Serve(t, e)
	first := contracttest.Post(t, url+"/charges", "k1", `{}`)
	if first.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/charges", "k1", `{}`))
}
