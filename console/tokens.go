package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// API tokens (docs/console.md#users-roles-and-tokens): bearer secrets with a role and a PII
// grant, for a person or a service, issued by an admin. The secret ("trb_" and 32 random bytes,
// base64url) is answered once, when the token is created; tributary.config holds only its
// SHA-256 (an api-token/<id> record). Revoking a token writes its tombstone: every console
// refuses it once its config store has applied it.

// apiTokenPrefix starts every API token's secret, so that it is recognisable (and found by
// secret scanners) wherever it leaks.
const apiTokenPrefix = "trb_"

// maxTokenName bounds a token's name.
const maxTokenName = 200

// bearerPrincipal returns the principal of the request's bearer token: CONSOLE_TOKEN's, or
// the API token's whose secret hashes to the one in the store (compared in constant time);
// false for no token, an unknown one or a revoked one.
func (s *Service) bearerPrincipal(r *http.Request) (Principal, bool) {
	if platform.BearerMatches(r, s.cfg.Token) {
		return tokenPrincipal, true
	}
	secret, ok := platform.BearerToken(r)
	if !ok || !strings.HasPrefix(secret, apiTokenPrefix) {
		return Principal{}, false
	}
	hash := schemas.HashAPITokenSecret(secret)
	t, ok := s.deps.Store.Snapshot().APITokenByHash(hash)
	if !ok || subtle.ConstantTimeCompare([]byte(t.SecretHash), []byte(hash)) != 1 {
		return Principal{}, false
	}
	return Principal{Name: t.Name, Role: Role(t.Role), PII: t.PII}, true
}

// tokenView is a token as the API answers it: never its secret's hash.
type tokenView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	PII       bool   `json:"pii"`
	Created   string `json:"created,omitempty"`
	CreatedBy string `json:"createdBy,omitempty"`
	// Secret is set once, in the answer to the token's creation.
	Secret string `json:"secret,omitempty"`
}

func tokenViewOf(t *schemas.APIToken) tokenView {
	return tokenView{ID: t.ID, Name: t.Name, Role: t.Role, PII: t.PII, Created: t.Created, CreatedBy: t.CreatedBy}
}

// listTokens answers GET /v1/tokens: every token, without secrets, ordered by id.
func (s *Service) listTokens(w http.ResponseWriter, _ *http.Request) error {
	out := []tokenView{}
	for _, t := range s.deps.Store.Snapshot().APITokens() {
		out = append(out, tokenViewOf(t))
	}
	writeData(w, http.StatusOK, out)
	return nil
}

// tokenRequest is the body of POST /v1/tokens.
type tokenRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
	PII  bool   `json:"pii"`
}

// createToken answers POST /v1/tokens: 201 with the token and its secret, shown only here.
func (s *Service) createToken(w http.ResponseWriter, r *http.Request) error {
	var req tokenRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		return err
	}
	v, err := s.issueToken(r.Context(), req)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, v)
	return nil
}

// issueToken creates the API token req asks for, issued by ctx's principal, and returns it with
// its secret (the only time the secret is seen): the tokens API's POST and the Team page
// (ui_team.go). A principal without the PII grant cannot give it.
func (s *Service) issueToken(ctx context.Context, req tokenRequest) (tokenView, error) {
	req.Name = strings.TrimSpace(req.Name)
	switch {
	case req.Name == "":
		return tokenView{}, errInvalid("name", "name: required (who or what uses the token, e.g. \"ci-deploy\")")
	case len(req.Name) > maxTokenName || !utf8.ValidString(req.Name) || strings.ContainsFunc(req.Name, isControl):
		return tokenView{}, errInvalid("name", "name: at most %d bytes of text without control characters", maxTokenName)
	case req.Role == "":
		return tokenView{}, errInvalid("role", "role: required: admin, editor or viewer")
	case !schemas.ValidConsoleRole(req.Role):
		return tokenView{}, errInvalid("role", "role: %q is not a role: admin, editor or viewer", req.Role)
	}
	p, _ := principalOf(ctx)
	if req.PII && !p.PII {
		return tokenView{}, &apiError{Status: http.StatusForbidden, Code: codeForbidden, Field: "pii",
			Message: "pii: only a principal with the PII grant may give it, and " + p.Name + " has none"}
	}
	secret, id := make([]byte, 32), make([]byte, 8)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24)
	_, _ = rand.Read(id)
	t := &schemas.APIToken{ID: hex.EncodeToString(id), Name: req.Name, Role: req.Role, PII: req.PII,
		Created: schemas.FormatTimestamp(s.now()), CreatedBy: p.Name, Origin: schemas.OriginConsole}
	plain := apiTokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	t.SecretHash = schemas.HashAPITokenSecret(plain)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.writeObjects(ctx, schemas.ConfigObject{Kind: schemas.ConfigKindAPIToken, ID: t.ID, APIToken: t}); err != nil {
		return tokenView{}, err
	}
	v := tokenViewOf(t)
	v.Secret = plain
	return v, nil
}

// revokeToken answers DELETE /v1/tokens/{id}: 204 once this console refuses the token.
func (s *Service) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.revokeAPIToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// revokeAPIToken writes the tombstone of the token id, and returns once this console refuses
// it: the tokens API's DELETE and the Team page.
func (s *Service) revokeAPIToken(ctx context.Context, id string) error {
	return s.configTx(ctx, func(snap *platform.Snapshot) error {
		if _, ok := snap.APITokenByID(id); !ok {
			return errNotFound("no API token %q", id)
		}
		_, err := s.writeObjects(ctx, schemas.ConfigObject{Kind: schemas.ConfigKindAPIToken, ID: id})
		return err
	})
}

func isControl(c rune) bool { return c < 0x20 || c == 0x7f }
