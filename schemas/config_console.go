package schemas

import (
	"fmt"
	"net/mail"
	"strings"
)

// The console's own config (docs/console.md#users-roles-and-tokens): the people who may sign
// in and their roles (the config file's `console.users`), and the API tokens the console
// issues. Each person is one record of TopicConfig, key "console-user/<email, lower-case>";
// each token one record, key "api-token/<id>", holding only the SHA-256 of its secret.

// ConsoleConfig is the config file's top-level `console` block.
type ConsoleConfig struct {
	// Users are the people who may sign in to the console, with their role and PII grant.
	Users []ConsoleUser `json:"users,omitempty" yaml:"users"`
}

// ConsoleUser is one person of the console's user list.
type ConsoleUser struct {
	// Email is compared case-insensitively; records hold it in lower case.
	Email string `json:"email" yaml:"email"`
	// Role is admin, editor or viewer (docs/console.md#users-roles-and-tokens).
	Role string `json:"role" yaml:"role"`
	// PII grants message bodies, user ids and traits (default false: masked).
	PII bool `json:"pii,omitempty" yaml:"pii"`
	// Origin: see Source.Origin.
	Origin string `json:"origin,omitempty" yaml:"-"`
}

// APIToken is an API token of the console: a bearer secret with a role, for a person or a
// service. Only the SHA-256 of the secret is stored (SecretHash); the secret is shown once,
// when the token is created.
type APIToken struct {
	// ID is unique among tokens: lower-case letters, digits, '-' and '_'.
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role"`
	PII  bool   `json:"pii,omitempty"`
	// SecretHash is "sha256:<lower-case hex>" of the secret (HashAPITokenSecret).
	SecretHash string `json:"secretHash"`
	// Created is when the token was created (ISO-8601, UTC); CreatedBy who created it.
	Created   string `json:"created,omitempty"`
	CreatedBy string `json:"createdBy,omitempty"`
	// Origin: see Source.Origin (always the console's).
	Origin string `json:"origin,omitempty"`
}

// The kinds of the console's own objects.
const (
	// ConfigKindConsoleUser is a person of the console's user list: key
	// "console-user/<email, lower-case>".
	ConfigKindConsoleUser ConfigKind = "console-user"
	// ConfigKindAPIToken is an API token: key "api-token/<id>".
	ConfigKindAPIToken ConfigKind = "api-token"
)

// The roles of the console, from most to least.
const (
	ConsoleRoleAdmin  = "admin"
	ConsoleRoleEditor = "editor"
	ConsoleRoleViewer = "viewer"
)

// ValidConsoleRole reports whether role is admin, editor or viewer.
func ValidConsoleRole(role string) bool {
	return role == ConsoleRoleAdmin || role == ConsoleRoleEditor || role == ConsoleRoleViewer
}

// NormalizeEmail returns email in lower case, and an error when it is not a plain address
// ("name@example.com": no display name, no angle brackets).
func NormalizeEmail(email string) (string, error) {
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" || !strings.Contains(email, "@") {
		return "", fmt.Errorf("%q is not an email address (name@example.com)", email)
	}
	return strings.ToLower(email), nil
}

// HashAPITokenSecret returns "sha256:<lower-case hex>" of an API token's secret: what the
// token's record holds, and what a request's bearer token is looked up by.
func HashAPITokenSecret(secret string) string { return HashWriteKey(secret) }

func (u *ConsoleUser) check(v *validator, p string) {
	ep := fieldPath(p, "email")
	if u.Email == "" {
		v.addf(ep, "is required")
	} else if _, err := NormalizeEmail(u.Email); err != nil {
		v.addf(ep, "%s", err.Error())
	}
	if rp := fieldPath(p, "role"); u.Role == "" {
		v.addf(rp, "is required: admin, editor or viewer")
	} else if !ValidConsoleRole(u.Role) {
		v.addf(rp, "%q is not a role: admin, editor or viewer", u.Role)
	}
}

func (u *ConsoleUser) objectID() string { return strings.ToLower(u.Email) }

// Validate checks the user's own rules; error paths are relative to the user.
func (u *ConsoleUser) Validate() error {
	v := &validator{}
	u.check(v, "")
	return v.errs.errOrNil()
}

// Record returns the user's TopicConfig record after Validate, its email in lower case.
func (u *ConsoleUser) Record() (ConfigRecord, error) {
	if err := u.Validate(); err != nil {
		return ConfigRecord{}, fmt.Errorf("console user %q: %w", u.Email, err)
	}
	c := *u
	c.Email = strings.ToLower(u.Email)
	return marshalRecord(string(ConfigKindConsoleUser)+"/"+c.Email, &c)
}

func (t *APIToken) check(v *validator, p string) {
	v.id(fieldPath(p, "id"), t.ID)
	if t.Name == "" {
		v.addf(fieldPath(p, "name"), "is required")
	}
	if !ValidConsoleRole(t.Role) {
		v.addf(fieldPath(p, "role"), "%q is not a role: admin, editor or viewer", t.Role)
	}
	if !strings.HasPrefix(t.SecretHash, "sha256:") || len(t.SecretHash) != len("sha256:")+64 {
		v.addf(fieldPath(p, "secretHash"), "must be sha256:<64 hex digits>")
	}
}

func (t *APIToken) objectID() string { return t.ID }

// Record returns the token's TopicConfig record after its checks.
func (t *APIToken) Record() (ConfigRecord, error) {
	v := &validator{}
	t.check(v, "")
	if err := v.errs.errOrNil(); err != nil {
		return ConfigRecord{}, fmt.Errorf("api token %q: %w", t.ID, err)
	}
	return marshalRecord(string(ConfigKindAPIToken)+"/"+t.ID, t)
}

// validateConsole checks the console block: each user's rules and emails unique
// case-insensitively.
func (c *Config) validateConsole(v *validator) {
	if c.Console == nil {
		return
	}
	seen := map[string]string{}
	for i := range c.Console.Users {
		u := &c.Console.Users[i]
		p := indexPath("console.users", i)
		u.check(v, p)
		if u.Email == "" {
			continue
		}
		e := strings.ToLower(u.Email)
		if first, dup := seen[e]; dup {
			v.addf(fieldPath(p, "email"), "%q is listed twice (first at %s)", u.Email, first)
			continue
		}
		seen[e] = p
	}
}
