package console

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The console's user list (docs/console.md#users-roles-and-tokens): the people who may sign
// in, each with a role and a PII grant. It is the config file's `console.users`, one
// console-user/<email> record of tributary.config per person, so `tributary-init apply`,
// CONFIG_FILE, PUT /v1/config and the users API below all write it, and every console reads it
// from its config store. Emails compare case-insensitively.

// listedUser returns the principal of email from the console's user list, and false when it is
// not listed.
func (s *Service) listedUser(email string) (Principal, bool) {
	u, ok := s.deps.Store.Snapshot().ConsoleUserByEmail(email)
	if !ok {
		return Principal{}, false
	}
	return Principal{Name: u.Email, Role: Role(u.Role), PII: u.PII}, true
}

// userView is a user as the API answers it.
type userView struct {
	Email string `json:"email"`
	Role  string `json:"role"`
	PII   bool   `json:"pii"`
	// Origin says who manages the user: "console", or "file:<name>" for a config file's.
	Origin  string `json:"origin,omitempty"`
	Version int64  `json:"version"`
}

func userViewOf(snap *platform.Snapshot, u *schemas.ConsoleUser) userView {
	return userView{Email: u.Email, Role: u.Role, PII: u.PII, Origin: u.Origin, Version: snap.Revision(schemas.ConfigKindConsoleUser, u.Email)}
}

// userEmail is the request's {email}, in lower case; 400 when it is no email address.
func userEmail(r *http.Request) (string, error) { return normalUserEmail(r.PathValue("email")) }

// normalUserEmail is email in lower case; 400 when it is no email address.
func normalUserEmail(email string) (string, error) {
	e, err := schemas.NormalizeEmail(email)
	if err != nil {
		return "", errInvalid("email", "email: %s", err.Error())
	}
	return e, nil
}

// listUsers answers GET /v1/users: every listed user, ordered by email.
func (s *Service) listUsers(w http.ResponseWriter, _ *http.Request) error {
	snap := s.deps.Store.Snapshot()
	out := []userView{}
	for _, u := range snap.ConsoleUsers() {
		out = append(out, userViewOf(snap, u))
	}
	writeData(w, http.StatusOK, out)
	return nil
}

// getUser answers GET /v1/users/{email}.
func (s *Service) getUser(w http.ResponseWriter, r *http.Request) error {
	email, err := userEmail(r)
	if err != nil {
		return err
	}
	snap := s.deps.Store.Snapshot()
	u, ok := snap.ConsoleUserByEmail(email)
	if !ok {
		return errNotFound("no user %q", email)
	}
	etag(w, snap.Revision(schemas.ConfigKindConsoleUser, email))
	writeData(w, http.StatusOK, userViewOf(snap, u))
	return nil
}

// userRequest is the body of PUT /v1/users/{email}.
type userRequest struct {
	// Email, when given, must be the path's (in any case).
	Email string `json:"email"`
	Role  string `json:"role"`
	PII   bool   `json:"pii"`
	// Version and Origin are read-only: accepted (a GET's answer sent back) and ignored.
	Version int64  `json:"version"`
	Origin  string `json:"origin"`
}

// putUser answers PUT /v1/users/{email}: it adds the user (201) or replaces its role and PII
// grant (200). A user a config file lists changes only with ?takeOver=true; If-Match checks
// the version.
func (s *Service) putUser(w http.ResponseWriter, r *http.Request) error {
	email, err := userEmail(r)
	if err != nil {
		return err
	}
	var req userRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		return err
	}
	if req.Email != "" && !strings.EqualFold(req.Email, email) {
		return errInvalid("email", "email: %q is not the email of the path (%q)", req.Email, email)
	}
	snap, u, created, err := s.setUser(r.Context(), email, req.Role, req.PII, optionsOf(r))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	etag(w, snap.Revision(schemas.ConfigKindConsoleUser, email))
	writeData(w, status, userViewOf(snap, u))
	return nil
}

// setUser adds the user email (in lower case) with role and the PII grant, or replaces the
// role and grant of a listed one (created false): the users API's PUT and the Team page
// (ui_team.go). It returns the snapshot that holds the change.
func (s *Service) setUser(ctx context.Context, email, role string, pii bool, opts writeOptions) (*platform.Snapshot, *schemas.ConsoleUser, bool, error) {
	next := &schemas.ConsoleUser{Email: email, Role: role, PII: pii, Origin: schemas.OriginConsole}
	if err := next.Validate(); err != nil {
		var ce schemas.ConfigErrors
		if errors.As(err, &ce) && len(ce) > 0 {
			return nil, nil, false, errInvalid(ce[0].Path, "%s", ce[0].Error())
		}
		return nil, nil, false, errInvalid("", "%s", err.Error())
	}
	var (
		written *platform.Snapshot
		created bool
	)
	// Checked and written in one config transaction: another console's write of the user
	// lands before the check or fails it (docs/console.md#more-than-one-console).
	err := s.configTx(ctx, func(snap *platform.Snapshot) error {
		cur, exists := lookup(snap, schemas.ConfigKindConsoleUser, email)
		if err := ifMatch(opts.IfMatch, "user", email, snap.Revision(schemas.ConfigKindConsoleUser, email)); err != nil {
			return err
		}
		if exists {
			if err := manageable(opts.TakeOver, cur); err != nil {
				return err
			}
		}
		var err error
		written, err = s.writeObjects(ctx, schemas.ConfigObject{Kind: schemas.ConfigKindConsoleUser, ID: email, ConsoleUser: next})
		created = !exists
		return err
	})
	if err != nil {
		return nil, nil, false, err
	}
	return written, next, created, nil
}

// deleteUser answers DELETE /v1/users/{email}: the user may no longer sign in (sessions end
// on their next request: a session's role is looked up on every request).
func (s *Service) deleteUser(w http.ResponseWriter, r *http.Request) error {
	email, err := userEmail(r)
	if err != nil {
		return err
	}
	if err := s.removeUser(r.Context(), email, optionsOf(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeUser takes the user email (in lower case) off the list: the users API's DELETE and
// the Team page.
func (s *Service) removeUser(ctx context.Context, email string, opts writeOptions) error {
	return s.removeObject(ctx, schemas.ConfigKindConsoleUser, email, opts)
}
