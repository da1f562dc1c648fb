package audiences

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// batch is what one transaction produces.
type batch struct {
	out     []*kgo.Record
	now     int64
	touched map[int32]*partition
	events  int // tracking.events records read (opened)
	// source is the source id of the tracking.events record being applied ("" for a message
	// handed on), read only when profiles keep events (AUDIENCES_PROFILE_EVENTS).
	source string
	// trace is the trace context of the tracking.events record being applied (zero for a
	// message handed on): the identify calls a realtime join sends continue it
	// (docs/operations.md#tracing).
	trace platform.TraceContext
	// links are the link hand-offs of this batch still open to more links, by partition
	// (identity.go, addLink).
	links  map[int32]*linkGroup
	groups []*linkGroup // every link record of the batch, to encode
}

// transform processes one poll of tracking.events and audiences.repartition in one
// transaction: profile updates, their changelog records, hand-offs to other partitions and
// identify calls.
func (s *Service) transform(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshModel()
	if err := s.restoreMissing(ctx, fs); err != nil {
		return nil, err
	}
	b := &batch{now: s.now().UnixMilli(), touched: map[int32]*partition{}}
	if len(s.bf.jobs) > 0 {
		s.mergeBackfills(b, fs)
	}
	var unavailable error
	fs.EachRecord(func(r *kgo.Record) {
		if unavailable == nil {
			unavailable = s.process(b, r)
		}
	})
	if unavailable != nil {
		return nil, fmt.Errorf("opening a sealed record: %w", unavailable)
	}
	s.metrics.events.Add(float64(b.events))
	b.encodeLinks()
	for p, part := range b.touched {
		b.out = s.changelog(b.out, p, part)
	}
	// What is written of a user is sealed with the user's data key: profile versions on
	// audiences.state, identify calls, events and profiles handed to another partition
	// (docs/security.md#crypto-shredding). Keys are written before the transaction's records.
	if err := s.keys.SealRecords(ctx, b.out, s.sealSubject); err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return b.out, nil
}

// process applies one record of the poll: a message of tracking.events to its profile, an
// audiences.repartition record as its op says (handoff.go). The error is the keyring's being
// unavailable: the batch is not processed.
func (s *Service) process(b *batch, r *kgo.Record) error {
	part := s.parts[r.Partition]
	if part == nil || !part.restored {
		return nil // revoked meanwhile: the transaction aborts, the next owner reads it
	}
	if part.aggsModel != s.model {
		s.noteAggs(b, r.Partition, part)
	}
	if r.Topic == s.cfg.EventsTopic {
		part.next = r.Offset + 1
		if headerIs(r, HeaderOrigin, OriginAudiences) {
			return nil
		}
	}
	value, ok, err := s.open(r)
	if err != nil || !ok {
		return err
	}
	b.source, b.trace = "", platform.TraceContext{}
	switch r.Topic {
	case s.cfg.EventsTopic:
		b.events++
		b.trace = platform.TraceFromRecord(r)
		if s.cfg.ProfileEvents > 0 {
			b.source = headerValue(r, schemas.HeaderSourceID)
		}
		m, err := schemas.DecodeMessage(value)
		if err != nil {
			s.logger.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a tracking.events record that does not decode")
			return nil
		}
		s.handleMessage(b, r.Partition, part, m, value, "", r.Timestamp)
	case s.cfg.RepartitionTopic:
		o, err := decodeOp(value)
		if err != nil {
			s.logger.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping an audiences.repartition record that does not decode")
			return nil
		}
		s.handleOp(b, r.Partition, part, &o, r.Timestamp)
	}
	return nil
}

// open returns a record's value in clear; ok false for a record to skip: sealed with a
// shredded key (counted) or damaged (logged). The error is the keyring's being unavailable:
// the batch is not processed.
func (s *Service) open(r *kgo.Record) (value []byte, ok bool, err error) {
	value, err = s.keys.Open(r)
	switch {
	case err == nil:
		return value, true, nil
	case errors.Is(err, shred.ErrShredded):
		s.metrics.shredded.WithLabelValues(r.Topic).Inc()
		return nil, false, nil
	case errors.Is(err, shred.ErrUnavailable):
		return nil, false, err
	default:
		s.logger.Warn().Err(err).Str("topic", r.Topic).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a sealed record that does not open")
		return nil, false, nil
	}
}

