package audiences

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// metaKey is the changelog key of a partition's sync metadata (which audiences it synced,
// with the trait key and source to send false with once an audience is removed).
const metaKey = "\x00meta"

// partition is the state of one owned partition of tracking.events.
type partition struct {
	restored bool
	profiles map[string]*profile
	meta     partMeta
	dirty    map[string]bool // profiles changed in the batch being processed (metaKey: meta)
	synced   time.Time
	// pending are the profiles the sync in progress has still to go through (a sync that
	// sends more than MaxChangesPerTransaction identify calls goes on in the next
	// transactions), and pass counts what it sent so far; nil: no sync in progress.
	pending []string
	pass    *changeCounter
	// deletedAt holds, by user id, when this instance processed the user's deletion (unix ms,
	// the batch's clock): a later-read event of the user accepted before then does not build a
	// profile again (docs/audiences.md#deletion-and-suppression). Kept for deletedAtKept, in
	// memory only.
	deletedAt map[string]int64
	// next is the partition's next tracking.events offset: the group's committed one at the
	// restore, then past each record processed. aggsModel is the model meta.Aggs was last
	// brought up to, and unfilled the model's aggregates still to backfill (backfill.go).
	next      int64
	aggsModel *model
	unfilled  map[string]bool

	// entries are the external ids' entries claimed on this partition, by key (extKey): the
	// profile that claimed the id. A string each rather than a redirect profile (~200 bytes
	// less an id, and nothing for the garbage collector to visit but the two strings); on
	// audiences.state an entry is a redirect as before (docs/audiences.md#identity-resolution).
	entries map[string]string
}

// markDirty notes that the changelog is to get the profile id's new version (metaKey: the
// partition's metadata) at the end of the batch.
func (part *partition) markDirty(id string) {
	if part.dirty == nil {
		part.dirty = map[string]bool{}
	}
	part.dirty[id] = true
}

// setEntry records that the profile into claimed the external id whose key is key.
func (part *partition) setEntry(key, into string) {
	if part.entries == nil {
		part.entries = map[string]string{}
	}
	part.entries[key] = into
}

// lookup is the profile key, or the redirect of an external id's entry (made for the caller:
// the lookups of the APIs, which follow it).
func (part *partition) lookup(key string) *profile {
	if into, ok := part.entries[key]; ok {
		return newRedirect(key, into)
	}
	return part.profiles[key]
}

// held is the number of profiles, redirects, suppression markers and entries the partition
// holds (the tributary_audiences_profiles gauge).
func (part *partition) held() int { return len(part.profiles) + len(part.entries) }

// deletedAtKept is how long partition.deletedAt remembers a deletion: the lateness of an event
// behind a deletion of its user that it covers.
const deletedAtKept = 24 * time.Hour

// partMeta is a partition's sync metadata, the changelog value under metaKey: by synced id
// ("a/<id>", "t/<id>"), the definition last synced.
type partMeta struct {
	Defs map[string]metaDef `json:"defs"`
	// Aggs is the backfill state of each aggregate of the config, by key
	// (docs/audiences.md#backfill); absent in the metadata of earlier versions.
	Aggs map[string]backfillMeta `json:"aggs"`
}

type metaDef struct {
	Key     string `json:"key"`
	Source  string `json:"source"`
	Version string `json:"version"`
	// Output is the audience's output (docs/audiences.md#outputs); absent: identify.
	Output string `json:"output,omitempty"`
}

// partitionOf is the tracking.events partition of a user id.
func (s *Service) partitionOf(id string) int32 {
	// A record and its key made for each id hashed would be most of what a new external id
	// allocates: reused (the partitioner keeps nothing of a keyed record).
	r, _ := s.keyRecs.Get().(*kgo.Record)
	if r == nil {
		r = &kgo.Record{Key: make([]byte, 0, 64)}
	}
	r.Key = append(r.Key[:0], id...)
	p := int32(s.keyPart.Partition(r, int(s.nparts)))
	s.keyRecs.Put(r)
	return p
}

// apiPartitionOf is partitionOf for the API's goroutines; ok is false until the partition
// count is known.
func (s *Service) apiPartitionOf(id string) (p int32, ok bool) {
	s.mu.RLock()
	n := s.nparts
	s.mu.RUnlock()
	if n == 0 {
		return 0, false
	}
	s.apiPart.Lock()
	defer s.apiPart.Unlock()
	return int32(s.apiKey.Partition(&kgo.Record{Key: []byte(id)}, int(n))), true
}

// assigned marks partitions as owned, to be restored before their first record, and asks for
// a tick on each so that they are restored (and readiness reached) without waiting for one.
func (s *Service) assigned(ps []int32) {
	s.mu.Lock()
	for _, p := range ps {
		s.parts[p] = &partition{}
	}
	s.mu.Unlock()
	s.updateReady()
	for _, p := range ps {
		s.produceTick(p, false)
	}
}

