package echoidem

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/adapters/internal/bridge"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// Config configures the adapter.
type Config struct {
	// Options configures the idempotency engine: Store, Hooks, Logger, and
	// Principal when Config.Principal is nil.
	Options idemrt.Options
	// Principal identifies the caller of operations whose principal is
	// auth, from echo's context (for example c.Get("user"), set by an auth
	// middleware). When set it replaces Options.Principal. It runs before
	// the handler: register the auth middleware before this one. An error
	// or an empty string answers 401 and the handler does not run.
	Principal func(echo.Context) (string, error)
}

// options are the engine's options, with Principal reading echo's context
// through cfg.Principal.
func (cfg Config) options() idemrt.Options {
	if cfg.Principal == nil {
		return cfg.Options
	}
	return bridge.Principal(cfg.Options, func(k *call) (string, error) { return cfg.Principal(k.c) })
}

// Middleware returns echo middleware that protects the operations of
// policies, matched by method and request path as idemrt.NewMiddleware
// matches them (a policy's route under its BasePaths), for e.Use or g.Use.
// Requests of other routes go on through echo untouched. The checks
// idemrt.NewMiddleware makes at start-up are its errors.
func Middleware(cfg Config, policies ...*idemrt.Policy) (echo.MiddlewareFunc, error) {
	mw, err := idemrt.NewMiddleware(cfg.options(), policies...)
	if err != nil {
		return nil, err
	}
	return middleware(mw(resume), false), nil
}

// Wrap returns echo middleware that protects one route with policy p, as
// route middleware: e.POST("/orders/:id", h, mw). Echo's path parameters
// stand for the policy's when the request path does not match p.Route
// (the route is mounted under a group's prefix), as idemrt.Wrap reads
// them.
func Wrap(cfg Config, p *idemrt.Policy) (echo.MiddlewareFunc, error) {
	h, err := idemrt.Wrap(cfg.options(), p, resume)
	if err != nil {
		return nil, err
	}
	return middleware(h, true), nil
}

// call is what one request carries through the engine to resume.
type call struct {
	c    echo.Context
	next echo.HandlerFunc
	res  *echo.Response // the response the middleware was given
	err  error          // next's error when the engine passed the request through
}

func middleware(h http.Handler, params bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req, res := c.Request(), c.Response()
			k := &call{c: c, next: next, res: res}
			r := bridge.With(req, k)
			if params {
				for _, name := range c.ParamNames() {
					r.SetPathValue(name, c.Param(name))
				}
			}
			// Restored even on a panic, so that echo's Recover writes to
			// the client rather than into the engine's capture.
			defer func() {
				c.SetRequest(req)
				c.SetResponse(res)
			}()
			h.ServeHTTP(res, r)
			return k.err
		}
	}
}

// resume is the handler the engine runs: the rest of echo's chain.
var resume = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	k, _ := bridge.From[*call](r)
	c := k.c
	c.SetRequest(r) // the engine's request: its body, its transaction
	if w == http.ResponseWriter(k.res) {
		// Not protected (another route, or an optional key that is
		// absent): echo handles the error as usual.
		k.err = k.next(c)
		return
	}
	// Protected: w captures the response. A returned error is written now,
	// through echo's error handler, so that it is what gets saved or
	// releases the key.
	c.SetResponse(echo.NewResponse(w, c.Echo()))
	if err := k.next(c); err != nil {
		c.Error(err)
	}
})
