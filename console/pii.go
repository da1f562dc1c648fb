package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// PII access (docs/console.md#pii-access). A principal without the PII grant (Principal.PII)
// sees message content masked in every API answer and page that carries it: the delivery log,
// the messages view, the source debugger, the message and attempt pages, replays by user,
// profiles. A search or a replay by user id is refused (403 forbidden). Masking keeps
// the shape useful for debugging:
//
//   - a message's JSON keeps its keys and its metadata (type, event, messageId and the
//     timestamps); every other leaf value becomes "[masked]", null stays null;
//   - an id (userId, anonymousId, previousId, groupId, and a profile's external ids) becomes a
//     stable short hash, "user:3f9a0c1d2e4b": HMAC-SHA256 of the id under a key derived from
//     the console token, so equal ids stay equal (two messages of one user show one hash) and
//     the id cannot be read back, nor guessed without the token;
//   - text that is not JSON (an endpoint's answer body, a rejected message) becomes "[masked]".
//
// What is not personal stays: message ids, event names, types, timestamps, destinations,
// statuses, latencies, error classes and errors, URLs (already redacted).

// masked is what a masked value shows.
const masked = "[masked]"

// The kinds of id a mask hashes: the prefix of its hash.
const (
	idUser     = "user"
	idAnon     = "anon"
	idGroup    = "group"
	idExternal = "ext"
)

// piiHashLen is how many hex digits of the HMAC a masked id keeps: 48 bits, so that among n
// ids two different ones show alike with a chance of about n²/2^49.
const piiHashLen = 12

// piiMask masks message content for a principal without the PII grant. A nil mask masks
// nothing (the principal holds the grant): every method returns its input then.
type piiMask struct {
	key []byte // of the ids' HMAC
}

// maskOf is the mask of r: nil when r's principal holds the PII grant; a request without a
// principal is masked (fail closed).
func (s *Service) maskOf(r *http.Request) *piiMask {
	p, ok := requestPrincipal(r)
	return s.maskOfPrincipal(p, ok)
}

// maskFor is the mask of the principal of ctx (a request's).
func (s *Service) maskFor(ctx context.Context) *piiMask {
	p, ok := principalOf(ctx)
	return s.maskOfPrincipal(p, ok)
}

// maskOfPrincipal is the mask of p (ok: there is one).
func (s *Service) maskOfPrincipal(p Principal, ok bool) *piiMask {
	if pin := s.pinnedPrincipal.Load(); pin != nil {
		p, ok = *pin, true
	}
	if ok && p.PII {
		return nil
	}
	return &piiMask{key: s.piiKey()}
}

// piiKey is the key of the masked ids' HMAC, derived from the console token: every replica of
// an installation hashes an id alike, and changing the token changes every hash.
func (s *Service) piiKey() []byte {
	mac := hmac.New(sha256.New, []byte(s.cfg.Token))
	mac.Write([]byte("tributary-console-pii-v1"))
	return mac.Sum(nil)
}

// errNeedsPII refuses an action by a personal field (a search or a replay by userId) to a
// principal without the PII grant: 403 with the code forbidden.
func errNeedsPII(field, action string) *apiError {
	return &apiError{Status: http.StatusForbidden, Code: "forbidden", Field: field,
		Message: action + " needs PII access (docs/console.md#pii-access)"}
}

// masks reports whether m masks anything.
func (m *piiMask) masks() bool { return m != nil }

// id masks an id of kind (idUser...): its stable short hash; "" stays "".
func (m *piiMask) id(kind, v string) string {
	if m == nil || v == "" {
		return v
	}
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(v))
	return kind + ":" + hex.EncodeToString(mac.Sum(nil))[:piiHashLen]
}

// text masks a value shown as text; "" stays "".
func (m *piiMask) text(v string) string {
	if m == nil || v == "" {
		return v
	}
	return masked
}

// body masks a body that may be JSON (an endpoint's answer): JSON as json does, other text
// as text does.
func (m *piiMask) body(v string) string {
	if m == nil || v == "" {
		return v
	}
	if json.Valid([]byte(v)) {
		return string(m.json([]byte(v)))
	}
	return masked
}

// json masks a message's JSON (an event, the body sent): its keys stay, ids are hashed, the
// metadata of a message (its top level, or each message of a batch) stays, and every other
// leaf becomes "[masked]". What is not JSON becomes the JSON string "[masked]".
func (m *piiMask) json(raw []byte) []byte {
	if m == nil || len(raw) == 0 {
		return raw
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil || d.More() {
		return []byte(`"` + masked + `"`)
	}
	out, err := json.Marshal(m.jsonMessage(v))
	if err != nil {
		return []byte(`"` + masked + `"`)
	}
	return out
}

// messageMeta are the fields of a message that are not personal: they stay.
var messageMeta = []string{"type", "event", "messageId", "timestamp", "sentAt", "receivedAt", "originalTimestamp", "channel"}

// idFields are the fields that hold an id, by the kind of its hash.
var idFields = map[string]string{"userId": idUser, "anonymousId": idAnon, "previousId": idUser, "groupId": idGroup}

// jsonMessage masks a decoded message: its metadata stays; a batch's messages are messages too.
func (m *piiMask) jsonMessage(v any) any {
	o, ok := v.(map[string]any)
	if !ok {
		return m.leaves(v)
	}
	out := make(map[string]any, len(o))
	for k, x := range o {
		switch s, isString := x.(string); {
		case isString && slices.Contains(messageMeta, k):
			out[k] = s
		case k == "batch":
			if list, ok := x.([]any); ok {
				msgs := make([]any, len(list))
				for i := range list {
					msgs[i] = m.jsonMessage(list[i])
				}
				out[k] = msgs
				continue
			}
			out[k] = m.leaves(x)
		default:
			out[k] = m.field(k, x)
		}
	}
	return out
}

// field masks the value x of key k.
func (m *piiMask) field(k string, x any) any {
	if s, ok := x.(string); ok {
		if kind, isID := idFields[k]; isID {
			return m.id(kind, s)
		}
	}
	return m.leaves(x)
}

// leaves masks every leaf of x: objects keep their keys, arrays their length, null stays null.
func (m *piiMask) leaves(x any) any {
	switch t := x.(type) {
	case nil:
		return nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[k] = m.field(k, v)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = m.leaves(t[i])
		}
		return out
	default:
		return masked
	}
}

