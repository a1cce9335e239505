package policysyntax

import (
	"fmt"
	"strings"
)

// SplitPointer splits an RFC 6901 JSON Pointer into its unescaped reference
// tokens, the steps it follows into a document. The empty pointer, the
// whole document, has no tokens.
func SplitPointer(p string) ([]string, error) {
	if p == "" {
		return []string{}, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 >= len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", p)
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}
