package audiences

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// op is one audiences.repartition record: a hand-off to the owner of a profile's partition
// (docs/audiences.md#merging-profiles), or a tick.
type op struct {
	Op string `json:"op"`
	// merge: From (an anonymous or previous id, the record's key) is merged into Into.
	From string `json:"from,omitempty"`
	Into string `json:"into,omitempty"`
	// absorb: the profile merged into Into.
	Profile *profile `json:"profile,omitempty"`
	// event: a message of an id merged into Into.
	Message json.RawMessage `json:"message,omitempty"`
	// delete: the deletion request (its RequestID set: the router's derived one when it had
	// none); forget: the request being carried out.
	Deletion *schemas.DeletionRequest `json:"deletion,omitempty"`
	// forget: the merged ids whose redirects are still to forget after From, and what was
	// done so far (docs/audiences.md#deletion-and-suppression); or, with Message, a message
	// of From that the deleted profile Into handed back.
	Forget []string         `json:"forget,omitempty"`
	Done   map[string]int64 `json:"done,omitempty"`
	// merge, absorb, join: the id that caused the merge ("type:value"; empty: From itself);
	// note: the id to drop from Into. join and link: Summary is From's ids
	// (docs/audiences.md#identity-resolution); note: Note is what to record on Into.
	Via     string     `json:"via,omitempty"`
	Summary *idSummary `json:"summary,omitempty"`
	Note    *idEvent   `json:"note,omitempty"`
	// tick: Sync runs a sync (false: only restores the partition).
	Sync bool `json:"sync,omitempty"`
	// links: the link ops of one transaction for one partition, in order (identity.go).
	Links []op `json:"links,omitempty"`

	// A link read by decodeLinkOp keeps its summary as JSON (sumRaw) until a join needs it
	// (summary); a link written for a profile's new id writes the profile's summary (sumOf,
	// as summaryOf(sumOf, From)) without building it. Neither is on the wire.
	sumRaw []byte
	sumOf  *profile
}

const (
	opMerge  = "merge"
	opAbsorb = "absorb"
	opEvent  = "event"
	opDelete = "delete"
	opForget = "forget"
	opTick   = "tick"
)

func opRecord(o op) []byte {
	switch o.Op { // one link per new external id: written without reflection (identity.go)
	case opLink:
		return o.appendLinkJSON(make([]byte, 0, 192))
	case opLinks:
		return appendLinksJSON(make([]byte, 0, 192*len(o.Links)), o.Links)
	}
	b, _ := json.Marshal(o)
	return b
}

// decodeOp decodes an audiences.repartition record's value (opened).
func decodeOp(value []byte) (op, error) {
	if o, ok := decodeLinkOp(value); ok {
		return o, nil
	}
	if o, ok := decodeLinksOp(value); ok {
		return o, nil
	}
	var o op
	err := json.Unmarshal(value, &o)
	return o, err
}

// carriesUserData is whether an encoded op is an event or an absorb: it holds a profile's
// data and is sealed with the user's key (sealSubject); the other ops stay plain.
func carriesUserData(value []byte) bool {
	return bytes.HasPrefix(value, []byte(`{"op":"`+opEvent+`"`)) || bytes.HasPrefix(value, []byte(`{"op":"`+opAbsorb+`"`))
}

// String is for logs.
func (o op) String() string {
	return o.Op + " " + o.From + "→" + o.Into + " " + strconv.FormatBool(o.Sync)
}

// handOff is an audiences.repartition record for the partition of the profile key.
func (s *Service) handOff(key string, o op) *kgo.Record {
	return &kgo.Record{Topic: s.cfg.RepartitionTopic, Partition: s.partitionOf(key), Key: []byte(key), Value: opRecord(o)}
}

// tickRecord is a tick for partition p: a sync of the partition when sync is set, else only
// a record on which it is restored.
func (s *Service) tickRecord(p int32, sync bool) *kgo.Record {
	return &kgo.Record{Topic: s.cfg.RepartitionTopic, Partition: p, Value: opRecord(op{Op: opTick, Sync: sync})}
}

// tick asks, every SyncInterval, for a sync of every owned partition: a tick record on the
// partition's audiences.repartition, processed in its turn in the partition's transaction.
func (s *Service) tick(ctx context.Context) error {
	t := time.NewTicker(s.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s.mu.RLock()
		ps := make([]int32, 0, len(s.parts))
		for p := range s.parts {
			ps = append(ps, p)
		}
		s.mu.RUnlock()
		for _, p := range ps {
			s.produceTick(p, true)
		}
	}
}

// produceTick writes a tick outside any transaction: a lost one is replaced an interval later.
func (s *Service) produceTick(p int32, sync bool) {
	s.producer.Produce(context.Background(), s.tickRecord(p, sync), func(_ *kgo.Record, err error) {
		if err != nil && !errors.Is(err, kgo.ErrClientClosed) {
			s.logger.Warn().Err(err).Int32("partition", p).Msg("producing a sync tick; the next one follows in one interval")
		}
	})
}

