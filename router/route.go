package router

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
	"github.com/tributary-cdp/tributary/schemas/fql"
)

// Snapshot is what routing reads of the tenant config; *platform.Snapshot is one.
type Snapshot interface {
	// SourceByID must not keep id: Route passes the bytes of a record's header.
	SourceByID(id string) (*schemas.Source, bool)
	Sources() []*schemas.Source
	DestinationsForSource(sourceID string) []*schemas.Destination
}

var _ Snapshot = (*platform.Snapshot)(nil)

// SuppressionList reports whether a user's events are suppressed.
type SuppressionList interface {
	Suppressed(userID string) bool
}

// Keys give the data key of a sealed tracking.events record, which opens it and seals its
// deliveries (docs/security.md#crypto-shredding); *shred.Keyring is one.
type Keys interface {
	Key(hexID []byte) (*shred.Key, error)
}

var _ Keys = (*shred.Keyring)(nil)

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
	// Keys open sealed messages and seal their deliveries; nil: every record must be plain
	// (a sealed one is Invalid).
	Keys Keys
	// AttemptsTopic, when set, gets one filtered record (schemas.AppendFilteredRecord) per
	// message dropped for a destination of its source (docs/routing.md#filtered-records),
	// with FirstAttemptAt as its time; "": none.
	AttemptsTopic string
	// EventsTopic, when set, gets the records a tracking plan forwards (blocked calls and
	// Violation Generated calls, docs/routing.md#tracking-plans) in Deliveries.Forwarded; "":
	// none are forwarded.
	EventsTopic string

	// Tracer, when set, starts a span per routed message (docs/operations.md#tracing); nil:
	// the message's trace context is only copied onto its deliveries.
	Tracer *platform.Tracer

	// Filters caches the compiled destination filters across steps of one config snapshot
	// (docs/routing.md#destination-filters); nil: the step makes its own.
	Filters *FilterCache

	opened []byte      // the buffer sealed messages are opened into, reused by the next one
	fmsg   fql.Message // the message the filters read, indexed once for all its destinations
}

// Deliveries are webhooks.deliveries records with the destination of each:
// DestinationIDs[i] is the id of Records[i]'s destination. Route appends to both, and to
// Filtered the webhooks.attempts records of the messages it dropped for a destination (with
// Step.AttemptsTopic set), and to Forwarded the tracking.events records a tracking plan
// forwards to other sources (with Step.EventsTopic set).
type Deliveries struct {
	Records        []*kgo.Record
	DestinationIDs []string
	Filtered       []*kgo.Record
	Forwarded      []*kgo.Record
}

// Len is how many delivery records it holds.
func (d Deliveries) Len() int { return len(d.Records) }

// Reset empties it, keeping the capacity.
func (d Deliveries) Reset() Deliveries {
	return Deliveries{Records: d.Records[:0], DestinationIDs: d.DestinationIDs[:0], Filtered: d.Filtered[:0], Forwarded: d.Forwarded[:0]}
}

