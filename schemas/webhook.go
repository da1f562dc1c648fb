package schemas

import (
	"encoding/json"
	"errors"
	"time"
)

// The delivered webhook body (docs/receivers.md#the-body): the message's canonical JSON with
// "version": 1 first (not on delete), and on alias the keys "Previous ID" and "User ID" beside
// previousId and userId, as the destination's documented payload shows them.

// WebhookVersion is the "version" of every delivered body but delete.
const WebhookVersion = 1

// RoutingView is what the router reads of a tracking.events message; everything else passes
// through as bytes.
type RoutingView struct {
	Type, Event, MessageID, UserID, AnonymousID, PreviousID string
	Integrations                                            json.RawMessage
	// Properties and Traits are the raw values of those members (nil: absent), aliasing the
	// decoded event: what a tracking plan checks (docs/routing.md#tracking-plans).
	Properties, Traits json.RawMessage
}

// DecodeRoutingView reads the routing fields of a canonical tracking.events value (as written
// by Message.AppendJSON). It validates the JSON but builds nothing for the other fields.
func DecodeRoutingView(event []byte) (RoutingView, error) {
	var v RoutingView
	err := eachMember(event, func(key []byte, kEsc bool, val []byte) error {
		return v.read(string(keyBytes(key, kEsc)), val)
	})
	var se *syntaxError
	switch {
	case errors.As(err, &se):
		return v, &DecodeError{Msg: se.Error()}
	case errors.Is(err, errNotObject):
		return v, &DecodeError{Msg: err.Error()}
	}
	return v, err
}

// read reads one member of an event into the view when it is a routing field.
func (v *RoutingView) read(key string, val []byte) (err error) {
	switch key {
	case "type":
		v.Type, err = stringField("type", val)
	case "event":
		v.Event, err = stringField("event", val)
	case "messageId":
		v.MessageID, err = idField("messageId", val)
	case "userId":
		v.UserID, err = idField("userId", val)
	case "anonymousId":
		v.AnonymousID, err = idField("anonymousId", val)
	case "previousId":
		v.PreviousID, err = idField("previousId", val)
	case "integrations":
		v.Integrations, err = objectField("integrations", val)
	case "properties":
		v.Properties = val
	case "traits":
		v.Traits = val
	}
	return err
}

// AppendWebhookBodyFromEvent appends the delivered body of a canonical tracking.events value
// whose RoutingView is v: "version":1 (not on delete), then the event's members as bytes, then
// for alias "Previous ID" and "User ID". A "version", "Previous ID", "User ID" or "writeKey"
// member of the event is not copied, so no key repeats. event must be valid JSON (it decoded
// into v).
func AppendWebhookBodyFromEvent(dst, event []byte, v *RoutingView) []byte {
	dst = append(dst, '{')
	n := len(dst)
	if v.Type != TypeDelete {
		dst = append(dst, `"version":1`...)
	}
	_ = eachMember(event, func(key []byte, kEsc bool, val []byte) error {
		switch string(keyBytes(key, kEsc)) {
		case "version", "Previous ID", "User ID", "writeKey":
			return nil
		}
		if len(dst) > n {
			dst = append(dst, ',')
		}
		dst = append(dst, key...)
		dst = append(dst, ':')
		dst = append(dst, val...)
		return nil
	})
	if v.Type == TypeAlias {
		dst = appendKey(dst, n, "Previous ID")
		dst = appendString(dst, v.PreviousID)
		dst = appendKey(dst, n, "User ID")
		dst = appendString(dst, v.UserID)
	}
	return append(dst, '}')
}

// DecodeRoutingViewAppendBody does DecodeRoutingView and AppendWebhookBodyFromEvent in one
// pass over event: it returns the routing view and dst with the delivered body appended. This
// is the router's hot path; the result is byte-identical to the two calls. On error, dst is
// returned unchanged.
func DecodeRoutingViewAppendBody(dst, event []byte) (RoutingView, []byte, error) {
	return DecodeRoutingViewAppendBodyIndexed(dst, event, nil)
}

// MemberIndex is told the offsets of each member of a body being written, from the body's
// start: its key's content (between the quotes, escaped when keyEsc) and its value
// (*fql.Message is one).
type MemberIndex interface {
	AddTop(keyStart, keyEnd, valStart, valEnd int, keyEsc bool)
}

// DecodeRoutingViewAppendBodyIndexed is DecodeRoutingViewAppendBody telling index (nil: no
// one) where each top-level member of the body it writes is, "version" first, so that a
// reader of the body (destination filters) need not scan it again. The offsets hold for a
// body of any type but delete and alias, whose members the function moves or adds after.
func DecodeRoutingViewAppendBodyIndexed(dst, event []byte, index MemberIndex) (RoutingView, []byte, error) {
	start := len(dst)
	dst = append(dst, `{"version":1`...)
	afterVersion := len(dst)
	if index != nil {
		index.AddTop(2, 9, 11, 12, false) // "version":1
	}
	var v RoutingView
	err := eachMember(event, func(key []byte, kEsc bool, val []byte) error {
		k := string(keyBytes(key, kEsc))
		switch k {
		case "version", "Previous ID", "User ID", "writeKey":
			return nil
		}
		err := v.read(k, val)
		dst = append(dst, ',')
		keyAt := len(dst) - start
		dst = append(dst, key...)
		dst = append(dst, ':')
		if index != nil {
			valAt := len(dst) - start
			index.AddTop(keyAt+1, keyAt+len(key)-1, valAt, valAt+len(val), kEsc)
		}
		dst = append(dst, val...)
		return err
	})
	var se *syntaxError
	switch {
	case errors.As(err, &se):
		return v, dst[:start], &DecodeError{Msg: se.Error()}
	case errors.Is(err, errNotObject):
		return v, dst[:start], &DecodeError{Msg: err.Error()}
	case err != nil:
		return v, dst[:start], err
	}
	if v.Type == TypeDelete { // no version: drop it and the comma after it
		rest := dst[afterVersion:]
		if len(rest) > 0 {
			rest = rest[1:]
		}
		dst = append(dst[:start+1], rest...)
	}
	if v.Type == TypeAlias {
		dst = appendKey(dst, start+1, "Previous ID")
		dst = appendString(dst, v.PreviousID)
		dst = appendKey(dst, start+1, "User ID")
		dst = appendString(dst, v.UserID)
	}
	return v, append(dst, '}'), nil
}

// AppendWebhookBody appends the delivered body of a decoded message; it is byte-identical to
// AppendWebhookBodyFromEvent of the message's canonical JSON.
func AppendWebhookBody(dst []byte, m *Message) []byte {
	event := m.AppendJSON(nil)
	v := RoutingView{Type: m.Type, UserID: m.UserID, PreviousID: m.PreviousID}
	return AppendWebhookBodyFromEvent(dst, event, &v)
}

// AppendDeleteBody appends the body of a deletion notice: type, userId and timestamp only,
// with no version (docs/receivers.md#the-body).
func AppendDeleteBody(dst []byte, userID string, ts time.Time) []byte {
	dst = append(dst, `{"type":"delete","userId":`...)
	dst = appendString(dst, userID)
	dst = append(dst, `,"timestamp":"`...)
	dst = AppendTimestamp(dst, ts)
	return append(dst, `"}`...)
}
