package generator

import (
	"go/token"
	"strings"
	"unicode"
)

// initialisms are written in capitals inside Go names (FindPetByID).
var initialisms = map[string]bool{
	"ACL": true, "API": true, "ASCII": true, "CPU": true, "CSS": true, "DNS": true, "EOF": true,
	"GUID": true, "HTML": true, "HTTP": true, "HTTPS": true, "ID": true, "IP": true, "JSON": true,
	"LHS": true, "QPS": true, "RAM": true, "RHS": true, "RPC": true, "SLA": true, "SMTP": true,
	"SQL": true, "SSH": true, "TCP": true, "TLS": true, "TTL": true, "UDP": true, "UI": true,
	"UID": true, "UUID": true, "URI": true, "URL": true, "UTF8": true, "VM": true, "XML": true,
	"XMPP": true, "XSRF": true, "XSS": true, "SMS": true, "OTP": true,
}

// goName makes an exported Go identifier of s: words are split at anything
// that is not a letter or digit and at lower-to-upper case changes, then
// each is capitalised (initialisms in capitals): "find pet by id" ->
// FindPetByID, "orders.create" -> OrdersCreate, "getUserId" -> GetUserID.
// It returns "" when s holds no letter or digit.
func goName(s string) string {
	var b strings.Builder
	for _, w := range splitWords(s) {
		up := strings.ToUpper(w)
		if initialisms[up] {
			b.WriteString(up)
			continue
		}
		r := []rune(w)
		b.WriteString(strings.ToUpper(string(r[0])))
		b.WriteString(string(r[1:]))
	}
	name := b.String()
	if name == "" {
		return ""
	}
	if r := []rune(name)[0]; !unicode.IsLetter(r) {
		name = "Op" + name
	}
	if !token.IsIdentifier(name) {
		return ""
	}
	return name
}

func splitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		if !isWordRune(r) {
			flush()
			continue
		}
		if len(cur) > 0 {
			prev := cur[len(cur)-1]
			switch {
			case unicode.IsLower(prev) && unicode.IsUpper(r):
				flush()
			case unicode.IsDigit(prev) != unicode.IsDigit(r) && unicode.IsUpper(r):
				flush()
			case unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
				// "HTTPServer": the last capital starts the next word.
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// isWordRune keeps letters and digits that Go accepts in identifiers.
func isWordRune(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// derivedName names an operation that has no operationId from its method
// and path: POST /pets/{petId}/photos -> PostPetsPetIDPhotos.
func derivedName(method, path string) string {
	n := goName(strings.ToLower(method) + " " + path)
	if n == "" {
		n = goName(method)
	}
	return n
}

// validPackage reports whether s can name a Go package.
func validPackage(s string) bool {
	return token.IsIdentifier(s) && !token.IsKeyword(s) && s != "_"
}