// Route decides one tracking.events record and appends to out one webhooks.deliveries record
// per destination that takes it, with that destination's id. The delivered body is built
// once, in the same pass that reads the routing fields (schemas.DecodeRoutingViewAppendBody),
// and shared by those records (a destination whose property filters changed it gets its own:
// docs/routing.md#destination-filters); the rest of the message passes through as bytes. The error
// explains an Invalid outcome. A sealed message is opened first, and its deliveries are
// sealed with the same key (the header tributary-key copied); a message whose key was
// shredded is Deleted. An error wrapping shred.ErrUnavailable (the keys could not be read)
// must not be skipped: the batch is read again.
func (s *Step) Route(rec *kgo.Record, out Deliveries) (Deliveries, Outcome, error) {
	sourceID := headerValue(rec, schemas.HeaderSourceID)
	if len(sourceID) == 0 {
		return out, Invalid, fmt.Errorf("no %s header", schemas.HeaderSourceID)
	}
	// The id is only looked up (Snapshot.SourceByID keeps no reference): no copy of it.
	src, ok := s.Config.SourceByID(unsafe.String(&sourceID[0], len(sourceID)))
	if !ok {
		return out, UnknownSource, nil
	}
	value, keyID := rec.Value, shred.KeyOf(rec)
	var key *shred.Key
	headroom := 0
	if keyID != nil {
		if s.Keys == nil {
			return out, Invalid, fmt.Errorf("sealed (header %s), and no keyring", schemas.HeaderDataKey)
		}
		var err error
		if key, err = s.Keys.Key(keyID); err == nil {
			value, err = key.Open(s.opened[:0], rec.Value)
		}
		if err != nil {
			if errors.Is(err, shred.ErrShredded) {
				return out, Deleted, nil
			}
			return out, Invalid, err
		}
		// The opened value is only read while this message is routed: the buffer serves the
		// next one. The body is built after room for the sealed form's head, and sealed in
		// place (one buffer per message, shared by its deliveries).
		s.opened, headroom = value, shred.Headroom
	}
	// A source with destination filters has the body's top-level members noted as it is
	// written, for the filters (no second scan).
	var index schemas.MemberIndex
	if s.filtersRead(src.ID) {
		s.fmsg.BeginTop()
		index = &s.fmsg
	}
	v, body, err := schemas.DecodeRoutingViewAppendBodyIndexed(make([]byte, headroom, headroom+len(value)+64+shred.TagSize), value, index)
	if err != nil {
		return out, Invalid, err
	}
	written := body // what the index describes, unless the plan edits the body
	if BlockedByTrackingPlan(src, &v) {
		return s.Filter(out, src.ID, v.MessageID, schemas.FilterTrackingPlan), BlockedByPlan, nil
	}
	if src.TrackingPlan.HasSchemas() { // docs/routing.md#tracking-plans
		var blocked bool
		if body, out, blocked = s.checkPlan(rec, value, src, &v, body, headroom, out); blocked {
			return s.Filter(out, src.ID, v.MessageID, schemas.FilterTrackingPlan), BlockedByPlan, nil
		}
	}
	if v.UserID != "" && s.Suppressions != nil && s.Suppressions.Suppressed(v.UserID) {
		return s.Filter(out, src.ID, v.MessageID, schemas.FilterSuppressed), Suppressed, nil
	}
	user := v.UserID
	if user == "" {
		user = v.AnonymousID
	}
	var messageID []byte
	n := len(out.Records)
	// The message's trace context travels on each delivery (docs/topics.md#trace-context): the
	// header values themselves, or the routing span's when spans are exported.
	tc := platform.TraceFromRecord(rec)
	if s.Tracer.Enabled() {
		var span platform.Span
		span, tc = s.Tracer.Start(tc, "route", platform.SpanConsumer)
		if span.Recording() { // attributes only for a span that is kept: nothing for the rest
			span.SetAttributes(attribute.String("tributary.source.id", src.ID))
			defer func() {
				span.SetAttributes(attribute.Int("tributary.destination.count", len(out.Records)-n))
				span.End()
			}()
		}
	}
	// s.fmsg holds this message: its top level noted as the body was written, when the body
	// is still that one (a tracking plan may have edited it) and of a type whose members
	// stayed where they were written.
	indexed := index != nil && len(body) == len(written) && &body[0] == &written[0] && v.Type != schemas.TypeDelete && v.Type != schemas.TypeAlias
	if indexed {
		s.fmsg.EndTop(body[headroom:])
	}
	shared := 0 // deliveries of body
	for _, d := range s.Config.DestinationsForSource(src.ID) {
		if !d.Routed() { // an auto-disabled destination's deliveries are parked (docs/delivery.md#auto-disable)
			continue
		}
		if !IntegrationsAllow(v.Integrations, integrationsKey(d.Type)) {
			if s.AttemptsTopic != "" {
				out.Filtered = append(out.Filtered, s.filtered(d.ID, v.MessageID, schemas.FilterIntegrationsOff))
			}
			continue
		}
		if len(d.Filters) > 0 { // a destination without filters pays nothing here
			if !indexed { // the body in clear: the message's members, and "version"
				s.fmsg.Reset(body[headroom:])
				indexed = true
			}
			own, droppedBy := s.applyFilters(d, src.ID, body, &v, key, headroom)
			if droppedBy != "" {
				if s.AttemptsTopic != "" {
					out.Filtered = append(out.Filtered, s.filterDropped(d.ID, v.MessageID, droppedBy))
				}
				continue
			}
			if own != nil {
				if messageID == nil {
					messageID = []byte(v.MessageID)
				}
				out.Records = append(out.Records, s.delivery(d.ID, user, messageID, typeValue(v.Type), sourceID, keyID, own, tc))
				out.DestinationIDs = append(out.DestinationIDs, d.ID)
				continue
			}
		}
		if messageID == nil {
			messageID = []byte(v.MessageID)
		}
		shared++
		out.Records = append(out.Records, s.delivery(d.ID, user, messageID, typeValue(v.Type), sourceID, keyID, body, tc))
		out.DestinationIDs = append(out.DestinationIDs, d.ID)
	}
	if len(out.Records) == n {
		return out, NoDestination, nil
	}
	if key != nil && shared > 0 {
		// Sealed once, after every destination's filters read it in clear, and shared by the
		// message's deliveries that take it unchanged.
		plain := &body[0]
		sealed := key.SealReserved(body)
		for _, r := range out.Records[n:] {
			if len(r.Value) > 0 && &r.Value[0] == plain {
				r.Value = sealed
			}
		}
	}
	return out, Routed, nil
}

