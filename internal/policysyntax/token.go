package policysyntax

import "strings"

// IsToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the syntax
// of header names and methods.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