// forwardDeletions re-keys tracking.deletions onto audiences.repartition, to the partition of
// the user's profile: whoever produced the request, and with whatever partitioner, the
// profile's owner gets it in the order of the user's other records.
func (s *Service) forwardDeletions(_ context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
	var out []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		req, _, err := schemas.DecodeDeletionRequest(r.Value)
		if err != nil {
			s.logger.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a deletion request that does not decode")
			return
		}
		if req.RequestID == "" { // as the router derives it: the report is keyed by it
			req.RequestID = r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "-" + strconv.FormatInt(r.Offset, 10)
		}
		out = append(out, &kgo.Record{Topic: s.cfg.RepartitionTopic, Partition: s.partitionOf(req.UserID),
			Key: []byte(req.UserID), Value: opRecord(op{Op: opDelete, Deletion: req})})
	})
	return out, nil
}

// handleOp applies one audiences.repartition record of partition p, in the batch's
// transaction.
func (s *Service) handleOp(b *batch, p int32, part *partition, o *op, recTime time.Time) {
	if part.profiles == nil {
		part.profiles = map[string]*profile{}
	}
	switch o.Op {
	case opMerge:
		s.applyMerge(b, p, part, o)
	case opAbsorb:
		s.applyAbsorb(b, p, part, o)
	case opEvent:
		s.applyEvent(b, p, part, o, recTime)
	case opDelete:
		s.applyDelete(b, p, part, o.Deletion)
	case opForget:
		s.applyForget(b, p, part, o, recTime)
	case opTick:
		s.applyTick(b, p, part, o)
	case opLink:
		s.applyLink(b, p, part, o)
	case opLinks:
		for i := range o.Links {
			if o.Links[i].Op == opLink {
				s.applyLink(b, p, part, &o.Links[i])
			}
		}
	case opJoin:
		s.applyJoin(b, p, part, o)
	case opNote:
		s.applyNote(b, p, part, o)
	}
}

// applyMerge turns the profile of o.From into a redirect to o.Into and hands what it held to
// o.Into's partition (an absorb).
func (s *Service) applyMerge(b *batch, p int32, part *partition, o *op) {
	from := part.profiles[o.From]
	if from != nil && (from.mergedInto() != "" || from.Suppressed) {
		// Merged already (the first identified user keeps it: the user_id limit), or
		// suppressed: recorded on the profile that asked (docs/audiences.md#identity-resolution).
		b.out = s.refusedMerge(b, o, from)
		return
	}
	if from == nil {
		s.metrics.profiles.Inc()
	}
	part.profiles[o.From] = newRedirect(o.From, o.Into)
	b.touch(p, part, o.From)
	if from != nil {
		b.out = append(b.out, s.handOff(o.Into, op{Op: opAbsorb, Into: o.Into, Profile: from, Via: o.Via}))
	}
}

// applyAbsorb adds a merged profile to o.Into's.
func (s *Service) applyAbsorb(b *batch, p int32, part *partition, o *op) {
	if o.Profile == nil {
		return
	}
	prof := part.profiles[o.Into]
	switch {
	case prof != nil && !prof.active():
		return
	case prof == nil:
		prof = newUserProfile(o.Into)
		part.profiles[o.Into] = prof
		s.metrics.profiles.Inc()
	}
	prof.absorb(o.Profile, b.now)
	s.recordMerge(b, prof, o)
	b.touch(p, part, o.Into)
	if s.model.realtime {
		b.out = s.syncProfile(b.out, part, prof, b.now, true, nil)
	}
}

// applyEvent counts a message of a merged id on the profile it was merged into.
func (s *Service) applyEvent(b *batch, p int32, part *partition, o *op, recTime time.Time) {
	m, err := schemas.DecodeMessage(o.Message)
	if err != nil {
		return
	}
	if part.profiles[o.Into] == nil && m.Key() != "" {
		// The profile the id was merged into is gone (deleted): the redirect is stale (one
		// of more than maxMerged ids, or merged after the deletion was carried out). It
		// goes, and the message counts as the id's own.
		b.out = append(b.out, s.handOff(m.Key(), op{Op: opForget, From: m.Key(), Into: o.Into, Message: o.Message}))
		return
	}
	s.handleMessage(b, p, part, m, o.Message, o.Into, recTime)
}

// applyDelete carries out a deletion or suppression request on the user's profile, then
// hands it on to the redirects of the ids merged into it (forgetNext).
func (s *Service) applyDelete(b *batch, p int32, part *partition, req *schemas.DeletionRequest) {
	if req == nil || req.UserID == "" {
		return
	}
	if req.Deletes() || req.Suppresses() {
		// The user's identify calls this batch computed before the request are not sent:
		// they would reach destinations after the user's delete notice
		// (docs/audiences.md#deletion-and-suppression).
		b.out = slices.DeleteFunc(b.out, func(r *kgo.Record) bool {
			return r.Topic == s.cfg.EventsTopic && string(r.Key) == req.UserID
		})
		b.links = nil // b.out moved: later links start records of their own
	}
	if req.Deletes() {
		if part.deletedAt == nil {
			part.deletedAt = map[string]int64{}
		}
		part.deletedAt[req.UserID] = b.now
	}
	prof := part.profiles[req.UserID]
	var merged []string
	if prof != nil && req.Deletes() {
		merged = slices.Clone(prof.merged())
		if prof.Identity != nil { // the claims of its external ids go too
			for _, e := range prof.Identity.IDs {
				merged = append(merged, extKey(e.Type, e.Value))
			}
		}
	}
	done := s.regulateProfile(b, p, part, req, prof)
	s.metrics.deletions.Inc()
	b.out = s.forgetNext(b.out, req, merged, done)
}