// sealSubject is the user whose data key seals a record audiences writes (under s.mu): the
// profile's userId, else its id, for a profile version; the record key (the profile's user)
// for an identify call and for an event or a profile handed to another partition. Partition
// metadata, ticks, merges and deletion requests (which must outlive the user's keys) stay
// plain.
func (s *Service) sealSubject(r *kgo.Record) []byte {
	switch r.Topic {
	case s.cfg.StateTopic:
		if string(r.Key) == metaKey {
			return nil
		}
		if part := s.parts[r.Partition]; part != nil {
			if into, ok := part.entries[string(r.Key)]; ok {
				// An external id's entry: the key of the profile that claimed it, not a
				// key of its own per id (docs/audiences.md#identity-resolution).
				return []byte(into)
			}
			if prof := part.profiles[string(r.Key)]; prof != nil && prof.userID() != "" {
				return []byte(prof.userID())
			}
		}
		return r.Key
	case s.cfg.EventsTopic:
		return r.Key
	case s.cfg.RepartitionTopic:
		if carriesUserData(r.Value) {
			return r.Key
		}
	}
	return nil
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func headerIs(r *kgo.Record, key, value string) bool {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value) == value
		}
	}
	return false
}

// refreshModel recompiles the model when the config changed.
func (s *Service) refreshModel() {
	snap := s.deps.Config()
	if s.modelSet && snap.Version() == s.modelVer {
		return
	}
	s.model, s.modelVer, s.modelSet = compile(snap.Audiences(), snap.ComputedTraits()), snap.Version(), true
	s.model.in = s.intern
}

// touch marks the profile id of partition p as changed in this batch (changelog).
func (b *batch) touch(p int32, part *partition, id string) {
	part.markDirty(id)
	b.touched[p] = part
}

// changelog appends the records of the partition's changed profiles (a tombstone for a
// removed one) and clears its dirty set.
func (s *Service) changelog(out []*kgo.Record, p int32, part *partition) []*kgo.Record {
	for id := range part.dirty {
		r := &kgo.Record{Topic: s.cfg.StateTopic, Partition: p, Key: []byte(id)}
		if id == metaKey {
			r.Value, _ = json.Marshal(part.meta)
		} else if into, ok := part.entries[id]; ok { // an external id's entry: a redirect
			r.Value = schemas.AppendJSONString(append(make([]byte, 0, len(`{"mergedInto":""}`)+len(into)+8), `{"mergedInto":`...), into)
			r.Value = append(r.Value, '}')
		} else if prof := part.profiles[id]; prof != nil {
			size := 512
			switch {
			case prof.mergedInto() != "": // a redirect (a merged id)
				size = len(`{"mergedInto":""}`) + len(prof.mergedInto()) + 8
			case prof.Identity != nil: // its external ids and history (identity.go, appendJSON)
				size += 24 + 192*len(prof.Identity.Log)
				for _, e := range prof.Identity.IDs {
					size += 36 + len(e.Type) + len(e.Value)
				}
			}
			r.Value = prof.changelogValue(make([]byte, 0, size))
			prof.pack() // written: its counters and aggregates packed until changed again
		}
		out = append(out, r)
	}
	part.dirty = nil
	return out
}

// eventTime is when a message happened, for windows: its timestamp, never later than now.
func eventTime(m *schemas.Message, recTime time.Time, now int64) int64 {
	t := m.Timestamp
	if t.IsZero() {
		t = recTime
	}
	ms := t.UnixMilli()
	if ms > now {
		ms = now
	}
	return ms
}