// revoked drops the partitions' state: their next owner restores it from the changelog.
func (s *Service) revoked(ps []int32) {
	s.mu.Lock()
	for _, p := range ps {
		delete(s.parts, p)
		delete(s.bf.jobs, p)
	}
	s.metrics.backfillRunning.Set(float64(len(s.bf.jobs)))
	s.recountProfiles()
	s.mu.Unlock()
	s.updateReady()
}

// ended is the pipe's Ended: a batch that did not commit leaves the in-memory state ahead of
// the changelog, so every partition is restored again before its next record.
func (s *Service) ended(committed bool) {
	s.mu.Lock()
	if committed {
		s.held.recycle() // the records were acknowledged: their buffers serve again
		s.mu.Unlock()
		return
	}
	s.held = changelogBufs{} // the client may still hold records: left to the collector
	for p := range s.parts {
		s.parts[p] = &partition{}
	}
	s.mu.Unlock()
	s.updateReady()
}

// updateReady reports the "audiences state" health component ready once every owned
// partition is restored.
func (s *Service) updateReady() {
	if s.deps.Health == nil {
		return
	}
	s.mu.RLock()
	ready := true
	for _, part := range s.parts {
		ready = ready && part.restored
	}
	s.mu.RUnlock()
	s.deps.Health.SetWarming("audiences state", ready)
}

// restoreMissing restores, from the changelog, every partition of fs that is owned but not
// restored yet. It runs before the batch's transaction has written anything.
func (s *Service) restoreMissing(ctx context.Context, fs kgo.Fetches) error {
	var missing []int32
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if part := s.parts[fp.Partition]; part != nil && !part.restored && !slices.Contains(missing, fp.Partition) {
			missing = append(missing, fp.Partition)
		}
	})
	if len(missing) == 0 {
		return nil
	}
	start := time.Now()
	// The restore reads into maps of its own: the profile API need not wait for it (it
	// answers 503 for these partitions meanwhile). s.mu is held again after it.
	s.mu.Unlock()
	restored, err := s.restore(ctx, missing)
	s.mu.Lock()
	if err != nil {
		return err
	}
	n := 0
	for p, part := range restored {
		if cur := s.parts[p]; cur == nil || cur.restored {
			continue // revoked meanwhile (or assigned again and restored by another batch)
		}
		part.restored = true
		s.parts[p] = part
		n += part.held()
	}
	s.metrics.restores.Inc()
	s.recountProfiles()
	s.logger.Info().Ints32("partitions", missing).Int("profiles", n).Str("took", time.Since(start).String()).
		Msg("audiences state restored from " + s.cfg.StateTopic)
	go s.updateReady()
	return nil
}

// recountProfiles sets the profiles gauge to what the owned partitions hold (under s.mu).
func (s *Service) recountProfiles() {
	n := 0
	for _, part := range s.parts {
		n += part.held()
	}
	s.metrics.profiles.Set(float64(n))
}

// restore reads the changelog partitions up to their last stable offsets: what committed
// transactions wrote.
func (s *Service) restore(ctx context.Context, partitions []int32) (map[int32]*partition, error) {
	out := make(map[int32]*partition, len(partitions))
	for _, p := range partitions {
		out[p] = &partition{profiles: map[string]*profile{}, meta: partMeta{Defs: map[string]metaDef{}}}
	}
	var bad int
	var unavailable error
	err := platform.ReadCommittedRange(ctx, s.deps.Kafka, s.logger, append(slices.Clone(s.deps.KafkaOpts), kgo.FetchMaxBytes(64<<20)),
		s.cfg.StateTopic, partitions, 0, func(r *kgo.Record) {
			part := out[r.Partition]
			key := string(r.Key)
			switch {
			case key == metaKey:
				var m partMeta
				if json.Unmarshal(r.Value, &m) == nil && m.Defs != nil {
					part.meta = m
				}
			case len(r.Value) == 0:
				delete(part.profiles, key)
				delete(part.entries, key)
			default:
				// A version sealed with a shredded key is the profile of a deleted user:
				// skipped (counted), as is every older version of it.
				value, ok, err := s.open(r)
				if err != nil && unavailable == nil {
					unavailable = err
				}
				if !ok {
					delete(part.profiles, key)
					delete(part.entries, key)
					return
				}
				if into, ok := entryValue(key, value); ok {
					delete(part.profiles, key)
					part.setEntry(key, into)
					return
				}
				var prof profile
				if err := json.Unmarshal(value, &prof); err != nil {
					bad++
					return
				}
				if prof.ID == "" { // a redirect or a suppression marker: the key is the id
					prof.ID = key
				}
				s.intern.profile(&prof)
				prof.pack()
				delete(part.entries, key)
				part.profiles[key] = &prof
			}
		})
	if err == nil && unavailable != nil {
		err = fmt.Errorf("restoring %s: %w", s.cfg.StateTopic, unavailable)
	}
	if err != nil {
		return nil, err
	}
	offsets, err := s.committedOffsets(ctx, partitions)
	if err != nil {
		return nil, err
	}
	for p, part := range out {
		part.next = offsets[p]
	}
	if bad > 0 {
		s.logger.Warn().Int("records", bad).Msg("skipped audiences.state records that do not decode")
	}
	return out, nil
}
