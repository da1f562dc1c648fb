package audiences

import (
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// audienceStats are the figures of the last sync of an audience or computed trait, for the
// audience API (GET /v1/audiences/{id}).
type audienceStats struct {
	lastSync time.Time
	joins    map[int32]int // of the last sync of each partition
	leaves   map[int32]int
	members  map[int32]int
}

// recordTime formats ms for identify timestamps.
func recordTime(ms int64) string { return schemas.FormatTimestamp(time.UnixMilli(ms).UTC()) }

// identify builds one identify call for a profile: traits {key: v}, routed as source.
func (s *Service) identify(prof *profile, key, source, id, class string, v val, now int64) *kgo.Record {
	msgID := uuid.NewString()
	ts := recordTime(now)
	b := make([]byte, 0, 384)
	b = append(b, `{"type":"identify","messageId":`...)
	b = schemas.AppendJSONString(b, msgID)
	b, userKey := appendProfileID(b, prof)
	b = append(b, `,"traits":{`...)
	b = schemas.AppendJSONString(b, key)
	b = append(b, ':')
	b = v.appendJSON(b)
	b = append(b, '}')
	s.metrics.identifies.WithLabelValues(class, id).Inc()
	return s.callRecord(b, ts, class, id, key, userKey, source, msgID, schemas.TypeIdentify)
}

// callRecord ends a call of the audiences service whose members so far are in b — timestamp
// and receivedAt ts, context.library and context.personas — and makes its tracking.events
// record: keyed by the profile's id, routed as source.
func (s *Service) callRecord(b []byte, ts, class, id, key, userKey, source, msgID, typ string) *kgo.Record {
	b = append(b, `,"timestamp":"`...)
	b = append(b, ts...)
	b = append(b, `","receivedAt":"`...)
	b = append(b, ts...)
	b = append(b, `","context":{"library":{"name":"tributary-audiences","version":`...)
	b = schemas.AppendJSONString(b, platform.Version)
	b = append(b, `},"personas":`...)
	b = appendPersonas(b, class, id, key)
	b = append(b, `}}`...)
	return &kgo.Record{Topic: s.cfg.EventsTopic, Key: []byte(userKey), Value: b, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderSourceID, Value: []byte(source)},
		{Key: schemas.HeaderMessageID, Value: []byte(msgID)},
		{Key: schemas.HeaderType, Value: []byte(typ)},
		{Key: HeaderOrigin, Value: []byte(OriginAudiences)},
	}}
}

// computation classes of context.personas.
const (
	classAudience      = "audience"
	classComputedTrait = "computed_trait"
)

// changeCounter collects the joins and leaves of one sync of one partition. Its methods do
// nothing on a nil counter (a realtime sync counts nothing).
type changeCounter struct {
	joins, leaves, members map[string]int
	n                      int // profiles changed
}

func (cc *changeCounter) join(sid string) {
	if cc != nil {
		cc.joins[sid]++
	}
}

func (cc *changeCounter) leave(sid string) {
	if cc != nil {
		cc.leaves[sid]++
	}
}

func (cc *changeCounter) member(sid string) {
	if cc != nil {
		cc.members[sid]++
	}
}

func (cc *changeCounter) changed() {
	if cc != nil {
		cc.n++
	}
}

// syncProfile compares the profile's current membership and computed-trait values with what
// was last sent and appends an identify for each difference (realtime: only the definitions
// marked realtime; the removed ones are left to the sync). It records what it sent.
func (s *Service) syncProfile(out []*kgo.Record, part *partition, prof *profile, now int64, realtimeOnly bool, cc *changeCounter) []*kgo.Record {
	if !prof.active() {
		return out
	}
	out, audChanged := s.syncAudiences(out, part, prof, now, realtimeOnly, cc)
	out, traitChanged := s.syncTraits(out, part, prof, now, realtimeOnly, cc)
	changed := audChanged || traitChanged
	if !realtimeOnly {
		dropped := s.model.dropUnreadAggs(prof)
		var removed bool
		out, removed = s.syncRemoved(out, part, prof, now, cc)
		changed = changed || dropped || removed
	}
	if changed {
		part.markDirty(prof.ID)
		cc.changed()
	}
	return out
}

