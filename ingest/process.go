package ingest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// envelope is what a message inherits from its request: batch-level fields, the peer's IP,
// the time the request arrived.
type envelope struct {
	receivedAt   time.Time
	sentAt       time.Time
	timestamp    time.Time // batch-level timestamp: the default for messages without one
	context      json.RawMessage
	integrations json.RawMessage
	ip           string
	// callType is the type a single-call endpoint implies (/v1/track → "track"); "" for
	// batches and the Kafka front door, where each message names its own.
	callType string
	// trace is the request's trace context (docs/operations.md#tracing): the request's span's
	// when spans are exported, else its traceparent as it came; every message of the request
	// carries it (a batch's events share the request's trace).
	trace platform.TraceContext

	// What every message of the request gets merged into its context: the batch-level context
	// and the peer's ip, parsed once per request (contextMembers).
	members    schemas.Members
	membersErr error
	parsed     bool
}

// contextMembers returns the members to merge into each message's context: the batch-level
// context's, then "ip" (the peer) unless the batch-level context has one. A message's own
// members win; so the result equals MergeContext followed by SetContextIPIfAbsent.
func (env *envelope) contextMembers() (schemas.Members, error) {
	if !env.parsed {
		env.parsed = true
		env.members, env.membersErr = schemas.ParseMembers(env.context)
		env.members = env.members.WithStringIfAbsent("ip", env.ip)
	}
	return env.members, env.membersErr
}

// The attributes of ingest's spans (docs/operations.md#tracing).
const (
	attrSourceID   = "tributary.source.id"
	attrEventCount = "tributary.event.count"
)

// rejection says why one message was refused.
type rejection struct {
	code, reason string
}

// prepare turns one raw message into its tracking.events record, or says why it is rejected.
func (s *Service) prepare(raw []byte, src *schemas.Source, env *envelope) (*kgo.Record, *rejection) {
	if len(raw) > schemas.MaxMessageBytes { // refused undecoded: its key is the caller's
		return nil, tooLarge(raw)
	}
	m, err := schemas.DecodeMessage(raw)
	return s.prepareDecoded(raw, m, err, src, env)
}

// prepareDecoded is prepare for a caller that has decoded raw already (m, err are
// schemas.DecodeMessage(raw)): each message is decoded once, for its record or, rejected, its
// key ([rejectKey]).
func (s *Service) prepareDecoded(raw []byte, m *schemas.Message, err error, src *schemas.Source, env *envelope) (*kgo.Record, *rejection) {
	if len(raw) > schemas.MaxMessageBytes {
		return nil, tooLarge(raw)
	}
	if err != nil {
		return nil, &rejection{"invalid_json", err.Error()}
	}
	return s.prepareMessage(m, raw, src, env)
}

// tooLarge is the rejection of a message longer than schemas.MaxMessageBytes.
func tooLarge(raw []byte) *rejection {
	return &rejection{"message_too_large", fmt.Sprintf("message is %d bytes, more than the %d-byte limit", len(raw), schemas.MaxMessageBytes)}
}

// prepareMessage turns m, decoded from raw (at most schemas.MaxMessageBytes), into its
// tracking.events record, or says why it is rejected. It changes m.
func (s *Service) prepareMessage(m *schemas.Message, raw []byte, src *schemas.Source, env *envelope) (*kgo.Record, *rejection) {
	if env.callType != "" {
		m.Type = env.callType
	}
	add, err := env.contextMembers()
	if err != nil {
		return nil, &rejection{"invalid_message", (&schemas.DecodeError{Field: "context", Msg: err.Error()}).Error()}
	}
	if err := m.MergeContextMembers(add); err != nil {
		return nil, &rejection{"invalid_message", err.Error()}
	}
	if err := m.MergeIntegrations(env.integrations); err != nil {
		return nil, &rejection{"invalid_message", err.Error()}
	}
	if err := m.Validate(); err != nil {
		return nil, &rejection{"invalid_message", err.Error()}
	}
	enrich(m, env)
	n := 3
	if !env.trace.IsZero() {
		n += 2 // traceparent and tracestate: within the same allocation
	}
	headers := append(make([]kgo.RecordHeader, 0, n),
		kgo.RecordHeader{Key: schemas.HeaderSourceID, Value: []byte(src.ID)},
		kgo.RecordHeader{Key: schemas.HeaderMessageID, Value: []byte(m.MessageID)},
		kgo.RecordHeader{Key: schemas.HeaderType, Value: []byte(m.Type)})
	headers = env.trace.AppendHeaders(headers)
	return &kgo.Record{
		Topic:   s.cfg.EventsTopic,
		Key:     []byte(m.Key()),
		Value:   m.AppendJSON(make([]byte, 0, len(raw)+len(env.context)+len(env.integrations)+256)),
		Headers: headers,
	}, nil
}

// enrich applies the server-side fields of docs/ingest.md: messageId when missing; receivedAt;
// originalTimestamp = the client's timestamp; timestamp corrected for the client's clock skew
// when sentAt is known (receivedAt − (sentAt − timestamp)), the client's timestamp as given
// otherwise (historical import), receivedAt when there is none. (context.ip from the peer,
// unless set, is merged with the batch-level context in prepare.)
func enrich(m *schemas.Message, env *envelope) {
	if m.MessageID == "" {
		m.MessageID = uuid.NewString()
	}
	m.ReceivedAt = env.receivedAt
	sentAt := m.SentAt
	if sentAt.IsZero() {
		sentAt = env.sentAt
		m.SentAt = sentAt
	}
	ts := m.Timestamp
	if ts.IsZero() {
		ts = env.timestamp
	}
	switch {
	case ts.IsZero():
		m.Timestamp = env.receivedAt
	case !sentAt.IsZero():
		m.OriginalTimestamp = ts
		m.Timestamp = env.receivedAt.Add(-sentAt.Sub(ts))
	default:
		m.OriginalTimestamp = ts
		m.Timestamp = ts
	}
}

// rejectedRecord is a tracking.rejected record: the message as sent, its reason.
func (s *Service) rejectedRecord(raw []byte, src *schemas.Source, key []byte, rej *rejection) *kgo.Record {
	r := &kgo.Record{
		Topic:   s.cfg.RejectedTopic,
		Key:     key,
		Value:   schemas.WithoutMember(raw, "writeKey"), // the message as sent, but never a secret at rest
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderReason, Value: []byte(rej.reason)}},
	}
	if src != nil {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schemas.HeaderSourceID, Value: []byte(src.ID)})
	}
	return r
}
