package audiences

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Backfill (docs/audiences.md#backfill). An aggregate new to a partition is fed by the live
// path from the partition's position on tracking.events when the partition first processed a
// record with it in the config (From, recorded in the partition's metadata in that record's
// transaction), and by a backfill from everything retained before From: a side reader reads
// tracking.events [start, From) outside the lock into profiles of its own, and the result is
// merged into the partition's profiles in the partition's own transactions (in chunks, with a
// cursor in the metadata). The two ranges meet at From and do not overlap: no event counts
// twice or is missed. A definition that reads an aggregate still being backfilled sends
// nothing until the aggregate is done.

// backfillMeta is the backfill state of one aggregate on one partition (partMeta.Aggs).
type backfillMeta struct {
	// From is the first tracking.events offset the live path fed the aggregate with.
	From int64 `json:"from"`
	// Done: the backfill is merged (or none was needed).
	Done bool `json:"done,omitempty"`
	// Merged is the last profile id whose backfilled state is merged (in id order).
	Merged string `json:"merged,omitempty"`
}

// backfillJob is the backfill of the aggregates of one partition that share From.
type backfillJob struct {
	p    int32
	from int64
	keys []string
	// progress, read by the API
	read     atomic.Int64
	firstAt  atomic.Int64 // ms of the first record read
	lastAt   atomic.Int64 // ms of the last record read
	finished atomic.Bool
	// the result: by profile id, the backfilled aggregates (keys only); ids in order
	profiles map[string]*profile
	ids      []string
}

// backfills are the service's backfill jobs, by partition (guarded by s.mu).
type backfills struct {
	jobs map[int32]*backfillJob
	wake chan struct{}
}

// noteAggs records, at the first record of partition p processed with a new model, the
// aggregates new to the partition (From: the partition's next tracking.events offset), and
// forgets the removed ones. Under s.mu.
func (s *Service) noteAggs(b *batch, p int32, part *partition) {
	part.aggsModel = s.model
	m := &part.meta
	changed := false
	if m.Aggs == nil {
		// Metadata of a partition that never recorded aggregates (a first start, or an
		// earlier version): what the config reads now was fed from the partition's start.
		m.Aggs = make(map[string]backfillMeta, len(s.model.aggKeys))
		for k := range s.model.aggKeys {
			m.Aggs[k] = backfillMeta{From: part.next}
		}
		changed = true
	} else {
		for k := range m.Aggs {
			if !s.model.aggKeys[k] {
				delete(m.Aggs, k)
				changed = true
			}
		}
		var fresh []string
		for k := range s.model.aggKeys {
			if _, ok := m.Aggs[k]; !ok {
				m.Aggs[k] = backfillMeta{From: part.next}
				fresh = append(fresh, k)
				changed = true
			}
		}
		if len(fresh) > 0 {
			// State a profile kept of an aggregate removed and added again before a sync
			// dropped it: the backfill rebuilds it.
			for id, prof := range part.profiles {
				if prof.anyAgg(func(key sym) bool { return slices.Contains(fresh, key.Value()) }) {
					prof.unpack()
					prof.l.Aggs = slices.DeleteFunc(prof.l.Aggs, func(a agg) bool { return slices.Contains(fresh, a.Key.Value()) })
					b.touch(p, part, id)
				}
			}
		}
	}
	if changed {
		b.touch(p, part, metaKey)
	}
	s.refreshPending(part)
}

// refreshPending recomputes the aggregates of the model that are not backfilled yet on the
// partition, and wakes the backfill runner when there are some.
func (s *Service) refreshPending(part *partition) {
	part.unfilled = nil
	for k := range s.model.aggKeys {
		if st, ok := part.meta.Aggs[k]; !ok || !st.Done {
			if part.unfilled == nil {
				part.unfilled = map[string]bool{}
			}
			part.unfilled[k] = true
		}
	}
	if len(part.unfilled) > 0 {
		select {
		case s.bf.wake <- struct{}{}:
		default:
		}
	}
}

// ready tells whether every aggregate of keys is backfilled on the partition.
func (part *partition) ready(keys []string) bool {
	if len(part.unfilled) == 0 {
		return true
	}
	for _, k := range keys {
		if part.unfilled[k] {
			return false
		}
	}
	return true
}

// committedOffsets are the group's committed tracking.events offsets of partitions (0 for one
// without a commit: the group reads it from its start).
func (s *Service) committedOffsets(ctx context.Context, partitions []int32) (map[int32]int64, error) {
	resps, err := kadm.NewClient(s.producer).FetchOffsetsForTopics(ctx, s.cfg.Group, s.cfg.EventsTopic)
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of %s: %w", s.cfg.Group, err)
	}
	out := make(map[int32]int64, len(partitions))
	for _, p := range partitions {
		if r, ok := resps.Lookup(s.cfg.EventsTopic, p); ok && r.Err == nil && r.At > 0 {
			out[p] = r.At
		}
	}
	return out, nil
}

