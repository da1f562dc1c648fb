package router

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// digestSize is the size of one (source, messageId) digest: the first 16 bytes of its
// SHA-256. A false match — two different messages taken for one, the second dropped — needs
// a 128-bit collision: with a billion digests remembered, about one chance in 10^20; SHA-256
// (not a fast hash) because message ids are chosen by clients, who must not be able to craft
// a collision with another message.
const digestSize = 16

type digest [digestSize]byte

func digestOf(sourceID, messageID []byte) digest {
	h := sha256.New()
	h.Write(sourceID)
	h.Write([]byte{0})
	h.Write(messageID)
	var d digest
	copy(d[:], h.Sum(make([]byte, 0, sha256.Size)))
	return d
}

// maxDigestsPerRecord bounds one router.dedupe record: 32,768 digests, 512 KiB, under the
// pipe's producer batch limit of 1 MiB.
const maxDigestsPerRecord = 32 << 10

// dedupe remembers the (source, messageId) pairs the router routed within the window, per
// tracking.events partition it owns, so a message sent twice — a client retrying after a
// timeout whose write did land, a producer's retry, a batch read again — is routed once
// (docs/routing.md#de-duplication).
//
// What a committed batch routed is in router.dedupe (one record per batch and input
// partition, written to the same partition number, in the batch's transaction: it commits
// with the deliveries and the offsets, or not at all). A partition's memory is dropped when
// the partition is assigned, revoked or lost, and restored from router.dedupe (the records of
// the last window) before the first record of the partition is routed, so a restarted router
// or the next owner of a partition remembers what its predecessor routed. A batch's digests
// are pending until the pipe says the batch was handed on (ended); an aborted batch's are
// forgotten, since its records are read again.
//
// Memory is bounded by maxEntries digests (about 75 bytes each): beyond it, the oldest are
// forgotten early, which shortens the window in effect (the oldest-age metric shows it).
type dedupe struct {
	window     time.Duration
	maxEntries int
	topic      string
	kafka      platform.KafkaSettings
	opts       []kgo.Opt
	logger     zerolog.Logger
	now        func() time.Time

	mu      sync.Mutex
	parts   map[int32]*dedupePart // partitions whose memory is restored
	entries int
	// pending are the digests of the batch being routed, by partition, in order.
	pending    map[int32][]digest
	pendingSet map[digest]struct{}
}

// dedupePart is one partition's memory: when each digest was routed, and the digests in the
// order they were routed, in chunks (one per batch).
type dedupePart struct {
	seen   map[digest]int64 // unix milliseconds
	chunks []dedupeChunk
}

type dedupeChunk struct {
	at      int64
	digests []digest
}

func newDedupe(cfg Config, kafka platform.KafkaSettings, opts []kgo.Opt, logger zerolog.Logger) *dedupe {
	return &dedupe{
		window: cfg.DedupeWindow, maxEntries: cfg.DedupeMaxEntries, topic: cfg.DedupeTopic,
		kafka: kafka, opts: opts, logger: logger, now: time.Now,
		parts: map[int32]*dedupePart{}, pending: map[int32][]digest{}, pendingSet: map[digest]struct{}{},
	}
}

// reset forgets the partitions' memory; it is restored again before their next record is
// routed. Called when tracking.events partitions are assigned, revoked or lost.
func (d *dedupe) reset(partitions []int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range partitions {
		if part, ok := d.parts[p]; ok {
			d.entries -= len(part.seen)
			delete(d.parts, p)
		}
	}
}

// prepare restores the memory of every partition of fs not restored yet. It reads
// router.dedupe, so it may take a while after a rebalance; it runs before the batch's
// transaction has written anything, so the transaction timeout does not run meanwhile.
func (d *dedupe) prepare(ctx context.Context, fs kgo.Fetches) error {
	var missing []int32
	d.mu.Lock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if _, ok := d.parts[p.Partition]; !ok && len(p.Records) > 0 && !slices.Contains(missing, p.Partition) {
			missing = append(missing, p.Partition)
		}
	})
	d.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	start := time.Now()
	restored, err := d.restore(ctx, missing)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for p, part := range restored {
		if old, ok := d.parts[p]; ok {
			d.entries -= len(old.seen)
		}
		d.parts[p] = part
		d.entries += len(part.seen)
		n += len(part.seen)
	}
	d.evictLocked(d.now().UnixMilli())
	d.logger.Info().Ints32("partitions", missing).Int("digests", n).Dur("took", time.Since(start)).
		Msg("de-duplication memory restored from " + d.topic)
	return nil
}