// Filter appends to out.Filtered one filtered record per enabled destination of the source for
// a message dropped for every one of them (a duplicate, blocked by the tracking plan, a
// suppressed user); nothing without AttemptsTopic. Only dropped messages pay for it.
func (s *Step) Filter(out Deliveries, sourceID, messageID string, reason schemas.FilterReason) Deliveries {
	if s.AttemptsTopic == "" {
		return out
	}
	for _, d := range s.Config.DestinationsForSource(sourceID) {
		if d.IsEnabled() {
			out.Filtered = append(out.Filtered, s.filtered(d.ID, messageID, reason))
		}
	}
	return out
}

// filtered builds one webhooks.attempts record of class filtered (docs/topics.md#webhooksattempts),
// keyed by the destination id as the deliverer's attempt records are.
func (s *Step) filtered(destID, messageID string, reason schemas.FilterReason) *kgo.Record {
	return &kgo.Record{Topic: s.AttemptsTopic, Key: []byte(destID),
		Value: schemas.AppendFilteredRecord(make([]byte, 0, 96+len(destID)+len(messageID)), destID, messageID, reason, s.FirstAttemptAt)}
}

// filterDropped is the filtered record of a message the destination filter named filter
// dropped (reason destination_filter, and the member filter: docs/topics.md#webhooksattempts).
func (s *Step) filterDropped(destID, messageID, filter string) *kgo.Record {
	return &kgo.Record{Topic: s.AttemptsTopic, Key: []byte(destID),
		Value: schemas.AppendFilterDropRecord(make([]byte, 0, 112+len(destID)+len(messageID)+len(filter)), destID, messageID, filter, s.FirstAttemptAt)}
}

// deliveryRecord holds a record and its headers in one allocation.
type deliveryRecord struct {
	rec     kgo.Record
	headers [9]kgo.RecordHeader
}

// delivery builds one webhooks.deliveries record (docs/topics.md#webhooksdeliveries): key
// destinationId:userId; keyID, when not nil, is the tributary-key header of a sealed body; tc
// adds the traceparent and tracestate headers.
func (s *Step) delivery(destID, user string, messageID, typ, sourceID, keyID, body []byte, tc platform.TraceContext) *kgo.Record {
	key := make([]byte, 0, len(destID)+1+len(user))
	key = append(append(append(key, destID...), ':'), user...)
	destBytes := key[:len(destID):len(destID)]
	d := &deliveryRecord{}
	d.headers = [9]kgo.RecordHeader{
		{Key: schemas.HeaderDestinationID, Value: destBytes},
		{Key: schemas.HeaderMessageID, Value: messageID},
		{Key: schemas.HeaderAttempt, Value: attemptOne},
		{Key: schemas.HeaderFirstAttemptAt, Value: s.FirstAttemptAt},
		{Key: schemas.HeaderType, Value: typ},
		{Key: schemas.HeaderSourceID, Value: sourceID},
	}
	hs := d.headers[:6]
	if keyID != nil {
		hs = append(hs, kgo.RecordHeader{Key: schemas.HeaderDataKey, Value: keyID})
	}
	hs = tc.AppendHeaders(hs) // within the array: no allocation
	d.rec = kgo.Record{Topic: s.DeliveriesTopic, Key: key, Value: body, Headers: hs}
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

// filtersRead reports whether a destination of the source that takes messages has filters.
func (s *Step) filtersRead(sourceID string) bool {
	for _, d := range s.Config.DestinationsForSource(sourceID) {
		if len(d.Filters) > 0 && d.Routed() {
			return true
		}
	}
	return false
}