// runBackfills runs the backfills of the owned partitions, one at a time, until ctx is done.
func (s *Service) runBackfills(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.bf.wake:
		case <-t.C:
		}
		for {
			job := s.nextBackfill()
			if job == nil {
				break
			}
			if err := s.backfill(ctx, job); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.logger.Warn().Err(err).Int32("partition", job.p).Msg("backfilling; retrying")
				s.mu.Lock()
				if s.bf.jobs[job.p] == job {
					delete(s.bf.jobs, job.p)
					s.metrics.backfillRunning.Set(float64(len(s.bf.jobs)))
				}
				s.mu.Unlock()
				break
			}
		}
	}
}

// nextBackfill is a job for an owned partition with aggregates to backfill and none running;
// nil: none.
func (s *Service) nextBackfill() *backfillJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		part := s.parts[p]
		if !part.restored || len(part.unfilled) == 0 || s.bf.jobs[p] != nil {
			continue
		}
		// The aggregates whose From is known (recorded): the oldest From first.
		var job *backfillJob
		for _, k := range slices.Sorted(maps.Keys(part.unfilled)) {
			st, ok := part.meta.Aggs[k]
			if !ok || st.Done {
				continue
			}
			if job == nil {
				job = &backfillJob{p: p, from: st.From}
			}
			if st.From == job.from {
				job.keys = append(job.keys, k)
			}
		}
		if job != nil {
			s.bf.jobs[p] = job
			s.metrics.backfillRunning.Set(float64(len(s.bf.jobs)))
			return job
		}
	}
	return nil
}

// backfill reads tracking.events partition job.p up to job.from into profiles of its own,
// feeding only the job's aggregates, then asks the partition to merge them (a tick).
func (s *Service) backfill(ctx context.Context, job *backfillJob) error {
	start := time.Now()
	s.mu.RLock()
	m := s.model
	s.mu.RUnlock()
	now := s.now().UnixMilli()
	sub := &model{aggsByEvent: map[string][]*aggDef{}}
	var since int64 // ms; 0: the whole retention
	bounded := true
	for _, k := range job.keys {
		var d *aggDef
		for _, a := range m.aggs {
			if a.key == k {
				d = a
			}
		}
		if d == nil {
			continue // removed meanwhile: the partition forgets it
		}
		sub.aggsByEvent[d.event] = append(sub.aggsByEvent[d.event], d)
		w := m.lookback(k)
		if w == 0 {
			bounded = false
		} else if t := now - w - time.Hour.Milliseconds(); since == 0 || t < since {
			// (an hour more: events whose timestamp is a little later than their record's)
			since = t
		}
	}
	if !bounded {
		since = 0
	}
	job.profiles = map[string]*profile{}
	var unavailable error
	err := platform.ReadCommittedRange(ctx, s.deps.Kafka, s.logger, append(slices.Clone(s.deps.KafkaOpts), kgo.FetchMaxBytes(64<<20)),
		s.cfg.EventsTopic, []int32{job.p}, since, func(r *kgo.Record) {
			if r.Offset >= job.from || unavailable != nil || headerIs(r, HeaderOrigin, OriginAudiences) {
				return
			}
			value, ok, err := s.open(r)
			if err != nil {
				unavailable = err
			}
			if !ok {
				return
			}
			job.read.Add(1)
			s.metrics.backfillEvents.Inc()
			if job.firstAt.Load() == 0 {
				job.firstAt.Store(r.Timestamp.UnixMilli())
			}
			job.lastAt.Store(r.Timestamp.UnixMilli())
			msg, err := schemas.DecodeMessage(value)
			if err != nil {
				return
			}
			id := msg.Key()
			if id == "" {
				return
			}
			prof := job.profiles[id]
			if prof == nil {
				prof = &profile{ID: id}
				job.profiles[id] = prof
			}
			if prof.repeated(messageHash(msg.MessageID)) {
				return
			}
			if msg.Type == schemas.TypeTrack && msg.Event != "" {
				sub.apply(prof, msg.Event, msg.Properties, eventTime(msg, r.Timestamp, now), now)
			}
		})
	if err == nil && unavailable != nil {
		err = fmt.Errorf("opening a sealed record: %w", unavailable)
	}
	if err != nil {
		return err
	}
	for id, prof := range job.profiles {
		if len(prof.aggs()) == 0 {
			delete(job.profiles, id)
		}
	}
	job.ids = slices.Sorted(maps.Keys(job.profiles))
	job.finished.Store(true)
	s.logger.Info().Int32("partition", job.p).Strs("aggregates", job.keys).Int64("offset", job.from).Int64("events", job.read.Load()).
		Int("profiles", len(job.ids)).Str("took", time.Since(start).String()).Msg("backfill read; merging")
	s.produceTick(job.p, false)
	return nil
}

