package main

import (
	"fmt"
	"net/http"

	"github.com/idemgen/idemgen/examples/openapi-servers/internal/idem"
	"github.com/idemgen/idemgen/examples/openapi-servers/internal/oapi"
	"github.com/idemgen/idemgen/examples/openapi-servers/internal/ogenapi"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// The generated servers this example wires.
const (
	serverOapiCodegen = "oapi-codegen"
	serverOgen        = "ogen"
)

// app is one generated server behind the middleware idemgen generated.
type app struct {
	http.Handler
	shop *shop
	// prefix is where the router serves the spec's paths ("" or "/v1").
	prefix string
	// basePaths is the middleware's Options.BasePaths (nil: the spec's
	// servers, /v1); CheckCoverage must be given the same.
	basePaths []string
}

// newApp wires the server of kind over store, as main serves it.
//
// The spec's servers say /v1, so the generated policies match /v1/orders.
// naive wires it the way that looks right and is not: both generators'
// routers serve the spec's paths at the root (/orders), the middleware
// matches nothing, and every request runs unprotected. The fixes: for
// oapi-codegen, keep its router and tell the middleware where the paths
// are (Options.BasePaths, or idemgen generate -base-path /); for ogen,
// serve the paths where the spec says (WithPathPrefix).
func newApp(kind string, store idemrt.Store, naive bool) (*app, error) {
	a := &app{shop: newShop()}
	var router http.Handler
	switch kind {
	case serverOapiCodegen:
		router = oapi.HandlerFromMux(oapiServer{a.shop}, http.NewServeMux())
		if !naive {
			a.basePaths = []string{"/"}
		}
	case serverOgen:
		var opts []ogenapi.ServerOption
		if !naive {
			a.prefix = "/v1"
			opts = append(opts, ogenapi.WithPathPrefix(a.prefix))
		}
		srv, err := ogenapi.NewServer(ogenServer{a.shop}, opts...)
		if err != nil {
			return nil, err
		}
		router = srv
	default:
		return nil, fmt.Errorf("unknown server %q (want %s or %s)", kind, serverOapiCodegen, serverOgen)
	}
	mw, err := idem.Middleware(idemrt.Options{Store: store, BasePaths: a.basePaths})
	if err != nil {
		return nil, err
	}
	a.Handler = mw(router)
	return a, nil
}