// search refuses a messages search by user id or anonymous id to a masked principal: what it
// could find shows no id (docs/console.md#pii-access).
func (m *piiMask) search(q views.MessageQuery) error {
	switch {
	case m == nil:
		return nil
	case q.UserID != "":
		return errNeedsPII("userId", "searching by user id")
	case q.AnonymousID != "":
		return errNeedsPII("anonymousId", "searching by anonymous id")
	}
	return nil
}

// messages masks messages (copies: the view's are not changed).
func (m *piiMask) messages(in []message) []message {
	if m == nil {
		return in
	}
	out := make([]message, len(in))
	for i := range in {
		out[i] = m.message(in[i])
	}
	return out
}

// message masks one message: its ids, and its attempts' answer bodies.
func (m *piiMask) message(msg message) message {
	if m == nil {
		return msg
	}
	msg.UserID, msg.AnonymousID = m.id(idUser, msg.UserID), m.id(idAnon, msg.AnonymousID)
	as := make([]views.MessageAttempt, len(msg.Attempts))
	for i, a := range msg.Attempts {
		a.ResponseBody = m.body(a.ResponseBody)
		as[i] = a
	}
	msg.Attempts = as
	return msg
}

// attempts masks delivery attempts (copies): the ids of their messages.
func (m *piiMask) attempts(in []attempt) []attempt {
	if m == nil {
		return in
	}
	out := make([]attempt, len(in))
	for i, a := range in {
		a.UserID, a.AnonymousID = m.id(idUser, a.UserID), m.id(idAnon, a.AnonymousID)
		a.ResponseBody = m.body(a.ResponseBody)
		out[i] = a
	}
	return out
}

// events masks a source's events (copies).
func (m *piiMask) events(in []views.EventView) []views.EventView {
	if m == nil {
		return in
	}
	out := make([]views.EventView, len(in))
	for i := range in {
		out[i] = m.event(in[i])
	}
	return out
}

// event masks one event of a source: its message (a rejection's reason names what is wrong,
// never a value).
func (m *piiMask) event(e views.EventView) views.EventView {
	if m == nil {
		return e
	}
	e.Message = m.json(e.Message)
	return e
}

// profile masks a profile (a copy): its ids hashed, its traits' and computed traits' values
// masked (their keys stay), its external ids hashed (their types stay); its audiences, first
// and last seen stay.
func (m *piiMask) profile(p *schemas.ProfileView) *schemas.ProfileView {
	if m == nil || p == nil {
		return p
	}
	c := *p
	c.UserID, c.AnonymousID = m.id(idUser, p.UserID), m.id(idAnon, p.AnonymousID)
	c.MergedIDs = make([]string, len(p.MergedIDs))
	for i, id := range p.MergedIDs {
		c.MergedIDs[i] = m.id(idAnon, id)
	}
	if len(p.Traits) > 0 {
		var traits any
		if json.Unmarshal(p.Traits, &traits) == nil {
			c.Traits, _ = json.Marshal(m.leaves(traits))
		} else {
			c.Traits = json.RawMessage(`"` + masked + `"`)
		}
	}
	c.ComputedTraits = make(map[string]json.RawMessage, len(p.ComputedTraits))
	for k, v := range p.ComputedTraits {
		if string(v) != "null" {
			v = json.RawMessage(`"` + masked + `"`)
		}
		c.ComputedTraits[k] = v
	}
	c.ExternalIDs = make([]schemas.ExternalIDView, len(p.ExternalIDs))
	for i, x := range p.ExternalIDs {
		x.ID = m.id(idExternal, x.ID)
		c.ExternalIDs[i] = x
	}
	c.Identity = make([]schemas.IdentityEventView, len(p.Identity))
	for i, e := range p.Identity {
		e.ID, e.Other, e.Detail = m.id(idExternal, e.ID), m.id(idUser, e.Other), m.text(e.Detail)
		c.Identity[i] = e
	}
	return &c
}

// replayRequest refuses a replay by user id to a masked principal: its count would answer a
// search by user id.
func (m *piiMask) replayRequest(f replayFilter) error {
	if m != nil && f.UserID != "" {
		return errNeedsPII("filter.userId", "replaying by user id")
	}
	return nil
}

// replays masks replays (copies): the user id of their filters.
func (m *piiMask) replays(in []replayView) []replayView {
	if m == nil {
		return in
	}
	out := make([]replayView, len(in))
	for i, v := range in {
		v.Filter.UserID = m.id(idUser, v.Filter.UserID)
		out[i] = v
	}
	return out
}

// replay masks one replay.
func (m *piiMask) replay(v replayView) replayView { return m.replays([]replayView{v})[0] }
