package ginidem_test

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/adapters/ginidem"
	"github.com/idemgen/idemgen/internal/contracttest"
	_ "github.com/idemgen/idemgen/internal/testutil" // -update
	idemrt "github.com/idemgen/idemgen/runtime"
)

func init() { gin.SetMode(gin.TestMode) }

func middleware(t *testing.T, cfg ginidem.Config, policies ...*idemrt.Policy) gin.HandlerFunc {
	t.Helper()
	if cfg.Options.Store == nil {
		cfg.Options.Store = idemrt.NewMemoryStore()
	}
	mw, err := ginidem.Middleware(cfg, policies...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// created answers 201 with the run number and the request body.
func created(runs *atomic.Int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		n := runs.Add(1)
		body, _ := io.ReadAll(c.Request.Body)
		c.Header("Location", fmt.Sprintf("/charges/ch_%d", n))
		c.JSON(http.StatusCreated, gin.H{"id": fmt.Sprintf("ch_%d", n), "request": string(body)})
	}
}

func TestReplayMismatchAndInProgress(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	r := gin.New()
	r.Use(middleware(t, ginidem.Config{},
		contracttest.Policy("createCharge", "/charges"),
		contracttest.Policy("slow", "/slow")))
	r.POST("/charges", created(&runs))
	r.POST("/slow", func(c *gin.Context) {
		close(started)
		<-release
		c.Status(http.StatusNoContent)
	})
	url := contracttest.Serve(t, r)

	// The 204 is saved: gin writes a bodiless status after its handlers,
	// and the adapter does it into the capture.
	contracttest.Basics(t, url, &runs, started, release)
}

// c.AbortWithStatusJSON is captured like any write: a 400 is saved and
// replayed, a 500 releases the key.
func TestAbortWithStatusJSON(t *testing.T) {
	t.Parallel()
	var rejects, fails atomic.Int64
	r := gin.New()
	r.Use(middleware(t, ginidem.Config{},
		contracttest.Policy("reject", "/reject"),
		contracttest.Policy("fail", "/fail")))
	r.POST("/reject", func(c *gin.Context) {
		rejects.Add(1)
		c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "amount must be positive"})
	}, func(c *gin.Context) { t.Error("a handler after Abort ran") })
	r.POST("/fail", func(c *gin.Context) {
		fails.Add(1)
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "the database is down"})
	})
	url := contracttest.Serve(t, r)

	first := contracttest.Post(t, url+"/reject", "r1", `{"amount":-1}`)
	if first.Status != http.StatusBadRequest || first.Body != `{"error":"amount must be positive"}` {
		t.Fatalf("first: %d %q", first.Status, first.Body)
	}
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/reject", "r1", `{"amount":-1}`))
	if n := rejects.Load(); n != 1 {
		t.Errorf("rejecting handler ran %d times, want 1", n)
	}

	for i := 1; i <= 2; i++ {
		res := contracttest.Post(t, url+"/fail", "f1", `{}`)
		if res.Status != http.StatusInternalServerError || res.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %v %s, want a fresh 500", i, res.Status, res.Header, res.Body)
		}
	}
	if n := fails.Load(); n != 2 {
		t.Errorf("failing handler ran %d times, want 2 (a 500 releases the key)", n)
	}
}

// The principal comes from what gin's auth middleware put on the context.
func TestPrincipalFromGinContext(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	auth := func(c *gin.Context) {
		if u := c.GetHeader("X-User"); u != "" {
			c.Set("user", u)
		}
	}
	r := gin.New()
	r.Use(auth, middleware(t, ginidem.Config{
		Principal: func(c *gin.Context) (string, error) { return c.GetString("user"), nil },
	}, contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) {
		p.Principal = idemrt.PrincipalAuth
		p.Challenges = []string{"Bearer"}
	})))
	r.POST("/charges", created(&runs))
	url := contracttest.Serve(t, r)

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

