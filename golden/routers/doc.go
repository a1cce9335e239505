// Package routers holds tests only: golden/headerkey's generated middleware
// mounted with chi's and gorilla/mux's Use. It is a module of its own so that
// those routers stay out of the root module's graph.
package routers
