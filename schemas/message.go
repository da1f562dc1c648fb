package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Message is one Segment-spec call: identify, track, page, screen, group or alias.
//
// Free-form values (Context, Integrations, Traits, Properties) hold the exact bytes the client
// sent, so every key and every number survives (no float64 rounding). Unknown top-level fields
// ("_metadata", "channel", ...) are kept in order and re-encoded verbatim by AppendJSON.
// A Message is not safe for concurrent mutation.
type Message struct {
	Type        string
	MessageID   string
	UserID      string // "" when absent or null; a number is kept as its decimal text
	AnonymousID string // as UserID
	Event       string // track
	Name        string // page, screen
	Category    string // page
	GroupID     string // group
	PreviousID  string // alias

	// Timestamps; the zero time means absent.
	Timestamp         time.Time
	OriginalTimestamp time.Time
	SentAt            time.Time
	ReceivedAt        time.Time

	Context      json.RawMessage // an object, or nil
	Integrations json.RawMessage // an object, or nil
	Traits       json.RawMessage // an object, or nil
	Properties   json.RawMessage // an object, or nil

	// WriteKey is a body "writeKey" field (clients that send no auth header). It is a secret:
	// AppendJSON never writes it.
	WriteKey string

	extra []member // unknown top-level fields, in order
}

// DecodeError is a message that is not JSON, not an object, or holds a known field of the
// wrong JSON type or an unreadable timestamp.
type DecodeError struct {
	Field string // the top-level field, when the error is about one
	Msg   string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

var errNotObject = errors.New("a message must be a JSON object")

// DecodeMessage decodes one message. It checks JSON syntax everywhere (also inside free-form
// values) and the JSON type of every known field; Validate checks the spec's rules.
func DecodeMessage(data []byte) (*Message, error) {
	m := new(Message)
	if err := m.decode(data); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Message) decode(data []byte) error {
	err := eachMember(data, func(key []byte, kEsc bool, v []byte) error {
		kb := keyBytes(key, kEsc)
		var err error
		switch string(kb) {
		case "type":
			m.Type, err = stringField("type", v)
		case "messageId":
			m.MessageID, err = idField("messageId", v)
		case "userId":
			m.UserID, err = idField("userId", v)
		case "anonymousId":
			m.AnonymousID, err = idField("anonymousId", v)
		case "event":
			m.Event, err = stringField("event", v)
		case "name":
			m.Name, err = stringField("name", v)
		case "category":
			m.Category, err = stringField("category", v)
		case "groupId":
			m.GroupID, err = idField("groupId", v)
		case "previousId":
			m.PreviousID, err = idField("previousId", v)
		case "writeKey":
			m.WriteKey, err = stringField("writeKey", v)
		case "timestamp":
			m.Timestamp, err = timeField("timestamp", v)
		case "originalTimestamp":
			m.OriginalTimestamp, err = timeField("originalTimestamp", v)
		case "sentAt":
			m.SentAt, err = timeField("sentAt", v)
		case "receivedAt":
			m.ReceivedAt, err = timeField("receivedAt", v)
		case "context":
			m.Context, err = objectField("context", v)
		case "integrations":
			m.Integrations, err = objectField("integrations", v)
		case "traits":
			m.Traits, err = objectField("traits", v)
		case "properties":
			m.Properties, err = objectField("properties", v)
		default:
			m.extra = append(m.extra, member{key: string(kb), value: v})
		}
		return err
	})
	var se *syntaxError
	switch {
	case errors.As(err, &se):
		return &DecodeError{Msg: se.Error()}
	case errors.Is(err, errNotObject):
		return &DecodeError{Msg: err.Error()}
	}
	return err
}

// stringField reads a string or null ("").
func stringField(field string, v []byte) (string, error) {
	switch v[0] {
	case '"':
		return unquote(v, hasBackslash(v)), nil
	case 'n':
		return "", nil
	}
	return "", &DecodeError{Field: field, Msg: "must be a string"}
}

// idField reads an identifier: a string, null (""), or a number kept as its decimal text
// (some clients send numeric ids; Segment's API accepts them as strings).
func idField(field string, v []byte) (string, error) {
	if c := v[0]; c == '-' || (c >= '0' && c <= '9') {
		return string(v), nil
	}
	s, err := stringField(field, v)
	if err != nil {
		return "", &DecodeError{Field: field, Msg: "must be a string"}
	}
	return s, nil
}

func timeField(field string, v []byte) (time.Time, error) {
	s, err := stringField(field, v)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := ParseTimestamp(s)
	if err != nil {
		return time.Time{}, &DecodeError{Field: field, Msg: err.Error()}
	}
	return t, nil
}

// objectField keeps an object's exact bytes; null is absent.
func objectField(field string, v []byte) (json.RawMessage, error) {
	switch v[0] {
	case '{':
		return json.RawMessage(v), nil
	case 'n':
		return nil, nil
	}
	return nil, &DecodeError{Field: field, Msg: "must be an object"}
}

func hasBackslash(v []byte) bool {
	for _, c := range v {
		if c == '\\' {
			return true
		}
	}
	return false
}

// Key is the message's Kafka partition key: userId, else anonymousId.
func (m *Message) Key() string {
	if m.UserID != "" {
		return m.UserID
	}
	return m.AnonymousID
}

// AppendJSON appends the message's canonical JSON: the known fields (empty ones omitted,
// timestamps in the form of FormatTimestamp), then the unknown fields verbatim. It never
// writes WriteKey. This is the value format of tracking.events.
func (m *Message) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	n := len(dst)
	str := func(key, v string) {
		if v != "" {
			dst = appendKey(dst, n, key)
			dst = appendString(dst, v)
		}
	}
	ts := func(key string, t time.Time) {
		if !t.IsZero() {
			dst = appendKey(dst, n, key)
			dst = append(dst, '"')
			dst = AppendTimestamp(dst, t)
			dst = append(dst, '"')
		}
	}
	raw := func(key string, v []byte) {
		if len(v) > 0 {
			dst = appendKey(dst, n, key)
			dst = append(dst, v...)
		}
	}
	str("type", m.Type)
	str("messageId", m.MessageID)
	str("userId", m.UserID)
	str("anonymousId", m.AnonymousID)
	str("previousId", m.PreviousID)
	str("groupId", m.GroupID)
	str("event", m.Event)
	str("name", m.Name)
	str("category", m.Category)
	ts("timestamp", m.Timestamp)
	ts("originalTimestamp", m.OriginalTimestamp)
	ts("sentAt", m.SentAt)
	ts("receivedAt", m.ReceivedAt)
	raw("properties", m.Properties)
	raw("traits", m.Traits)
	raw("context", m.Context)
	raw("integrations", m.Integrations)
	for _, e := range m.extra {
		raw(e.key, e.value)
	}
	return append(dst, '}')
}

