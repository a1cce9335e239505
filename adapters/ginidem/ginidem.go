package ginidem

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/adapters/internal/bridge"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// Config configures the adapter.
type Config struct {
	// Options configures the idempotency engine: Store, Hooks, Logger, and
	// Principal when Config.Principal is nil.
	Options idemrt.Options
	// Principal identifies the caller of operations whose principal is
	// auth, from gin's context (for example c.GetString("user"), set by an
	// auth middleware). When set it replaces Options.Principal. It runs
	// before the handlers: register the auth middleware before this one.
	// An error or an empty string answers 401 and the handlers do not run.
	Principal func(*gin.Context) (string, error)
}

// options are the engine's options, with Principal reading gin's context
// through cfg.Principal.
func (cfg Config) options() idemrt.Options {
	if cfg.Principal == nil {
		return cfg.Options
	}
	return bridge.Principal(cfg.Options, func(k *call) (string, error) { return cfg.Principal(k.c) })
}

// Middleware returns gin middleware that protects the operations of
// policies, matched by method and request path as idemrt.NewMiddleware
// matches them (a policy's route under its BasePaths), for r.Use or
// r.Group(prefix, mw). Requests of other routes go on through gin
// untouched. The checks idemrt.NewMiddleware makes at start-up are its
// errors.
func Middleware(cfg Config, policies ...*idemrt.Policy) (gin.HandlerFunc, error) {
	mw, err := idemrt.NewMiddleware(cfg.options(), policies...)
	if err != nil {
		return nil, err
	}
	return handler(mw(resume), false), nil
}

// Wrap returns gin middleware that protects one route with policy p:
// r.POST("/orders/:id", mw, h). Gin's path parameters stand for the
// policy's when the request path does not match p.Route (the route is
// mounted under a group's prefix), as idemrt.Wrap reads them.
func Wrap(cfg Config, p *idemrt.Policy) (gin.HandlerFunc, error) {
	h, err := idemrt.Wrap(cfg.options(), p, resume)
	if err != nil {
		return nil, err
	}
	return handler(h, true), nil
}

// call is what one request carries through the engine to resume.
type call struct {
	c   *gin.Context
	w   gin.ResponseWriter // the writer the middleware was given
	ran bool               // the engine ran the rest of the chain
}

func handler(h http.Handler, params bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		req, w := c.Request, c.Writer
		k := &call{c: c, w: w}
		r := bridge.With(req, k)
		if params {
			for _, p := range c.Params {
				r.SetPathValue(p.Key, p.Value)
			}
		}
		// Restored even on a panic, so that gin's Recovery writes to the
		// client rather than into the engine's capture.
		defer func() { c.Request, c.Writer = req, w }()
		h.ServeHTTP(w, r)
		if !k.ran {
			// A replay or a problem: the handlers must not run.
			c.Abort()
		}
	}
}

// resume is the handler the engine runs: the rest of gin's chain.
var resume = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	k, _ := bridge.From[*call](r)
	k.ran = true
	c := k.c
	c.Request = r // the engine's request: its body, its transaction
	if w == http.ResponseWriter(k.w) {
		c.Next() // not protected
		return
	}
	// Protected: w captures the response. A status set without a body
	// (c.Status(204)) is written after the handlers, as gin's engine
	// does, but into the capture.
	gw := newWriter(w, r)
	c.Writer = gw
	c.Next()
	gw.WriteHeaderNow()
})
