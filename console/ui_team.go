package console

import (
	"net/http"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// The Team page (docs/console.md#users-roles-and-tokens), an admin's: who is signed in; the
// console's users, where each comes from, a form to add or change one and a button to remove
// one; the people single sign-on admits by their groups (CONSOLE_OIDC_ROLES); the API tokens,
// a form to create one — its secret shown once, in the answer to that form — and a button to
// revoke each. Every write goes through the function the users and tokens API use (users.go,
// tokens.go), so it is checked and recorded on the audit trail as theirs are.

func (u *ui) teamPages(pg func(string, http.HandlerFunc)) {
	pg("GET /team", u.team)
	pg("POST /team/users", u.saveTeamUser)
	pg("POST /team/users/{email}/delete", u.removeTeamUser)
	pg("POST /team/tokens", u.createTeamToken)
	pg("POST /team/tokens/{id}/revoke", u.revokeTeamToken)
}

// teamData is the Team page's data.
type teamData struct {
	You    teamYou
	Users  []teamUser
	Tokens []tokenView
	Roles  []string
	SSO    *teamSSO // nil: single sign-on is off
	// UserForm and TokenForm are the forms' values; UserErrors and TokenErrors their errors by
	// field.
	UserForm    teamUserForm
	TokenForm   tokenRequest
	UserErrors  map[string]string
	TokenErrors map[string]string
}

// teamYou is the signed-in principal, and what admits it.
type teamYou struct {
	Principal
	Via string
}

// teamUser is a user of the list as the page shows it.
type teamUser struct {
	userView
	File string // the config file that lists it; "": the console's
}

// teamUserForm is the add-or-change form of a user: Listed when it changes a listed user,
// File when a config file lists that user (saving takes it over).
type teamUserForm struct {
	Email, Role string
	PII         bool
	Listed      bool
	File        string
}

// teamSSO is single sign-on's role mapping: who signs in without being listed.
type teamSSO struct {
	Provider  string
	Roles     []teamGroups
	PIIGroups string
}

// teamGroups are the identity-provider groups mapped to a role.
type teamGroups struct {
	Role   Role
	Groups string
}

// teamToken is a new token's page: the token with its secret, and the console's address as
// the browser reached it (for the example command).
type teamToken struct {
	tokenView
	ConsoleURL string
}

// teamData returns the page's data for the request's principal.
func (u *ui) teamData(r *http.Request) teamData {
	snap := u.s.deps.Store.Snapshot()
	d := teamData{Roles: []string{string(RoleViewer), string(RoleEditor), string(RoleAdmin)},
		UserForm: teamUserForm{Role: string(RoleViewer)}, TokenForm: tokenRequest{Role: string(RoleViewer)}}
	if p, ok := requestPrincipal(r); ok {
		d.You = teamYou{Principal: p, Via: u.admittedBy(p)}
	}
	for _, cu := range snap.ConsoleUsers() {
		tu := teamUser{userView: userViewOf(snap, cu)}
		if file, ok := strings.CutPrefix(cu.Origin, schemas.OriginFilePrefix); ok {
			tu.File = file
		}
		d.Users = append(d.Users, tu)
	}
	for _, t := range snap.APITokens() {
		d.Tokens = append(d.Tokens, tokenViewOf(t))
	}
	if o := u.oidc; o != nil {
		sso := &teamSSO{Provider: o.cfg.providerName(), PIIGroups: strings.Join(o.cfg.PIIGroups, ", ")}
		for _, role := range oidcRoleOrder {
			if gs := o.roles[role]; len(gs) > 0 {
				sso.Roles = append(sso.Roles, teamGroups{Role: role, Groups: strings.Join(gs, ", ")})
			}
		}
		d.SSO = sso
	}
	return d
}

// admittedBy says what admits p to the console: the console token, the user list, or single
// sign-on's group mapping.
func (u *ui) admittedBy(p Principal) string {
	switch {
	case p == tokenPrincipal:
		return "the console token (CONSOLE_TOKEN)"
	case u.s.isListed(p.Name):
		return "the user list below"
	default:
		return "your groups at the identity provider (CONSOLE_OIDC_ROLES)"
	}
}

// isListed reports whether email is on the console's user list.
func (s *Service) isListed(email string) bool {
	_, ok := s.listedUser(email)
	return ok
}

// userForm fills the user form with the listed user ?user= names (its "Change" link).
func (d *teamData) userForm(email string) {
	for _, tu := range d.Users {
		if strings.EqualFold(tu.Email, email) {
			d.UserForm = teamUserForm{Email: tu.Email, Role: tu.Role, PII: tu.PII, Listed: true, File: tu.File}
		}
	}
}

func (u *ui) team(w http.ResponseWriter, r *http.Request) {
	d := u.teamData(r)
	if e := r.URL.Query().Get("user"); e != "" {
		d.userForm(e)
	}
	u.render(w, r, http.StatusOK, "team", page{Title: "Team", Nav: "team", Data: d})
}

// saveTeamUser adds or changes a user: PUT /v1/users/{email}'s write (setUser).
func (u *ui) saveTeamUser(w http.ResponseWriter, r *http.Request) {
	form := teamUserForm{Email: strings.TrimSpace(r.PostFormValue("email")), Role: r.PostFormValue("role"), PII: r.PostFormValue("pii") == "true"}
	takeOver := r.PostFormValue("takeOver") == "true"
	email, err := normalUserEmail(form.Email)
	created := false
	if err == nil {
		_, _, created, err = u.s.setUser(r.Context(), email, form.Role, form.PII, writeOptions{TakeOver: takeOver})
	}
	if err != nil {
		d := u.teamData(r)
		d.userForm(email)
		d.UserForm.Email, d.UserForm.Role, d.UserForm.PII = form.Email, form.Role, form.PII
		var general string
		d.UserErrors, general = fieldErrors(err)
		u.render(w, r, statusOf(err), "team", page{Title: "Team", Nav: "team", Error: general, Data: d})
		return
	}
	done := "User " + email + " changed."
	if created {
		done = "User " + email + " added."
	}
	u.redirect(w, r, "/team", done)
}

// removeTeamUser takes a user off the list: DELETE /v1/users/{email}'s write (removeUser).
func (u *ui) removeTeamUser(w http.ResponseWriter, r *http.Request) {
	email, err := normalUserEmail(r.PathValue("email"))
	if err == nil {
		err = u.s.removeUser(r.Context(), email, writeOptions{})
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.redirect(w, r, "/team", "User "+email+" removed: their sessions end at their next request.")
}

// createTeamToken creates an API token (issueToken) and answers its secret: the only page
// that shows it. It is the form's answer, not a redirect's, so that no URL, log or history
// entry carries the secret and a later visit cannot show it again.
func (u *ui) createTeamToken(w http.ResponseWriter, r *http.Request) {
	req := tokenRequest{Name: r.PostFormValue("name"), Role: r.PostFormValue("role"), PII: r.PostFormValue("pii") == "true"}
	v, err := u.s.issueToken(r.Context(), req)
	if err != nil {
		d := u.teamData(r)
		d.TokenForm = req
		var general string
		d.TokenErrors, general = fieldErrors(err)
		if msg, ok := d.TokenErrors["pii"]; ok { // the form has no PII box for this principal
			general = strings.TrimSpace(general + " " + msg)
		}
		u.render(w, r, statusOf(err), "team", page{Title: "Team", Nav: "team", Error: general, Data: d})
		return
	}
	scheme := "http"
	if secure(r) {
		scheme = "https"
	}
	u.render(w, r, http.StatusOK, "team_token", page{Title: "API token " + v.Name, Nav: "team",
		Flash: "API token " + v.Name + " created.", Data: teamToken{tokenView: v, ConsoleURL: scheme + "://" + r.Host}})
}

// revokeTeamToken revokes an API token: DELETE /v1/tokens/{id}'s write (revokeAPIToken).
func (u *ui) revokeTeamToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	name := id
	if t, ok := u.s.deps.Store.Snapshot().APITokenByID(id); ok {
		name = t.Name + " (" + id + ")"
	}
	if err := u.s.revokeAPIToken(r.Context(), id); err != nil {
		u.fail(w, r, err)
		return
	}
	u.redirect(w, r, "/team", "API token "+name+" revoked: it is refused from now on.")
}