// appendKey writes `"key":`, preceded by a comma unless it is the first member after the
// object's opening brace at offset n.
func appendKey(dst []byte, n int, key string) []byte {
	if len(dst) > n {
		dst = append(dst, ',')
	}
	dst = appendString(dst, key)
	return append(dst, ':')
}

// Extra returns the value of an unknown top-level field, or nil.
func (m *Message) Extra(key string) json.RawMessage {
	for _, e := range m.extra {
		if e.key == key {
			return e.value
		}
	}
	return nil
}

// MergeContext merges a batch-level context object into the message's: the message's own keys
// win; the merge is shallow (a key present in both keeps the message's whole value).
func (m *Message) MergeContext(batchLevel json.RawMessage) error {
	merged, err := mergeObjects(m.Context, batchLevel)
	if err != nil {
		return &DecodeError{Field: "context", Msg: err.Error()}
	}
	m.Context = merged
	return nil
}

// MergeIntegrations merges a batch-level integrations object like MergeContext.
func (m *Message) MergeIntegrations(batchLevel json.RawMessage) error {
	merged, err := mergeObjects(m.Integrations, batchLevel)
	if err != nil {
		return &DecodeError{Field: "integrations", Msg: err.Error()}
	}
	m.Integrations = merged
	return nil
}

// SetContextIPIfAbsent adds context.ip unless the client set it; other keys stay byte-exact.
func (m *Message) SetContextIPIfAbsent(ip string) error {
	if ip == "" {
		return nil
	}
	if len(m.Context) == 0 {
		m.Context = appendString(append(json.RawMessage(nil), `{"ip":`...), ip)
		m.Context = append(m.Context, '}')
		return nil
	}
	found := false
	if err := eachMember(m.Context, func(key []byte, esc bool, _ []byte) error {
		if keyIs(key, esc, "ip") {
			found = true
		}
		return nil
	}); err != nil {
		return &DecodeError{Field: "context", Msg: "must be an object"}
	}
	if found {
		return nil
	}
	m.Context = appendMembers(m.Context, []member{{key: "ip", value: appendString(nil, ip)}})
	return nil
}

