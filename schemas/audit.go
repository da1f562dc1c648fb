package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// TopicAudit is the audit trail (docs/topics.md#tributaryaudit): one AuditRecord per change made
// through the console (config objects, regulations, replays, key rotations) or by
// tributary-init (a config file applied, the config re-encrypted), and per sign-in, sign-out and
// refusal, keyed by the actor's name. Nothing in it is ever rewritten: its records
// are kept for AUDIT_RETENTION (cleanup.policy=delete).
const TopicAudit = "tributary.audit"

// AuditVersion is the version of AuditRecord this build writes (its "v").
const AuditVersion = 1

// Actor kinds: who made a change.
const (
	ActorConsoleToken  = "console-token"  // the holder of CONSOLE_TOKEN (the API or the UI)
	ActorUser          = "user"           // a person signed in to the UI
	ActorAPIToken      = "api-token"      // an API token of a user or a service
	ActorTributaryInit = "tributary-init" // 'tributary-init apply' (a config file)
	ActorSystem        = "system"         // the console itself
)

// Audit results.
const (
	AuditOK      = "ok"
	AuditRefused = "refused"
)

// AuditRecord is one record of tributary.audit: who did what to which object, when, from
// where, and the object before and after, with every secret replaced by HashSecret's digest
// (docs/console.md#audit-trail). Readers accept records of a later version whose fields they
// know, and ignore fields they do not.
type AuditRecord struct {
	// V is the record's version: AuditVersion.
	V int `json:"v"`
	// ID is a UUID, unique per record.
	ID string `json:"id"`
	// Time is when the change was made (RFC 3339, milliseconds, UTC: FormatTimestamp).
	Time   string      `json:"time"`
	Actor  AuditActor  `json:"actor"`
	Action string      `json:"action"`
	Object AuditObject `json:"object"`
	// Before and After are the object's JSON before and after the change, secrets hashed;
	// absent when the object did not exist (a creation) or no longer does (a deletion), or for
	// an action without an object state (a sign-in).
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	From   AuditFrom       `json:"from"`
	Result AuditResult     `json:"result"`
}

// AuditActor is who made a change.
type AuditActor struct {
	// Name is an email for a person, a token's name for an API token, "console-token" for
	// CONSOLE_TOKEN, "tributary-init" for a config file's apply.
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
	// Kind is one of ActorConsoleToken, ActorUser, ActorAPIToken, ActorTributaryInit,
	// ActorSystem.
	Kind string `json:"kind"`
}

// AuditObject is what a change was made to: a config object's kind ("source", "destination",
// ...) and id, a regulation, a replay, a session (its hash), a request path.
type AuditObject struct {
	Kind string `json:"kind,omitempty"`
	ID   string `json:"id,omitempty"`
}

// AuditFrom is where a change came from: the request's peer address, the X-Forwarded-For header
// as received (not checked: any client may set it), and the User-Agent.
type AuditFrom struct {
	IP           string `json:"ip,omitempty"`
	ForwardedFor string `json:"forwardedFor,omitempty"`
	UserAgent    string `json:"userAgent,omitempty"`
}

// AuditResult is whether the action was done (AuditOK) or refused (AuditRefused, with a
// reason).
type AuditResult struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// AuditMaxBytes bounds an audit record's value: under franz-go's default batch limit
// (1,000,012 bytes) and Kafka's default max.message.bytes, with room for the key and the
// batch's own bytes.
const AuditMaxBytes = 990_000

// Encode returns the record's value. When it is larger than AuditMaxBytes (the before and after
// of an object near the record limit), Before and After are replaced by their sizes and
// digests: {"omitted","bytes","sha256"}.
func (a *AuditRecord) Encode() ([]byte, error) {
	b, err := json.Marshal(a)
	if err != nil || len(b) <= AuditMaxBytes {
		return b, err
	}
	a.Before, a.After = omittedState(a.Before), omittedState(a.After)
	return json.Marshal(a)
}

// omittedState stands in for a state too large for an audit record: its size and digest.
func omittedState(state json.RawMessage) json.RawMessage {
	if len(state) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"omitted": "too large for an audit record", "bytes": len(state), "sha256": HashSecret(string(state))})
	return b
}

