package audiences

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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
	// decoded is the record being processed decoded ahead (decodeAhead), if it was.
	decoded decodedMessage
}

// decodedMessage is a plain tracking.events record decoded by decodeAhead: its message, or
// why it does not decode (m nil and err nil: not decoded ahead).
type decodedMessage struct {
	m   *schemas.Message
	err error
	// props are the properties of a track event that aggregates read, parsed (propsOK).
	props   schemas.Members
	propsOK bool
}

// ahead is the decoding of a poll's records on a goroutine of its own, a chunk ahead of the
// transform that applies them in order (decodeAhead).
type ahead struct {
	msgs    []decodedMessage
	chunks  chan int // the number of records decoded so far, after each chunk
	upto    int      // what the transform has seen of chunks
	stopped atomic.Bool
	done    chan struct{}
}

// aheadChunk is how many records decodeAhead decodes before telling the transform.
const aheadChunk = 128

// decodeAhead starts decoding the plain messages of tracking.events among recs (not those to
// skip, nor sealed ones: those are opened and decoded in order by process) on a goroutine,
// and parsing the properties of those the aggregates read, so that decoding, a fifth of the
// transform's work, runs beside applying the messages decoded before
// (docs/benchmarks.md#audiences). Decoding is a pure function of the record's
// value; the transform reads each result through message, and calls stop before returning.
// A poll too small to gain is decoded in order (nil).
func (s *Service) decodeAhead(recs []*kgo.Record) *ahead {
	if len(recs) < 2*aheadChunk {
		return nil
	}
	model := s.model // refreshModel is called before, not during, a transform
	a := &ahead{msgs: make([]decodedMessage, len(recs)), chunks: make(chan int, len(recs)/aheadChunk+1), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer close(a.chunks)
		for i, r := range recs {
			if r.Topic == s.cfg.EventsTopic && shred.KeyOf(r) == nil && !headerIs(r, HeaderOrigin, OriginAudiences) {
				m, err := schemas.DecodeMessage(r.Value)
				if err == nil && m == nil {
					err = errors.New("no message")
				}
				d := decodedMessage{m: m, err: err}
				if err == nil && m.Type == schemas.TypeTrack && len(model.aggsByEvent[m.Event]) > 0 {
					d.props, _ = schemas.ParseMembers(m.Properties) // as model.apply does
					d.propsOK = true
				}
				a.msgs[i] = d
			}
			if (i+1)%aheadChunk == 0 || i == len(recs)-1 {
				if a.stopped.Load() {
					return
				}
				a.chunks <- i + 1
			}
		}
	}()
	return a
}

// message is record i's result, waiting for its chunk; zero when it was not decoded ahead.
func (a *ahead) message(i int) decodedMessage {
	if a == nil {
		return decodedMessage{}
	}
	for a.upto <= i {
		n, ok := <-a.chunks
		if !ok {
			return decodedMessage{}
		}
		a.upto = n
	}
	d := a.msgs[i]
	a.msgs[i] = decodedMessage{} // garbage once applied, as a message decoded in order
	return d
}

// stop ends the decoding (the transform stopped early) and waits for its goroutine.
func (a *ahead) stop() {
	if a == nil {
		return
	}
	a.stopped.Store(true)
	<-a.done
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
	recs := make([]*kgo.Record, 0, fs.NumRecords())
	fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	ahead := s.decodeAhead(recs)
	var unavailable error
	for i, r := range recs {
		b.decoded = ahead.message(i)
		if unavailable = s.process(b, r); unavailable != nil {
			break
		}
	}
	b.decoded = decodedMessage{}
	ahead.stop()
	if unavailable != nil {
		return nil, fmt.Errorf("opening a sealed record: %w", unavailable)
	}
	s.metrics.events.Add(float64(b.events))
	b.encodeLinks()
	b.out = s.changelogs(b.out, b.touched)
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
		m, err := b.decoded.m, b.decoded.err
		if m == nil && err == nil {
			m, err = schemas.DecodeMessage(value)
		}
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
	if x := snap.Identity(); x != s.rules.Load().from {
		// The config's identity rules changed: in force from this poll on, as Segment's
		// rule changes apply to new data (docs/audiences.md#identity-rules).
		rules, err := compileRules(&s.cfg, x)
		if err != nil { // the config was validated: only a bad setting beneath it gets here
			s.logger.Error().Err(err).Msg("the config's identity rules do not compile; the rules in force stay")
			return
		}
		s.rules.Store(rules)
		s.logger.Info().Bool("from_config", x != nil).Msg("identity rules in force")
	}
}

// touch marks the profile id of partition p as changed in this batch (changelog).
func (b *batch) touch(p int32, part *partition, id string) {
	part.markDirty(id)
	b.touched[p] = part
}

// changelogs appends the changelog records of every touched partition. A partition's
// records are made of its own profiles alone, so partitions are encoded side by side, one
// goroutine each: encoding is a third of a transaction's work, and the transform is the
// one loop a poll waits for (docs/benchmarks.md#audiences). The caller holds s.mu.
func (s *Service) changelogs(out []*kgo.Record, touched map[int32]*partition) []*kgo.Record {
	if len(touched) <= 1 {
		for p, part := range touched {
			out = s.changelog(out, p, part)
		}
		return out
	}
	each := make([][]*kgo.Record, 0, len(touched))
	var wg sync.WaitGroup
	bufs := make([]changelogBufs, len(touched))
	for p, part := range touched {
		each = append(each, nil)
		dst, held := &each[len(each)-1], &bufs[len(each)-1]
		wg.Go(func() { *dst = s.changelogInto(nil, p, part, held) })
	}
	wg.Wait()
	for i, recs := range each {
		out = append(out, recs...)
		s.held.recs = append(s.held.recs, bufs[i].recs...)
		s.held.chunks = append(s.held.chunks, bufs[i].chunks...)
	}
	return out
}