// restore reads the last window of router.dedupe's partitions, up to their last stable
// offsets: what committed transactions wrote.
func (d *dedupe) restore(ctx context.Context, partitions []int32) (map[int32]*dedupePart, error) {
	out := make(map[int32]*dedupePart, len(partitions))
	for _, p := range partitions {
		out[p] = &dedupePart{seen: map[digest]int64{}}
	}
	since := d.now().Add(-d.window).UnixMilli()
	// A missing topic or partition (a cluster whose topics were not created again after an
	// upgrade) is waited for like a broker outage, not a reason to stop routing for good.
	err := platform.ReadCommittedRange(ctx, d.kafka, d.logger, d.opts, d.topic, partitions, since, func(r *kgo.Record) {
		if at := r.Timestamp.UnixMilli(); at >= since {
			out[r.Partition].add(at, digestsOf(r.Value))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// digestsOf splits a router.dedupe value into its digests (a trailing partial one is ignored).
func digestsOf(v []byte) []digest {
	ds := make([]digest, len(v)/digestSize)
	for i := range ds {
		copy(ds[i][:], v[i*digestSize:])
	}
	return ds
}

func (p *dedupePart) add(at int64, ds []digest) {
	for _, dg := range ds {
		p.seen[dg] = at
	}
	p.chunks = append(p.chunks, dedupeChunk{at: at, digests: ds})
}

// seenBefore reports whether partition p routed (sourceID, messageID) within the window, and
// if not, remembers it as pending in the batch being routed. prepare has restored p.
func (d *dedupe) seenBefore(p int32, sourceID, messageID []byte, now int64) bool {
	dg := digestOf(sourceID, messageID)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.pendingSet[dg]; ok {
		return true
	}
	if part, ok := d.parts[p]; ok {
		if at, ok := part.seen[dg]; ok && now-at < d.window.Milliseconds() {
			return true
		}
	}
	d.pendingSet[dg] = struct{}{}
	d.pending[p] = append(d.pending[p], dg)
	return false
}

// records returns the router.dedupe records of the batch's pending digests, one per
// partition (more past maxDigestsPerRecord), timestamped at.
func (d *dedupe) records(at time.Time) []*kgo.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*kgo.Record
	for p, ds := range d.pending {
		for len(ds) > 0 {
			n := min(len(ds), maxDigestsPerRecord)
			v := make([]byte, 0, n*digestSize)
			for _, dg := range ds[:n] {
				v = append(v, dg[:]...)
			}
			out = append(out, &kgo.Record{Topic: d.topic, Partition: p, Value: v, Timestamp: at})
			ds = ds[n:]
		}
	}
	return out
}

// ended ends the batch: handed on, its pending digests are remembered as routed at its
// time; otherwise they are forgotten (its records are read again).
func (d *dedupe) ended(handedOn bool, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if handedOn {
		ms := at.UnixMilli()
		for p, ds := range d.pending {
			part, ok := d.parts[p]
			if !ok { // reset while the batch was routed: restored again from the topic
				continue
			}
			before := len(part.seen)
			part.add(ms, ds)
			d.entries += len(part.seen) - before
		}
		d.evictLocked(d.now().UnixMilli())
	}
	clear(d.pending)
	clear(d.pendingSet)
}

// evictLocked forgets the chunks older than the window, then the oldest chunks while more
// than maxEntries digests are remembered.
func (d *dedupe) evictLocked(now int64) {
	cutoff := now - d.window.Milliseconds()
	for {
		var oldest *dedupePart
		for _, part := range d.parts {
			if len(part.chunks) > 0 && (oldest == nil || part.chunks[0].at < oldest.chunks[0].at) {
				oldest = part
			}
		}
		if oldest == nil || (oldest.chunks[0].at >= cutoff && d.entries <= d.maxEntries) {
			return
		}
		c := oldest.chunks[0]
		oldest.chunks[0] = dedupeChunk{}
		oldest.chunks = oldest.chunks[1:]
		for _, dg := range c.digests {
			if at, ok := oldest.seen[dg]; ok && at <= c.at {
				delete(oldest.seen, dg)
				d.entries--
			}
		}
	}
}

// stats returns how many digests are remembered and the age of the oldest.
func (d *dedupe) stats() (entries int, oldest time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	first := int64(-1)
	for _, part := range d.parts {
		if len(part.chunks) > 0 && (first < 0 || part.chunks[0].at < first) {
			first = part.chunks[0].at
		}
	}
	if first >= 0 {
		oldest = d.now().Sub(time.UnixMilli(first))
	}
	return d.entries, oldest
}

// partitioner writes router.dedupe records to the partition they name (the input partition
// whose batch they record) and every other record as franz-go's default partitioner does
// (keyed records by the murmur2 hash of their key, as Kafka's Java client).
type partitioner struct {
	dedupeTopic string
	manual, def kgo.Partitioner
}

func newPartitioner(dedupeTopic string) kgo.Partitioner {
	return partitioner{dedupeTopic: dedupeTopic, manual: kgo.ManualPartitioner(),
		def: kgo.UniformBytesPartitioner(64<<10, true, true, nil)}
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.dedupeTopic {
		return p.manual.ForTopic(topic)
	}
	return p.def.ForTopic(topic)
}