// lookback is how far back (ms) the definitions reading aggregate key look: their longest
// within; 0: without bound (a definition without within, or a kind that has none).
func (m *model) lookback(key string) int64 {
	var w int64
	for _, t := range m.traits {
		if t.agg != nil && t.agg.key == key {
			if t.within == 0 {
				return 0
			}
			w = max(w, t.within)
		}
	}
	for _, a := range m.audiences {
		var unbounded bool
		a.root.walk(func(n *node) {
			if n.op == "event" && n.agg != nil && n.agg.key == key {
				if n.within == 0 {
					unbounded = true
				}
				w = max(w, n.within)
			}
		})
		if unbounded {
			return 0
		}
	}
	return w
}

// backfillChunk bounds the profiles one transaction merges from a backfill.
const backfillChunk = 20_000

// mergeBackfill merges the finished backfill of partition p, if any, into its profiles: up
// to backfillChunk of them in this transaction (the cursor in the metadata commits with
// them), the aggregates marked done with the last chunk. Under s.mu.
func (s *Service) mergeBackfill(b *batch, p int32, part *partition) {
	job := s.bf.jobs[p]
	if job == nil || !job.finished.Load() {
		return
	}
	// The job is for the committed From of its aggregates (an aborted batch that recorded
	// another one restored the metadata): else it is read again.
	cursor := ""
	for _, k := range job.keys {
		st, ok := part.meta.Aggs[k]
		if !ok || st.Done || st.From != job.from {
			delete(s.bf.jobs, p)
			s.metrics.backfillRunning.Set(float64(len(s.bf.jobs)))
			return
		}
		cursor = st.Merged
	}
	i, _ := slices.BinarySearch(job.ids, cursor)
	if i < len(job.ids) && job.ids[i] == cursor {
		i++
	}
	n := 0
	for ; i < len(job.ids) && n < backfillChunk; i++ {
		id := job.ids[i]
		cursor = id
		n++
		src := job.profiles[id]
		prof := part.profiles[id]
		switch {
		case prof == nil || prof.Suppressed:
			// deleted or suppressed: its history is not brought back
		case prof.mergedInto() != "":
			// an id merged into another profile: its history counts there
			b.out = append(b.out, s.handOff(prof.mergedInto(), op{Op: opAbsorb, Into: prof.mergedInto(), Profile: &profile{ID: id, l: &lists{Aggs: src.aggs()}}}))
		default:
			for j, aggs := 0, src.aggs(); j < len(aggs); j++ {
				prof.agg(aggs[j].Key, true).mergeOlder(&aggs[j], b.now)
			}
			b.touch(p, part, id)
		}
	}
	done := i >= len(job.ids)
	for _, k := range job.keys {
		st := part.meta.Aggs[k]
		st.Merged, st.Done = cursor, done
		if done {
			st.Merged = ""
		}
		part.meta.Aggs[k] = st
	}
	b.touch(p, part, metaKey)
	if done {
		delete(s.bf.jobs, p)
		s.metrics.backfillRunning.Set(float64(len(s.bf.jobs)))
		s.refreshPending(part)
		s.logger.Info().Int32("partition", p).Strs("aggregates", job.keys).Msg("backfill done")
	} else {
		b.out = append(b.out, s.tickRecord(p, false))
	}
}