// handleMessage applies one message to its profile: into is "" for a tracking.events record
// (the profile is the message's key), or the profile an "event" hand-off names.
func (s *Service) handleMessage(b *batch, p int32, part *partition, m *schemas.Message, raw []byte, into string, recTime time.Time) {
	id := into
	if id == "" {
		id = m.Key()
	}
	if id == "" {
		return
	}
	if at, ok := part.deletedAt[id]; ok && acceptedMilli(m, recTime) < at {
		return // accepted before its user's deletion: forgotten with the user
	}
	prof := s.messageProfile(b, part, id, m, raw, into)
	if prof == nil {
		return
	}
	if prof.repeated(messageHash(m.MessageID)) {
		s.metrics.duplicates.Inc()
		return
	}
	at := eventTime(m, recTime, b.now)
	prof.seen(at)
	s.countMessage(prof, m, at, b.now)
	if s.cfg.ProfileEvents > 0 && m.Type == schemas.TypeTrack && m.Event != "" {
		s.keepTrack(b, prof, m, at)
	}
	b.touch(p, part, id)
	s.mergeOtherIDs(b, p, part, prof, m)
	if s.cfg.IdentityExternalIDs {
		s.linkExternalIDs(b, p, part, prof, m, at)
	}
	if s.model.realtime {
		n := len(b.out)
		b.out = s.syncProfile(b.out, part, prof, b.now, true, nil)
		if len(b.out) > n {
			s.traceJoins(b, b.out[n:])
		}
	}
}

// traceJoins makes the identify calls of a realtime join part of the trace of the message
// that caused them (docs/operations.md#tracing): a span of the join when spans are exported,
// its context (else the message's) on each record.
func (s *Service) traceJoins(b *batch, calls []*kgo.Record) {
	tc := b.trace
	if s.deps.Tracer.Enabled() {
		var span platform.Span
		span, tc = s.deps.Tracer.Start(tc, "audiences realtime join", platform.SpanInternal, attribute.Int("tributary.change.count", len(calls)))
		defer span.End()
	}
	if tc.IsZero() {
		return
	}
	for _, r := range calls {
		r.Headers = tc.AppendHeaders(r.Headers)
	}
}

// messageProfile is the profile id a message counts on, made when it is new; nil when the
// message does not count here: the id is suppressed, or merged into another profile (the
// message is handed on to it).
func (s *Service) messageProfile(b *batch, part *partition, id string, m *schemas.Message, raw []byte, into string) *profile {
	prof := part.profiles[id]
	switch {
	case prof != nil && prof.Suppressed:
		return nil
	case prof != nil && prof.mergedInto() != "":
		// An id merged into another profile: its events count there.
		b.out = append(b.out, s.handOff(prof.mergedInto(), op{Op: opEvent, Into: prof.mergedInto(), Message: raw}))
		return nil
	case prof == nil:
		// A message handed on by a merged id (into) goes to an identified profile.
		if into != "" || m.UserID == id {
			prof = newUserProfile(id)
		} else {
			prof = newAnonProfile(id)
		}
		if part.profiles == nil {
			part.profiles = map[string]*profile{}
		}
		part.profiles[id] = prof
		s.metrics.profiles.Inc()
	}
	return prof
}

// countMessage adds a message that happened at (ms) to its profile: an identify's traits, a
// track event's counters and the aggregates the model reads of it.
func (s *Service) countMessage(prof *profile, m *schemas.Message, at, now int64) {
	switch m.Type {
	case schemas.TypeIdentify:
		prof.mergeTraits(m.Traits, s.intern)
	case schemas.TypeTrack:
		if m.Event != "" {
			if ser := prof.eventSeries(s.intern.str(m.Event), true); ser != nil {
				ser.add(at, now, 0, false)
			}
			s.model.apply(prof, m.Event, m.Properties, at, now)
		}
	}
}

// mergeOtherIDs is identity: an identified message that carries another id merges that
// profile into this one, through a merge hand-off to the id's partition
// (docs/audiences.md#merging-profiles).
func (s *Service) mergeOtherIDs(b *batch, p int32, part *partition, prof *profile, m *schemas.Message) {
	if prof.userID() == "" {
		return
	}
	for i, other := range []string{m.AnonymousID, m.PreviousID} {
		if other != "" && other != prof.ID && !slices.Contains(prof.merged(), other) {
			typ := idAnonymousID
			if i == 1 {
				typ = "previous_id"
			}
			if !s.mergeAllowed(b, p, part, prof, typ, other) {
				continue
			}
			prof.addMerged(other)
			b.out = append(b.out, s.handOff(other, op{Op: opMerge, From: other, Into: prof.ID, Via: typ + ":" + other}))
		}
	}
}

// acceptedMilli is when a message was accepted (unix ms): its receivedAt, else its record's
// time.
func acceptedMilli(m *schemas.Message, recTime time.Time) int64 {
	if !m.ReceivedAt.IsZero() {
		return m.ReceivedAt.UnixMilli()
	}
	return recTime.UnixMilli()
}