// syncAudiences syncs the profile's membership of the config's audiences (realtimeOnly: of
// the realtime ones); changed tells whether it sent anything.
func (s *Service) syncAudiences(out []*kgo.Record, part *partition, prof *profile, now int64, realtimeOnly bool, cc *changeCounter) (_ []*kgo.Record, changed bool) {
	for _, d := range s.model.audiences {
		if (realtimeOnly && !d.realtime) || !part.ready(d.aggKeys) {
			continue // (not backfilled yet: docs/audiences.md#backfill)
		}
		var c bool
		out, c = s.syncAudience(out, part, prof, d, now, cc)
		changed = changed || c
	}
	return out, changed
}

// syncAudience sends true when the profile joined audience d (or d changed version while it
// is a member), false when it left (or is not a member of d's new version).
func (s *Service) syncAudience(out []*kgo.Record, part *partition, prof *profile, d *audienceDef, now int64, cc *changeCounter) (_ []*kgo.Record, changed bool) {
	member := d.root.eval(prof, now)
	if member {
		cc.member(d.sid)
	}
	e, synced := prof.synced(d.sid)
	has := synced && e.version() == d.version
	switch {
	case member && !has:
		// A member of an audience whose name or source changed: false under the old
		// key or source first, so that no destination keeps the old trait true.
		if md, ok := part.meta.Defs[d.sid]; ok && synced && (md.Key != d.key || md.Source != d.source) {
			out = s.membership(out, prof, md.out(), d.id, false, now)
		}
		out = s.membership(out, prof, d.out(), d.id, true, now)
		prof.setSynced(d.sid, d.version, 0, true)
		cc.join(d.sid)
		return out, true
	case !member && synced:
		// Left, or the rule changed and the user is not in the new audience.
		o := d.out()
		if md, ok := part.meta.Defs[d.sid]; ok && !has {
			o = md.out()
		}
		out = s.membership(out, prof, o, d.id, false, now)
		prof.setSynced(d.sid, "", 0, false)
		cc.leave(d.sid)
		return out, true
	}
	return out, false
}

// syncTraits sends the profile's computed-trait values that differ from what was last sent
// (realtimeOnly: of the realtime traits); changed tells whether it sent anything.
func (s *Service) syncTraits(out []*kgo.Record, part *partition, prof *profile, now int64, realtimeOnly bool, cc *changeCounter) (_ []*kgo.Record, changed bool) {
	for _, d := range s.model.traits {
		if (realtimeOnly && !d.realtime) || !part.ready(d.aggKeys) {
			continue // (not backfilled yet: docs/audiences.md#backfill)
		}
		v := d.value(prof, now)
		h, prev := valueHash(v), d.emptyHash
		// A changed definition (name, source or aggregate) is a new computed trait: its
		// value is sent again under its trait key.
		if e, ok := prof.synced(d.sid); ok && e.version() == d.version {
			prev = e.H
		}
		if h != prev {
			out = append(out, s.identify(prof, d.key, d.source, d.id, classComputedTrait, v, now))
			prof.setSynced(d.sid, d.version, h, h != d.emptyHash)
			changed = true
			cc.join(d.sid)
		}
		if h != d.emptyHash {
			cc.member(d.sid)
		}
	}
	return out, changed
}

// dropUnreadAggs drops the profile's aggregates no definition reads any more (removed or
// changed): their memory goes. It tells whether it dropped any.
func (m *model) dropUnreadAggs(prof *profile) bool {
	if !prof.anyAgg(func(key sym) bool { return !m.aggKeys[key.Value()] }) {
		return false
	}
	prof.unpack()
	n := len(prof.aggs())
	prof.l.Aggs = slices.DeleteFunc(prof.l.Aggs, func(a agg) bool { return !m.aggKeys[a.Key.Value()] })
	return len(prof.aggs()) != n
}

// syncRemoved forgets what was sent of the definitions removed from the config: the members
// of a removed audience get false once (under the trait key and source kept in the
// partition's metadata). changed tells whether anything was forgotten.
func (s *Service) syncRemoved(out []*kgo.Record, part *partition, prof *profile, now int64, cc *changeCounter) (_ []*kgo.Record, changed bool) {
	var removed []sent // (rare: only after definitions left the config)
	for e := range prof.Synced.all() {
		sid := e.id()
		kind, id := sid[:1], sid[2:]
		if (kind == "a" && s.model.audienceByID(id) != nil) || (kind == "t" && s.model.traitByID[id] != nil) {
			continue // still in the config
		}
		removed = append(removed, e)
	}
	for _, e := range removed {
		sid := e.id()
		if md, ok := part.meta.Defs[sid]; ok && sid[:1] == "a" {
			out = s.membership(out, prof, md.out(), sid[2:], false, now)
			cc.leave(sid)
		}
		prof.setSynced(sid, "", 0, false)
		changed = true
	}
	return out, changed
}