// mergeOlder merges o, the state of the same aggregate over older events, into a.
func (a *agg) mergeOlder(o *agg, now int64) {
	if older := o.ser(); older != nil {
		a.serRW().merge(older, now)
	}
	if ofirst, olast, ok := o.fl(); ok {
		first, last, ok := a.fl()
		if !ok || ofirst.At <= first.At {
			first = ofirst
		}
		if !ok || olast.At > last.At {
			last = olast
		}
		a.setFL(first, last)
	}
	for _, f := range o.freqs() {
		a.addFreq(f.V, f.N, f.First)
	}
	if older := o.uniques(); len(older) > 0 {
		// The older values were seen first.
		live := slices.Clone(a.uniques())
		a.st = nil
		for _, v := range older {
			a.addUnique(v)
		}
		for _, v := range live {
			a.addUnique(v)
		}
	}
}

// BackfillView is the backfill progress of a definition (schemas.BackfillView).
type BackfillView = schemas.BackfillView

// localBackfill is the backfill progress of the definition with the aggregate keys over the
// partitions this instance owns; nil when it reads no aggregate. Under s.mu (read).
func (s *Service) localBackfill(keys []string) *BackfillView {
	if len(keys) == 0 {
		return nil
	}
	v := &BackfillView{State: "done"}
	for p, part := range s.parts {
		if !part.restored {
			continue
		}
		v.Partitions++
		if part.ready(keys) {
			v.PartitionsDone++
			continue
		}
		v.State = "running"
		if job := s.bf.jobs[p]; job != nil && slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(job.keys, k) }) {
			v.EventsRead += job.read.Load()
			if at := job.firstAt.Load(); at > 0 && (v.From == "" || recordTime(at) < v.From) {
				v.From = recordTime(at)
			}
			if at := job.lastAt.Load(); at > 0 && recordTime(at) > v.To {
				v.To = recordTime(at)
			}
		}
	}
	return v
}

// readAggs sets the aggregate keys each definition reads (through the computed traits and
// audiences its rule names too).
func (m *model) readAggs() {
	for _, t := range m.traits {
		if t.agg != nil {
			t.aggKeys = []string{t.agg.key}
		}
	}
	for _, a := range m.audiences {
		seen := map[*audienceDef]bool{}
		var visit func(d *audienceDef)
		visit = func(d *audienceDef) {
			if d == nil || d.root == nil || seen[d] {
				return
			}
			seen[d] = true
			d.root.walk(func(n *node) {
				switch {
				case n.agg != nil:
					a.aggKeys = appendNew(a.aggKeys, n.agg.key)
				case n.ctrait != nil && n.ctrait.agg != nil:
					a.aggKeys = appendNew(a.aggKeys, n.ctrait.agg.key)
				case n.aud != nil:
					visit(n.aud)
				}
			})
		}
		visit(a)
	}
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// mergeBackfills merges the finished backfills of the batch's partitions (mergeBackfill).
func (s *Service) mergeBackfills(b *batch, fs kgo.Fetches) {
	var done []int32
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		p := fp.Partition
		part := s.parts[p]
		if part == nil || !part.restored || slices.Contains(done, p) {
			return
		}
		done = append(done, p)
		if part.aggsModel != s.model {
			s.noteAggs(b, p, part)
		}
		s.mergeBackfill(b, p, part)
	})
}

// keepUnsynced keeps, in the synced definitions a partition records, what was last synced of
// a definition that is not backfilled yet (a sync skipped it): the previous version's entry,
// or none.
func keepUnsynced(defs map[string]metaDef, part *partition, m *model) {
	if len(part.unfilled) == 0 {
		return
	}
	keep := func(sid string, keys []string) {
		if part.ready(keys) {
			return
		}
		if old, ok := part.meta.Defs[sid]; ok {
			defs[sid] = old
		} else {
			delete(defs, sid)
		}
	}
	for _, d := range m.audiences {
		keep(d.sid, d.aggKeys)
	}
	for _, d := range m.traits {
		keep(d.sid, d.aggKeys)
	}
}

// addBackfill adds another instance's backfill progress to v's.
func addBackfill(v *AudienceView, o *BackfillView) {
	if o == nil {
		return
	}
	if v.Backfill == nil {
		v.Backfill = &BackfillView{State: "done"}
	}
	b := v.Backfill
	if o.State == "running" {
		b.State = "running"
	}
	b.PartitionsDone += o.PartitionsDone
	b.Partitions += o.Partitions
	b.EventsRead += o.EventsRead
	if o.From != "" && (b.From == "" || o.From < b.From) {
		b.From = o.From
	}
	if o.To > b.To {
		b.To = o.To
	}
}
