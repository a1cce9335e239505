// Package runtime is the idempotency engine that idemgen's generated
// wrappers call: key parsing, request fingerprints (RFC 8785 canonical
// JSON), the claim state machine with leases, epochs and fencing, response
// capture and replay, and RFC 9457 problem responses. It imports only the
// standard library. Generated code imports it as idemrt, because its name
// collides with the standard library's runtime package.
//
// The behaviour is specified in docs/contract.md.
package runtime