// changelogBufs are the buffers of a transaction's changelog records: their slabs of records
// and the chunks of their values. Once the transaction has committed, Kafka has acknowledged
// every record and nothing refers to them any more: Service.ended hands them to the next
// transactions (recycle), which then allocate and collect less. A transaction that did not
// commit may have records still held by the client: its buffers are left to the collector.
type changelogBufs struct {
	recs   []*[]kgo.Record
	chunks []*[]byte
}

// recordSlabs and valueChunkPool hold the buffers of committed transactions (changelogBufs).
var (
	recordSlabs    sync.Pool
	valueChunkPool sync.Pool
)

// recycle hands the buffers to the next transactions.
func (c *changelogBufs) recycle() {
	for _, r := range c.recs {
		clear((*r)[:cap(*r)]) // no record keeps a value, key or context of a last transaction
		recordSlabs.Put(r)
	}
	for _, b := range c.chunks {
		*b = (*b)[:0]
		valueChunkPool.Put(b)
	}
	*c = changelogBufs{}
}

// recordSlab is a zeroed slab of n records, recycled when one is large enough.
func (c *changelogBufs) recordSlab(n int) []kgo.Record {
	if c != nil {
		if r, ok := recordSlabs.Get().(*[]kgo.Record); ok && cap(*r) >= n {
			*r = (*r)[:n]
			c.recs = append(c.recs, r)
			return *r
		}
		r := make([]kgo.Record, n, max(n, 1024))
		c.recs = append(c.recs, &r)
		return r
	}
	return make([]kgo.Record, n)
}

// changelog appends the records of the partition's changed profiles (a tombstone for a
// removed one) and clears its dirty set. It reads and writes the partition and its profiles
// only (and the process-wide tables that have their own locks), so that changelogs may run
// it for several partitions at once.
func (s *Service) changelog(out []*kgo.Record, p int32, part *partition) []*kgo.Record {
	return s.changelogInto(out, p, part, nil)
}

// changelogInto is changelog with its buffers noted in bufs (nil: not to be recycled).
func (s *Service) changelogInto(out []*kgo.Record, p int32, part *partition, bufs *changelogBufs) []*kgo.Record {
	// The records and their keys in one allocation each, their values in shared chunks (a
	// value encoded in a scratch buffer, then copied): not one allocation per record and more
	// as its JSON grows.
	recs := bufs.recordSlab(len(part.dirty))
	n := 0
	for id := range part.dirty {
		n += len(id)
	}
	keys := make([]byte, 0, n)
	values := valueChunks{bufs: bufs}
	scratch := changelogScratch.Get().(*[]byte)
	defer changelogScratch.Put(scratch)
	out = slices.Grow(out, len(part.dirty))
	i := 0
	for id := range part.dirty {
		k := len(keys)
		keys = append(keys, id...)
		r := &recs[i]
		i++
		r.Topic, r.Partition, r.Key = s.cfg.StateTopic, p, keys[k:len(keys):len(keys)]
		if id == metaKey {
			r.Value, _ = json.Marshal(part.meta)
		} else if into, ok := part.entries[id]; ok { // an external id's entry: a redirect
			b := append((*scratch)[:0], `{"mergedInto":`...)
			b = append(schemas.AppendJSONString(b, into), '}')
			r.Value, *scratch = values.copy(b), b
		} else if prof := part.profiles[id]; prof != nil {
			b := prof.changelogValue((*scratch)[:0])
			r.Value, *scratch = values.copy(b), b
			prof.pack() // written: its counters and aggregates packed until changed again
		}
		out = append(out, r)
	}
	part.dirty = nil
	return out
}

// changelogScratch are the buffers changelog encodes a value in before copying it.
var changelogScratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// valueChunks hands out the values of one changelog from chunks of valueChunkSize bytes
// (a larger value gets a buffer of its own), noted in bufs when not nil; a value's capacity
// is its length, so that nothing appended to one value reaches the next.
type valueChunks struct {
	free []byte
	bufs *changelogBufs
}

const valueChunkSize = 64 << 10

func (c *valueChunks) copy(v []byte) []byte {
	if len(v) > valueChunkSize/4 {
		return slices.Clone(v)
	}
	if cap(c.free)-len(c.free) < len(v) {
		if c.bufs == nil {
			c.free = make([]byte, 0, valueChunkSize)
		} else {
			b, ok := valueChunkPool.Get().(*[]byte)
			if !ok {
				nb := make([]byte, 0, valueChunkSize)
				b = &nb
			}
			c.bufs.chunks = append(c.bufs.chunks, b)
			c.free = *b
		}
	}
	n := len(c.free)
	c.free = append(c.free, v...)
	return c.free[n:len(c.free):len(c.free)]
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
	var props *schemas.Members
	if b.decoded.m == m && b.decoded.propsOK {
		props = &b.decoded.props
	}
	s.countMessage(prof, m, props, at, b.now)
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
// track event's counters and the aggregates the model reads of it. props are its properties
// parsed already (decodeAhead), or nil.
func (s *Service) countMessage(prof *profile, m *schemas.Message, props *schemas.Members, at, now int64) {
	switch m.Type {
	case schemas.TypeIdentify:
		prof.mergeTraits(m.Traits, s.intern)
	case schemas.TypeTrack:
		if m.Event != "" {
			if ser := prof.eventSeries(s.intern.str(m.Event), true); ser != nil {
				ser.add(at, now, 0, false)
			}
			s.model.applyParsed(prof, m.Event, m.Properties, props, at, now)
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