// Middleware on a route group under a prefix (the policy's base path), and
// other routes of the group left to gin.
func TestGroup(t *testing.T) {
	t.Parallel()
	var runs, others atomic.Int64
	r := gin.New()
	api := r.Group("/api", middleware(t, ginidem.Config{}, contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) {
		p.BasePaths = []string{"/api"}
	})))
	api.POST("/charges", created(&runs))
	api.POST("/other", func(c *gin.Context) {
		others.Add(1)
		c.String(http.StatusTeapot, "not protected")
	})
	url := contracttest.Serve(t, r)

	first := contracttest.Post(t, url+"/api/charges", "k1", `{}`)
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/api/charges", "k1", `{}`))
	contracttest.Problem(t, contracttest.Post(t, url+"/api/charges", "", `{}`), http.StatusBadRequest, idemrt.ProblemKeyMissing)
	for range 2 {
		if res := contracttest.Post(t, url+"/api/other", "k1", `{}`); res.Status != http.StatusTeapot {
			t.Errorf("unprotected route: %d %s, want 418", res.Status, res.Body)
		}
	}
	if runs.Load() != 1 || others.Load() != 2 {
		t.Errorf("runs %d (want 1), unprotected runs %d (want 2)", runs.Load(), others.Load())
	}
}

// Wrap on one route: gin's path parameters stand for the policy's wherever
// the route is mounted, so the same operation under two prefixes shares
// its keys.
func TestWrapRoute(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	mw, err := ginidem.Wrap(ginidem.Config{Options: idemrt.Options{Store: idemrt.NewMemoryStore()}},
		contracttest.Policy("createOrder", "/orders/{id}"))
	if err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	r.POST("/orders/:id", mw, created(&runs))
	r.Group("/v2").POST("/orders/:id", mw, created(&runs))
	url := contracttest.Serve(t, r)

	first := contracttest.Post(t, url+"/orders/7", "k1", `{}`)
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/v2/orders/7", "k1", `{}`))
	contracttest.Problem(t, contracttest.Post(t, url+"/v2/orders/8", "k1", `{}`), http.StatusUnprocessableEntity, idemrt.ProblemFingerprintMismatch)
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// A panicking handler releases the key, and gin's Recovery, outside the
// middleware, answers the client.
func TestPanicReleases(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, err any) {
		c.AbortWithStatus(http.StatusInternalServerError)
	}), middleware(t, ginidem.Config{}, contracttest.Policy("boom", "/boom")))
	r.POST("/boom", func(c *gin.Context) {
		runs.Add(1)
		panic("boom")
	})
	url := contracttest.Serve(t, r)
	for i := 1; i <= 2; i++ {
		if res := contracttest.Post(t, url+"/boom", "b1", `{}`); res.Status != http.StatusInternalServerError {
			t.Fatalf("attempt %d: %d %s, want Recovery's 500", i, res.Status, res.Body)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (a panic releases the key)", n)
	}
}

func TestStartupError(t *testing.T) {
	t.Parallel()
	_, err := ginidem.Middleware(ginidem.Config{Options: idemrt.Options{Store: idemrt.NewMemoryStore()}},
		contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) { p.Principal = idemrt.PrincipalAuth }))
	if err == nil {
		t.Fatal("no error for an auth policy without a principal")
	}
}

// In transactional mode the handler reads the transaction from
// c.Request's context: the adapter hands gin the engine's request.
func TestTransactional(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	r := gin.New()
	r.Use(middleware(t, ginidem.Config{}, contracttest.Policy("createCharge", "/charges", func(p *idemrt.Policy) { p.Transactional = true })))
	r.POST("/charges", func(c *gin.Context) {
		if _, ok := idemrt.TxFromContext(c.Request.Context()); !ok {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "no transaction in the request's context"})
			return
		}
		created(&runs)(c)
	})
	url := contracttest.Serve(t, r)
	first := contracttest.Post(t, url+"/charges", "k1", `{}`)
	if first.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	contracttest.Replayed(t, first, contracttest.Post(t, url+"/charges", "k1", `{}`))
}
