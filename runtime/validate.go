package runtime

// Validators the generator shares with the runtime, so that what idemgen
// accepts at generation time is exactly what NewMiddleware accepts at
// start-up.

// RouteShape checks a path template as the middleware parses it and
// returns it with its parameter names erased ("/a/{id}.{ext}" ->
// "/a/{}.{}"): two templates of one shape match the same requests.
func RouteShape(template string) (string, error) {
	rp, err := parseRoute(template)
	if err != nil {
		return "", err
	}
	return rp.shape, nil
}

// ValidatePointer checks RFC 6901 JSON Pointer syntax, as used by
// Policy.FingerprintInclude and FingerprintExclude.
func ValidatePointer(p string) error {
	_, err := parsePointer(p)
	return err
}

// PointerTokens splits an RFC 6901 JSON Pointer into its unescaped
// reference tokens, the steps the fingerprint follows into a body.
func PointerTokens(p string) ([]string, error) { return parsePointer(p) }

// IsToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the syntax
// of header names and methods.
func IsToken(s string) bool { return isToken(s) }