// syncYieldEvery is how many profiles a sync evaluates between two releases of the lock of
// the service's state (about 20 ms of work).
const syncYieldEvery = 4096

// syncPartition syncs every profile of the partition (at most MaxChangesPerTransaction
// identify calls; past it a new tick continues in the next transaction) and records the
// synced definitions in the partition's metadata.
func (s *Service) syncPartition(b *batch, p int32, part *partition) []*kgo.Record {
	start := time.Now()
	out := b.out
	if s.deps.Tracer.Enabled() { // a span per sync batch, a trace of its own (docs/operations.md#tracing)
		span, _ := s.deps.Tracer.Start(platform.TraceContext{}, "audiences sync", platform.SpanInternal, attribute.Int("tributary.partition", int(p)))
		n := len(out)
		defer func() {
			span.SetAttributes(attribute.Int("tributary.change.count", len(out)-n), attribute.Bool("tributary.sync.complete", part.pending == nil))
			span.End()
		}()
	}
	if part.pass == nil {
		// A new pass over every profile the partition holds now.
		part.pass = &changeCounter{joins: map[string]int{}, leaves: map[string]int{}, members: map[string]int{}}
		part.pending = make([]string, 0, len(part.profiles))
		for id := range part.profiles {
			part.pending = append(part.pending, id)
		}
	}
	cc := part.pass
	before, changed := len(out), cc.n
	for i := 0; len(part.pending) > 0 && len(out)-before < s.cfg.MaxChangesPerTransaction; i++ {
		if i%syncYieldEvery == syncYieldEvery-1 {
			// Let the profile API's readers in: a sync of a large partition takes seconds.
			// The sync goes through its own list of ids, not the map readers read.
			s.mu.Unlock()
			s.mu.Lock()
		}
		id := part.pending[len(part.pending)-1]
		part.pending = part.pending[:len(part.pending)-1]
		if prof := part.profiles[id]; prof != nil { // else deleted meanwhile
			out = s.syncProfile(out, part, prof, b.now, false, cc)
		}
	}
	if cc.n > changed {
		b.touched[p] = part
	}
	if complete := len(part.pending) == 0; complete {
		part.pending, part.pass = nil, nil
		defs := map[string]metaDef{}
		for _, d := range s.model.audiences {
			defs[d.sid] = metaDef{Key: d.key, Source: d.source, Version: d.version, Output: d.output}
		}
		for _, d := range s.model.traits {
			defs[d.sid] = metaDef{Key: d.key, Source: d.source, Version: d.version}
		}
		keepUnsynced(defs, part, s.model)
		if !maps.Equal(defs, part.meta.Defs) {
			part.meta.Defs = defs
			b.touch(p, part, metaKey)
		}
		part.synced = time.UnixMilli(b.now)
		s.recordSync(p, cc, part.synced)
	} else {
		out = append(out, s.tickRecord(p, true))
	}
	s.metrics.syncSeconds.Observe(time.Since(start).Seconds())
	return out
}

// recordSync keeps the figures of partition p's completed sync for the audience API
// (GET /v1/audiences/{id}) and drops those of the definitions no longer in the config.
func (s *Service) recordSync(p int32, cc *changeCounter, at time.Time) {
	ids := map[string]bool{}
	for _, d := range s.model.audiences {
		ids[d.sid] = true
	}
	for _, d := range s.model.traits {
		ids[d.sid] = true
	}
	for id := range s.stats {
		if !ids[id] {
			delete(s.stats, id)
		}
	}
	for id := range ids {
		st := s.stats[id]
		if st == nil {
			st = &audienceStats{joins: map[int32]int{}, leaves: map[int32]int{}, members: map[int32]int{}}
			s.stats[id] = st
		}
		st.lastSync = at
		st.joins[p], st.leaves[p], st.members[p] = cc.joins[id], cc.leaves[id], cc.members[id]
	}
}
