package platform

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// BearerToken returns the token of r's "Authorization: Bearer <token>" header, and whether it
// has one. The scheme is matched in any case ("bearer", "BEARER"), as RFC 7235 says of
// authentication schemes; spaces around the token are dropped.
func BearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// BearerMatches reports whether r carries the bearer token want, compared in constant time (a
// wrong token takes as long as a right one, whatever its common prefix). An empty want matches
// nothing.
func BearerMatches(r *http.Request, want string) bool {
	got, ok := BearerToken(r)
	return ok && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
