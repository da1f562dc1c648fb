package console

import (
	"maps"
	"slices"
)

// APIRoles is the permission table of the API: route pattern → least role (tests).
func APIRoles() map[string]string {
	out := make(map[string]string, len(apiRoles))
	for k, v := range apiRoles {
		out[k] = string(v)
	}
	return out
}

// APIPatterns are the API's routes as routes registered them (tests).
func (s *Service) APIPatterns() []string { return slices.Clone(s.apiPatterns) }

// PageRoles is the UI's table of pages that are not "GET: viewer, POST: editor" (tests).
func PageRoles() map[string]string {
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(pageRoles)) {
		out[k] = string(pageRoles[k])
	}
	return out
}

// SessionCookie returns the name and value of a session cookie of subject: a person signed
// in as subject (tests; OpenID Connect sign-in makes such sessions).
func (s *Service) SessionCookie(subject string) (name, value string) {
	return sessionCookie, s.ui.newSession(s.now(), subject)
}

// ListedUser is listedUser (tests).
func (s *Service) ListedUser(email string) (name, role string, pii, ok bool) {
	p, ok := s.listedUser(email)
	return p.Name, string(p.Role), p.PII, ok
}
