// Package policysyntax parses the strings an idempotency policy names:
// HTTP tokens (methods, header names), RFC 6901 JSON Pointers (the
// fingerprint's include and exclude lists, a message id's body field) and
// path templates (routes and base paths).
//
// The runtime parses them when NewMiddleware compiles a policy, the
// generator when it checks a spec, and the message adapters when they are
// configured: all three use this one implementation, so that what idemgen
// accepts at generation time is what the middleware accepts at start-up.
// It imports only the standard library, as the runtime does.
package policysyntax
