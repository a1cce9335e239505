// Package ginidem runs idemgen's idempotency engine as gin
// (github.com/gin-gonic/gin) middleware: a gin.HandlerFunc that claims the
// request's key, runs the rest of gin's chain (c.Next) with a
// gin.ResponseWriter that captures what the handlers write (c.JSON,
// c.AbortWithStatusJSON, c.Status...), saves or releases the result, and
// answers replays and problems (400, 409, 422...) without running the
// handlers.
//
// Middleware protects the operations of a set of policies (the generated
// package's Policies()), matched by method and request path, for r.Use or
// a route group; Wrap protects one route. Config.Principal reads the
// caller from gin's context, e.g. what an auth middleware stored with
// c.Set("user", ...).
//
//	mw, err := ginidem.Middleware(ginidem.Config{
//		Options:   idemrt.Options{Store: store},
//		Principal: func(c *gin.Context) (string, error) { return c.GetString("user"), nil },
//	}, idem.Policies()...)
//	...
//	api := r.Group("/", auth, mw)
//
// See docs/frameworks.md.
package ginidem