// regulateProfile applies req to the user's own profile prof (nil: none): an unsuppression
// drops a suppression marker, a suppression replaces the profile with one, a deletion drops
// it. It returns the counts of the deletion report.
func (s *Service) regulateProfile(b *batch, p int32, part *partition, req *schemas.DeletionRequest, prof *profile) map[string]int64 {
	done := map[string]int64{schemas.CountProfiles: 0, schemas.CountRedirects: 0, schemas.CountTombstones: 0}
	switch {
	case req.Kind == schemas.KindUnsuppress:
		if prof != nil && prof.Suppressed {
			delete(part.profiles, req.UserID)
			s.metrics.profiles.Dec()
			b.touch(p, part, req.UserID)
			done[schemas.CountTombstones]++
		}
	case req.Suppresses():
		if prof == nil {
			s.metrics.profiles.Inc()
		} else if prof.active() {
			done[schemas.CountProfiles]++
		}
		part.profiles[req.UserID] = &profile{ID: req.UserID, Suppressed: true}
		b.touch(p, part, req.UserID)
	case req.Deletes():
		if prof != nil {
			delete(part.profiles, req.UserID)
			s.metrics.profiles.Dec()
			b.touch(p, part, req.UserID)
			done[schemas.CountTombstones]++
			if prof.active() {
				done[schemas.CountProfiles]++
			}
		}
	}
	return done
}

// applyForget drops the redirect of o.From to a deleted profile, counts a message the deleted
// profile handed back as the id's own, and carries the deletion on.
func (s *Service) applyForget(b *batch, p int32, part *partition, o *op, recTime time.Time) {
	// A redirect of an id merged into a deleted profile: it goes (a tombstone), unless the
	// id was merged into another profile (the first identified user keeps it).
	if into, ok := part.entries[o.From]; ok && into == o.Into && o.Into != "" {
		// An external id's entry (identity.go): it goes, not counted in the report below.
		delete(part.entries, o.From)
		s.metrics.profiles.Dec()
		b.touch(p, part, o.From)
	} else if prof := part.profiles[o.From]; prof != nil && prof.mergedInto() == o.Into && o.Into != "" {
		delete(part.profiles, o.From)
		s.metrics.profiles.Dec()
		b.touch(p, part, o.From)
		// The entry of an external id the profile claimed goes too, not counted: the report's
		// counts are of profiles and merged ids (docs/audiences.md#identity-resolution).
		if o.Done != nil && !strings.HasPrefix(o.From, extPrefix) {
			o.Done[schemas.CountRedirects]++
			o.Done[schemas.CountTombstones]++
		}
	}
	if o.Message != nil { // a message of the id, handed back by a deleted profile
		if m, err := schemas.DecodeMessage(o.Message); err == nil {
			s.handleMessage(b, p, part, m, o.Message, "", recTime)
		}
	}
	if o.Deletion != nil && o.Done != nil {
		b.out = s.forgetNext(b.out, o.Deletion, o.Forget, o.Done)
	}
}

// forgetNext carries a deletion on: a forget record to the partition of the next merged id
// whose redirect is to go, or, when none is left, the service's report on
// tracking.deletions.status, in this transaction: it commits with the last tombstone (every
// earlier one committed before its forget record could be read), so the report is never read
// before what it reports (docs/audiences.md#deletion-and-suppression).
func (s *Service) forgetNext(out []*kgo.Record, req *schemas.DeletionRequest, merged []string, done map[string]int64) []*kgo.Record {
	if len(merged) > 0 {
		return append(out, s.handOff(merged[0], op{Op: opForget, From: merged[0], Into: req.UserID, Forget: merged[1:], Deletion: req, Done: done}))
	}
	if req.RequestID == "" {
		return out // a request forwarded by an earlier version: no report
	}
	rep := schemas.DeletionReport{RequestID: req.RequestID, UserID: req.UserID, Store: schemas.StoreAudiences, Kind: req.Kind,
		Counts: done, DoneAt: schemas.FormatTimestamp(s.now())}
	return append(out, &kgo.Record{Topic: s.cfg.DeletionsStatusTopic, Key: []byte(schemas.DeletionReportKey(req.RequestID, schemas.StoreAudiences)), Value: rep.Record()})
}

// applyTick forgets the deletions older than deletedAtKept and, for a sync tick, syncs the
// partition (sync.go).
func (s *Service) applyTick(b *batch, p int32, part *partition, o *op) {
	for id, at := range part.deletedAt {
		if b.now-at > deletedAtKept.Milliseconds() {
			delete(part.deletedAt, id)
		}
	}
	if o.Sync {
		b.out = s.syncPartition(b, p, part)
	}
}