// AuditKind is the audit trail's object kind of a config kind: "user" for a console user,
// "token" for an API token, the config kind itself otherwise.
func AuditKind(k ConfigKind) string {
	switch k {
	case ConfigKindConsoleUser:
		return "user"
	case ConfigKindAPIToken:
		return "token"
	}
	return string(k)
}

// AuditConfigAction is the action of a config write of kind: "<kind>.create" (it did not
// exist), "<kind>.update", "<kind>.delete" (a tombstone; an API token's is "token.revoke"),
// with the kind of AuditKind.
func AuditConfigAction(k ConfigKind, existed, deleted bool) string {
	kind := AuditKind(k)
	switch {
	case deleted && k == ConfigKindAPIToken:
		return kind + ".revoke"
	case deleted:
		return kind + ".delete"
	case existed:
		return kind + ".update"
	}
	return kind + ".create"
}

// Validate checks the fields every record has.
func (a *AuditRecord) Validate() error {
	var errs []error
	if a.V < 1 {
		errs = append(errs, fmt.Errorf("v: must be at least 1, got %d", a.V))
	}
	if a.ID == "" {
		errs = append(errs, errors.New("id: required"))
	}
	if _, err := ParseTimestamp(a.Time); err != nil {
		errs = append(errs, fmt.Errorf("time: %w", err))
	}
	if a.Action == "" {
		errs = append(errs, errors.New("action: required"))
	}
	if a.Actor.Kind == "" {
		errs = append(errs, errors.New("actor.kind: required"))
	}
	if a.Result.Status != AuditOK && a.Result.Status != AuditRefused {
		errs = append(errs, fmt.Errorf("result.status: must be %q or %q, got %q", AuditOK, AuditRefused, a.Result.Status))
	}
	return errors.Join(errs...)
}

// DecodeAuditRecord decodes and validates a tributary.audit record value.
func DecodeAuditRecord(b []byte) (AuditRecord, error) {
	var a AuditRecord
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("decoding an audit record: %w", err)
	}
	if err := a.Validate(); err != nil {
		return a, fmt.Errorf("decoding an audit record: %w", err)
	}
	return a, nil
}

// HashSecret is how the audit trail shows a secret: "sha256:" and the first 12 hex digits of
// its SHA-256, enough to see that it changed (or did not) and to match a known value, not to
// recover it. An empty secret stays empty.
func HashSecret(secret string) string {
	if secret == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

// auditSecretFields are the JSON members whose values are secrets wherever they appear in an
// object: the signing secrets, write keys and their hashes, token hashes.
var auditSecretFields = map[string]bool{
	"sharedsecret": true, "previoussharedsecret": true,
	"writekey": true, "writekeyhash": true, "previouswritekeyhash": true,
	"tokenhash": true, "secrethash": true, "token": true, "secret": true, "password": true, "clientsecret": true,
	// A user's ids (a replay's filter): the trail outlives the data a deletion removes.
	"userid": true, "anonymousid": true,
}

// AuditState is an object's JSON for an AuditRecord's Before or After: v as JSON with every
// secret and user id hashed (HashSecret): the members of auditSecretFields, every value of a "headers"
// object (static headers are often credentials: Authorization, X-Api-Key), and a "url" with
// credentials (user info or a query) shown redacted (RedactURL) and hashed. nil v is nil.
func AuditState(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, err
	}
	if tree == nil {
		return nil, nil
	}
	return json.Marshal(hashSecrets(tree))
}

func hashSecrets(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			key := strings.ToLower(k)
			switch s, isString := x.(string); {
			case isString && auditSecretFields[key]:
				t[k] = HashSecret(s)
			case key == "headers":
				if h, ok := x.(map[string]any); ok {
					for name, hv := range h {
						if s, ok := hv.(string); ok {
							h[name] = HashSecret(s)
						}
					}
				}
			case isString && key == "url":
				if r := RedactURL(s); r != s {
					t[k] = r + " " + HashSecret(s)
				}
			default:
				t[k] = hashSecrets(x)
			}
		}
	case []any:
		for i := range t {
			t[i] = hashSecrets(t[i])
		}
	}
	return v
}
