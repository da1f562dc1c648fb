package router

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Snapshot is what routing reads of the tenant config; *platform.Snapshot is one.
type Snapshot interface {
	SourceByID(id string) (*schemas.Source, bool)
	Sources() []*schemas.Source
	DestinationsForSource(sourceID string) []*schemas.Destination
}

var _ Snapshot = (*platform.Snapshot)(nil)

// SuppressionList reports whether a user's events are suppressed.
type SuppressionList interface {
	Suppressed(userID string) bool
}

// Step is the pure routing step, shared by the service and the benchmarks: it holds what is
// the same for every message of one poll.
type Step struct {
	// DeliveriesTopic is where delivery records go.
	DeliveriesTopic string
	// Config is the config snapshot to route by.
	Config Snapshot
	// Suppressions may be nil (nobody is suppressed).
	Suppressions SuppressionList
	// FirstAttemptAt is the first-attempt-at header value (schemas.FormatTimestamp).
	FirstAttemptAt []byte
}

// Deliveries are webhooks.deliveries records with the destination of each:
// DestinationIDs[i] is the id of Records[i]'s destination. Route appends to both.
type Deliveries struct {
	Records        []*kgo.Record
	DestinationIDs []string
}

// Len is how many records it holds.
func (d Deliveries) Len() int { return len(d.Records) }

// Reset empties it, keeping the capacity.
func (d Deliveries) Reset() Deliveries {
	return Deliveries{Records: d.Records[:0], DestinationIDs: d.DestinationIDs[:0]}
}

// Route decides one tracking.events record and appends to out one webhooks.deliveries record
// per destination that takes it, with that destination's id. The delivered body is built
// once, in the same pass that reads the routing fields (schemas.DecodeRoutingViewAppendBody),
// and shared by those records; the rest of the message passes through as bytes. The error
// explains an Invalid outcome.
func (s *Step) Route(rec *kgo.Record, out Deliveries) (Deliveries, Outcome, error) {
	sourceID := headerValue(rec, schemas.HeaderSourceID)
	if len(sourceID) == 0 {
		return out, Invalid, fmt.Errorf("no %s header", schemas.HeaderSourceID)
	}
	src, ok := s.Config.SourceByID(string(sourceID))
	if !ok {
		return out, UnknownSource, nil
	}
	v, body, err := schemas.DecodeRoutingViewAppendBody(make([]byte, 0, len(rec.Value)+64), rec.Value)
	if err != nil {
		return out, Invalid, err
	}
	if BlockedByTrackingPlan(src, &v) {
		return out, BlockedByPlan, nil
	}
	if v.UserID != "" && s.Suppressions != nil && s.Suppressions.Suppressed(v.UserID) {
		return out, Suppressed, nil
	}
	user := v.UserID
	if user == "" {
		user = v.AnonymousID
	}
	var messageID []byte
	n := len(out.Records)
	for _, d := range s.Config.DestinationsForSource(src.ID) {
		if !d.IsEnabled() || !IntegrationsAllow(v.Integrations, integrationsKey(d.Type)) {
			continue
		}
		if messageID == nil {
			messageID = []byte(v.MessageID)
		}
		out.Records = append(out.Records, s.delivery(d.ID, user, messageID, typeValue(v.Type), sourceID, body))
		out.DestinationIDs = append(out.DestinationIDs, d.ID)
	}
	if len(out.Records) == n {
		return out, NoDestination, nil
	}
	return out, Routed, nil
}

// deliveryRecord holds a record and its headers in one allocation.
type deliveryRecord struct {
	rec     kgo.Record
	headers [6]kgo.RecordHeader
}

// delivery builds one webhooks.deliveries record (docs/topics.md#webhooksdeliveries): key destinationId:userId.
func (s *Step) delivery(destID, user string, messageID, typ, sourceID, body []byte) *kgo.Record {
	key := make([]byte, 0, len(destID)+1+len(user))
	key = append(append(append(key, destID...), ':'), user...)
	destBytes := key[:len(destID):len(destID)]
	d := &deliveryRecord{}
	d.headers = [6]kgo.RecordHeader{
		{Key: schemas.HeaderDestinationID, Value: destBytes},
		{Key: schemas.HeaderMessageID, Value: messageID},
		{Key: schemas.HeaderAttempt, Value: attemptOne},
		{Key: schemas.HeaderFirstAttemptAt, Value: s.FirstAttemptAt},
		{Key: schemas.HeaderType, Value: typ},
		{Key: schemas.HeaderSourceID, Value: sourceID},
	}
	d.rec = kgo.Record{Topic: s.DeliveriesTopic, Key: key, Value: body, Headers: d.headers[:]}
	return &d.rec
}

// typeValues are the type header values of the message types, shared by every record.
var typeValues = map[string][]byte{}

func init() {
	for _, t := range []string{schemas.TypeIdentify, schemas.TypeTrack, schemas.TypePage, schemas.TypeScreen,
		schemas.TypeGroup, schemas.TypeAlias, schemas.TypeDelete} {
		typeValues[t] = []byte(t)
	}
}

func typeValue(t string) []byte {
	if b, ok := typeValues[t]; ok {
		return b
	}
	return []byte(t)
}

var attemptOne = []byte("1")

// headerValue returns the value of the record's first header named key, or nil.
func headerValue(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}
