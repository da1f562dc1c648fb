package console

import (
	"context"
	"net/http"
)

// Who makes a request (docs/console.md#authentication). Every API request and every page is
// made by a principal: the holder of CONSOLE_TOKEN, a person signed in to the UI, or an API
// token. Its role says what it may change, and its PII grant whether it sees message bodies,
// user ids and traits.

// Role is what a principal may do.
type Role string

// The roles, from most to least.
const (
	RoleAdmin  Role = "admin"  // everything
	RoleEditor Role = "editor" // sources, destinations, audiences, computed traits, tracking plans, replays
	RoleViewer Role = "viewer" // read only
)

// Principal is who makes a request.
type Principal struct {
	// Name is what the audit trail and the UI show: an email for a person, a token's name for
	// an API token, "console-token" for CONSOLE_TOKEN.
	Name string
	Role Role
	// PII grants message bodies, user ids and traits; without it they are masked.
	PII bool
}

// tokenPrincipal is the holder of CONSOLE_TOKEN: the installation's own key, an admin with PII
// access (kept for automation and 'make run').
var tokenPrincipal = Principal{Name: "console-token", Role: RoleAdmin, PII: true}

type principalKey struct{}

// withPrincipal returns ctx carrying p.
func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf returns the principal of ctx, and false when there is none (a request that got
// past no authentication: it may do nothing).
func principalOf(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// requestPrincipal is principalOf(r.Context()).
func requestPrincipal(r *http.Request) (Principal, bool) { return principalOf(r.Context()) }

// resolvePerson returns the principal of a person who signed in (with OpenID Connect) as email,
// a member of groups: the console's user list first (users.go), then the role its groups map to
// (oidc.go); false when neither admits them.
func (s *Service) resolvePerson(email string, groups []string) (Principal, bool) {
	if p, ok := s.listedUser(email); ok {
		return p, true
	}
	return s.groupPrincipal(email, groups)
}