// mergeObjects returns own with the members of fallback whose keys own lacks appended.
func mergeObjects(own, fallback json.RawMessage) (json.RawMessage, error) {
	add, err := ParseMembers(fallback)
	if err != nil {
		return nil, err
	}
	if len(own) == 0 && len(add.ms) > 0 {
		return append(json.RawMessage(nil), fallback...), nil
	}
	return mergeMembers(own, add.ms)
}

// Members are the members of one JSON object, parsed once so that the same batch-level object
// can be merged into every message of a batch without parsing it again for each.
type Members struct{ ms []member }

// ParseMembers parses obj, which must be a JSON object, null or empty.
func ParseMembers(obj json.RawMessage) (Members, error) {
	var x Members
	if len(obj) == 0 || string(obj) == "null" {
		return x, nil
	}
	if err := eachMember(obj, func(key []byte, esc bool, v []byte) error {
		x.ms = append(x.ms, member{key: unquote(key, esc), value: v})
		return nil
	}); err != nil {
		return x, fmt.Errorf("batch-level value must be an object")
	}
	return x, nil
}

// Get returns the value of the member key: the last one when the object repeats the key, as
// encoding/json would decode it.
func (x Members) Get(key string) (json.RawMessage, bool) {
	for i := len(x.ms) - 1; i >= 0; i-- {
		if x.ms[i].key == key {
			return x.ms[i].value, true
		}
	}
	return nil, false
}

// Each calls fn for every member, in the order of the object.
func (x Members) Each(fn func(key string, value json.RawMessage)) {
	for _, m := range x.ms {
		fn(m.key, m.value)
	}
}

// WithStringIfAbsent returns x with the member key: value (a JSON string) appended, unless x
// has key already.
func (x Members) WithStringIfAbsent(key, value string) Members {
	if value == "" {
		return x
	}
	for _, m := range x.ms {
		if m.key == key {
			return x
		}
	}
	return Members{ms: append(x.ms[:len(x.ms):len(x.ms)], member{key: key, value: appendString(nil, value)})}
}

// MergeContextMembers appends to the message's context each member of x whose key the context
// lacks: MergeContext with a pre-parsed batch-level context. With
// x = ParseMembers(batchContext).WithStringIfAbsent("ip", peer) it is MergeContext followed by
// SetContextIPIfAbsent, byte for byte, in one pass over the message's context.
func (m *Message) MergeContextMembers(x Members) error {
	merged, err := mergeMembers(m.Context, x.ms)
	if err != nil {
		return &DecodeError{Field: "context", Msg: err.Error()}
	}
	m.Context = merged
	return nil
}

// mergeMembers returns own with the members of add whose keys own lacks appended; add is not
// modified.
func mergeMembers(own json.RawMessage, add []member) (json.RawMessage, error) {
	if len(add) == 0 {
		return own, nil
	}
	if len(own) == 0 {
		return appendMembers(json.RawMessage("{}"), add), nil
	}
	var presentBuf [16]bool
	present := presentBuf[:0]
	if len(add) > len(presentBuf) {
		present = make([]bool, 0, len(add))
	}
	present = present[:len(add)]
	missing := len(add)
	if err := eachMember(own, func(key []byte, esc bool, _ []byte) error {
		for i := range add {
			if !present[i] && keyIs(key, esc, add[i].key) {
				present[i] = true
				missing--
				break
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("must be an object")
	}
	if missing == len(add) {
		return appendMembers(own, add), nil
	}
	rest := make([]member, 0, missing)
	for i := range add {
		if !present[i] {
			rest = append(rest, add[i])
		}
	}
	return appendMembers(own, rest), nil
}

// appendMembers returns a copy of the object obj with members appended before its '}'.
func appendMembers(obj json.RawMessage, add []member) json.RawMessage {
	if len(add) == 0 {
		return obj
	}
	end := len(obj) - 1
	for end > 0 && obj[end] != '}' {
		end--
	}
	body := obj[:end]
	out := make(json.RawMessage, 0, len(obj)+64)
	out = append(out, body...)
	empty := true
	for i := len(body) - 1; i >= 0; i-- {
		if !isSpace(body[i]) {
			empty = body[i] == '{'
			break
		}
	}
	for _, a := range add {
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = appendString(out, a.key)
		out = append(out, ':')
		out = append(out, a.value...)
	}
	return append(out, '}')
}
