// Package bridge holds what the framework adapters (echoidem, ginidem)
// share: the framework's per-request value carried through the request's
// context, so that idemrt.Options.Principal can read the framework's auth
// and the handler the engine runs can resume the framework's chain.
package bridge

import (
	"context"
	"errors"
	"net/http"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// key is a context key per carried type, so that two adapters never read
// each other's value.
type key[T any] struct{}

// With returns r with v in its context.
func With[T any](r *http.Request, v T) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), key[T]{}, v))
}

// From returns the value With put in r's context.
func From[T any](r *http.Request) (T, bool) {
	v, ok := r.Context().Value(key[T]{}).(T)
	return v, ok
}

var errNoContext = errors.New("idempotency: the request did not come through the framework adapter")

// Principal returns opts with Principal reading the caller from the
// value With put in the request's context, through f.
func Principal[T any](opts idemrt.Options, f func(T) (string, error)) idemrt.Options {
	opts.Principal = func(r *http.Request) (string, error) {
		v, ok := From[T](r)
		if !ok {
			return "", errNoContext
		}
		return f(v)
	}
	return opts
}
