// Package echoidem runs idemgen's idempotency engine as echo
// (github.com/labstack/echo/v4) middleware.
//
// echo.WrapMiddleware is not enough: echo writes the error a handler
// returns after the middleware chain has returned, so a wrapped net/http
// middleware sees an empty 200, saves it, and replays it. This package
// writes a returned error through c.Error (so through e.HTTPErrorHandler)
// before the response is captured: a 500 releases the key and the retry
// runs again, a 400 is saved and replayed as that 400 with its body.
//
// Middleware protects the operations of a set of policies (the generated
// package's Policies()), matched by method and request path, for e.Use or
// g.Use; Wrap protects one route, as route middleware. Config.Principal
// reads the caller from echo's context, e.g. what an auth middleware put
// there with c.Set("user", ...).
//
//	mw, err := echoidem.Middleware(echoidem.Config{
//		Options:   idemrt.Options{Store: store},
//		Principal: func(c echo.Context) (string, error) { u, _ := c.Get("user").(string); return u, nil },
//	}, idem.Policies()...)
//	...
//	e.Use(auth, mw)
//
// See docs/frameworks.md.
package echoidem
