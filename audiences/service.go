package audiences

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	gosync "sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Snapshot is the part of the config the service reads.
type Snapshot interface {
	Version() uint64
	Audiences() []*schemas.Audience
	ComputedTraits() []*schemas.ComputedTrait
}

// Deps are the service's dependencies.
type Deps struct {
	Kafka platform.KafkaSettings
	// KafkaOpts are added to every client (tests use them).
	KafkaOpts []kgo.Opt
	// Config returns the current config snapshot.
	Config func() Snapshot
	// ConfigReady, when set, is waited for before the first poll.
	ConfigReady <-chan struct{}
	Logger      zerolog.Logger
	// Registerer for metrics; nil: a private registry. Gatherer, when set, is served on
	// /metrics of the profile API's address.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Health gets a Kafka check and the "audiences state" component; nil: none.
	Health *platform.Health
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	// Keys open sealed tracking.events records and seal what audiences writes of a user
	// (docs/security.md#crypto-shredding); the caller runs it. nil: the service makes its own
	// from Kafka and runs it in Run.
	Keys *shred.Keyring
}

// HeaderOrigin marks the records the audiences service produces to tracking.events (value
// OriginAudiences), so that it skips its own identify calls.
const (
	HeaderOrigin    = "origin"
	OriginAudiences = "audiences"
)

// metaKey is the changelog key of a partition's sync metadata (which audiences it synced,
// with the trait key and source to send false with once an audience is removed).
const metaKey = "\x00meta"

// Service is the audiences service: profiles, computed traits, audience membership and its
// sync as identify calls (docs/audiences.md).
type Service struct {
	cfg     Config
	deps    Deps
	logger  zerolog.Logger
	metrics *metrics
	now     func() time.Time

	producer *kgo.Client // ticks (not transactional)
	lag      *platform.LagCollector
	keys     *shred.Keyring
	ownKeys  bool // keys is the service's own: Run runs it

	mu       gosync.RWMutex
	parts    map[int32]*partition // owned partitions
	nparts   int32
	model    *model
	modelVer uint64
	modelSet bool
	stats    map[string]*audienceStats // by "a/<id>" or "t/<id>"
	intern   *interner                 // used under mu

	keyPart kgo.TopicPartitioner // the pipe goroutine's
	apiPart gosync.Mutex         // guards apiKey
	apiKey  kgo.TopicPartitioner

	server    *platform.HTTPServer
	peers     *http.Client
	ownersMu  gosync.Mutex
	ownersMap map[int32]string
	ownersAt  time.Time
}

// partition is the state of one owned partition of tracking.events.
type partition struct {
	restored bool
	profiles map[string]*profile
	meta     partMeta
	dirty    map[string]bool // profiles changed in the batch being processed ("" key: meta)
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
}

// deletedAtKept is how long partition.deletedAt remembers a deletion: the lateness of an event
// behind a deletion of its user that it covers.
const deletedAtKept = 24 * time.Hour

type partMeta struct {
	Defs map[string]metaDef `json:"defs"`
}

type metaDef struct {
	Key     string `json:"key"`
	Source  string `json:"source"`
	Version string `json:"version"`
}

type audienceStats struct {
	lastSync time.Time
	joins    map[int32]int // of the last sync of each partition
	leaves   map[int32]int
	members  map[int32]int
}

// New builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Config == nil {
		return nil, errors.New("audiences: Deps.Config is required")
	}
	if deps.Registerer == nil {
		reg := prometheus.NewRegistry()
		deps.Registerer, deps.Gatherer = reg, reg
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	s := &Service{cfg: cfg, deps: deps, logger: deps.Logger.With().Str("service", "audiences").Logger(), now: deps.Now,
		parts: map[int32]*partition{}, stats: map[string]*audienceStats{}, intern: newInterner(),
		keyPart: kgo.StickyKeyPartitioner(nil).ForTopic(cfg.EventsTopic),
		apiKey:  kgo.StickyKeyPartitioner(nil).ForTopic(cfg.EventsTopic)}
	var err error
	if s.metrics, err = newMetrics(deps.Registerer); err != nil {
		return nil, err
	}
	if s.keys = deps.Keys; s.keys == nil {
		s.ownKeys = true
		if s.keys, err = shred.New(shred.Config{Kafka: deps.Kafka, Opts: deps.KafkaOpts, Logger: s.logger}); err != nil {
			return nil, fmt.Errorf("audiences: %w", err)
		}
	}
	popts := append([]kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(s.partitioner())}, deps.KafkaOpts...)
	if s.producer, err = platform.NewKafkaClient(deps.Kafka, s.logger, popts...); err != nil {
		return nil, fmt.Errorf("audiences producer: %w", err)
	}
	if deps.Health != nil {
		deps.Health.AddCheck("kafka", platform.KafkaCheck(s.producer))
		deps.Health.SetWarming("audiences state", false)
	}
	s.lag = platform.NewLagCollector("audiences", deps.Kafka, s.logger, []string{cfg.Group}, deps.KafkaOpts...)
	if err := deps.Registerer.Register(s.lag); err != nil {
		return nil, fmt.Errorf("registering audiences metrics: %w", err)
	}
	s.peers = &http.Client{Timeout: 10 * time.Second}
	s.server = platform.NewHTTPServer(cfg.Addr, s.Handler(), deps.Health, deps.Gatherer, s.logger)
	s.server.ShutdownTimeout = cfg.ShutdownTimeout
	if err := s.server.AllowHosts("AUDIENCES_ALLOWED_HOSTS", cfg.AllowedHosts); err != nil {
		return nil, err
	}
	return s, nil
}

// Listen binds the profile API's address (AUDIENCES_ADDR) before Run, so that Addr tells the
// port.
func (s *Service) Listen() error { return s.server.Listen() }

// Addr is the profile API's address: the bound one once Listen succeeded.
func (s *Service) Addr() string { return s.server.Addr() }

// partitioner writes audiences.state and audiences.repartition records to the partition
// they name, and tracking.events records (the identify calls) as ingest does: by the murmur2
// hash of the key, so an identify lands on its user's partition.
func (s *Service) partitioner() kgo.Partitioner {
	return partitioner{manual: kgo.ManualPartitioner(), def: kgo.UniformBytesPartitioner(64<<10, true, true, nil),
		manualTopics: []string{s.cfg.StateTopic, s.cfg.RepartitionTopic}}
}

type partitioner struct {
	manual, def  kgo.Partitioner
	manualTopics []string
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if slices.Contains(p.manualTopics, topic) {
		return p.manual.ForTopic(topic)
	}
	return p.def.ForTopic(topic)
}

// partitionOf is the tracking.events partition of a user id.
func (s *Service) partitionOf(id string) int32 {
	return int32(s.keyPart.Partition(&kgo.Record{Key: []byte(id)}, int(s.nparts)))
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

// Run serves the profile API and runs the service until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	if s.ownKeys {
		return platform.RunAll(ctx, s.server, platform.RunnerFunc(s.runPipes), s.keys)
	}
	return platform.RunAll(ctx, s.server, platform.RunnerFunc(s.runPipes))
}

// runPipes runs the events pipe, the deletions pipe and the sync ticker.
func (s *Service) runPipes(ctx context.Context) error {
	gctx, gcancel := platform.GraceContext(ctx, s.cfg.ShutdownTimeout)
	defer gcancel()
	closeProducer := gosync.OnceFunc(s.producer.Close)
	stopClosing := context.AfterFunc(gctx, closeProducer)
	defer func() {
		stopClosing()
		closeProducer()
		s.lag.Close()
	}()
	if err := s.checkTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ready := []<-chan struct{}{s.keys.Ready()}
	if s.deps.ConfigReady != nil {
		ready = append(ready, s.deps.ConfigReady)
	}
	onAssigned := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { s.assigned(ps[s.cfg.EventsTopic]) }
	onRevoked := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { s.revoked(ps[s.cfg.EventsTopic]) }
	main, err := platform.NewPipe(platform.PipeConfig{
		Name: "audiences", Kafka: s.deps.Kafka, Group: s.cfg.Group,
		Topics:    []string{s.cfg.EventsTopic, s.cfg.RepartitionTopic},
		Transform: s.transform, ExactlyOnce: true,
		TransactionalID: s.cfg.TransactionalID, TransactionTimeout: s.cfg.TransactionTimeout,
		// Looked at for transactions Kafka left open after a broker restart
		// (docs/operations.md#hanging-transactions).
		TransactionTopics: []string{s.cfg.EventsTopic, s.cfg.StateTopic, s.cfg.RepartitionTopic, s.cfg.DeletionsStatusTopic},
		InstanceID:        s.cfg.TransactionalID, MaxPollRecords: s.cfg.MaxPollRecords,
		ShutdownTimeout: s.cfg.ShutdownTimeout, Ready: ready, Health: s.deps.Health,
		Logger: s.logger.With().Str("consumer", "events").Logger(),
		Ended:  s.ended,
		Opts: append([]kgo.Opt{
			kgo.SessionTimeout(20 * time.Second),
			// The range balancer gives a member the same partition numbers of both topics:
			// a profile's events and what other partitions hand to it meet in one place.
			kgo.Balancers(kgo.RangeBalancer()),
			kgo.RecordPartitioner(s.partitioner()),
			kgo.OnPartitionsAssigned(onAssigned), kgo.OnPartitionsRevoked(onRevoked), kgo.OnPartitionsLost(onRevoked),
		}, s.deps.KafkaOpts...),
	})
	if err != nil {
		return err
	}
	deletions, err := platform.NewPipe(platform.PipeConfig{
		Name: "audiences deletions", Kafka: s.deps.Kafka, Group: s.cfg.DeletionsGroup,
		Topics: []string{s.cfg.DeletionsTopic}, Transform: s.forwardDeletions, ExactlyOnce: true,
		TransactionalID: s.cfg.TransactionalID + "-deletions", TransactionTimeout: s.cfg.TransactionTimeout,
		TransactionTopics: []string{s.cfg.EventsTopic, s.cfg.StateTopic, s.cfg.RepartitionTopic},
		InstanceID:        s.cfg.TransactionalID + "-deletions", MaxPollRecords: 500,
		ShutdownTimeout: s.cfg.ShutdownTimeout, Ready: ready,
		Logger: s.logger.With().Str("consumer", "deletions").Logger(),
		Opts:   append([]kgo.Opt{kgo.SessionTimeout(20 * time.Second), kgo.RecordPartitioner(s.partitioner())}, s.deps.KafkaOpts...),
	})
	if err != nil {
		return err
	}
	s.logger.Info().Int32("partitions", s.nparts).Str("sync_interval", s.cfg.SyncInterval.String()).Msg("audiences running")
	return platform.RunAll(ctx, main, deletions, platform.RunnerFunc(s.tick))
}

// checkTopics learns the partition count of tracking.events and checks that the changelog
// and the repartition topic have the same (tributary-init creates them so).
func (s *Service) checkTopics(ctx context.Context) error {
	adm := kadm.NewClient(s.producer)
	topics := []string{s.cfg.EventsTopic, s.cfg.StateTopic, s.cfg.RepartitionTopic}
	return platform.RetryUntil(ctx, s.logger, "reading the partition counts of "+fmt.Sprint(topics), func(ctx context.Context) error {
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return err
		}
		counts := map[string]int{}
		for _, t := range topics {
			d, ok := details[t]
			if !ok || d.Err != nil {
				return fmt.Errorf("topic %s is missing (tributary-init creates it)", t)
			}
			counts[t] = len(d.Partitions)
		}
		n := counts[s.cfg.EventsTopic]
		for _, t := range topics[1:] {
			if counts[t] != n {
				return fmt.Errorf("%s has %d partitions, %s %d: they need as many (tributary-init creates them so)", t, counts[t], s.cfg.EventsTopic, n)
			}
		}
		s.mu.Lock()
		s.nparts = int32(n)
		s.mu.Unlock()
		return nil
	})
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
	}
	s.recountProfiles()
	s.mu.Unlock()
	s.updateReady()
}

// ended is the pipe's Ended: a batch that did not commit leaves the in-memory state ahead of
// the changelog, so every partition is restored again before its next record.
func (s *Service) ended(committed bool) {
	if committed {
		return
	}
	s.mu.Lock()
	for p := range s.parts {
		s.parts[p] = &partition{}
	}
	s.mu.Unlock()
	s.updateReady()
}

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

func (s *Service) produceTick(p int32, sync bool) {
	r := &kgo.Record{Topic: s.cfg.RepartitionTopic, Partition: p, Value: opRecord(op{Op: opTick, Sync: sync})}
	s.producer.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
		if err != nil && !errors.Is(err, kgo.ErrClientClosed) {
			s.logger.Warn().Err(err).Int32("partition", p).Msg("producing a sync tick; the next one follows in one interval")
		}
	})
}

// op is one audiences.repartition record.
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
	// tick: Sync runs a sync (false: only restores the partition).
	Sync bool `json:"sync,omitempty"`
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
	b, _ := json.Marshal(o)
	return b
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

// batch is what one transaction produces.
type batch struct {
	out     []*kgo.Record
	now     int64
	touched map[int32]*partition
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
	events := 0
	var unavailable error
	fs.EachRecord(func(r *kgo.Record) {
		part := s.parts[r.Partition]
		if part == nil || !part.restored || unavailable != nil {
			return // revoked meanwhile: the transaction aborts, the next owner reads it
		}
		if r.Topic == s.cfg.EventsTopic && headerIs(r, HeaderOrigin, OriginAudiences) {
			return
		}
		value, ok, err := s.open(r)
		if err != nil {
			unavailable = err
			return
		}
		if !ok {
			return
		}
		switch r.Topic {
		case s.cfg.EventsTopic:
			events++
			m, err := schemas.DecodeMessage(value)
			if err != nil {
				s.logger.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a tracking.events record that does not decode")
				return
			}
			s.handleMessage(b, r.Partition, part, m, value, "", r.Timestamp)
		case s.cfg.RepartitionTopic:
			var o op
			if err := json.Unmarshal(value, &o); err != nil {
				s.logger.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping an audiences.repartition record that does not decode")
				return
			}
			s.handleOp(b, r.Partition, part, string(r.Key), &o, r.Timestamp)
		}
	})
	if unavailable != nil {
		return nil, fmt.Errorf("opening a sealed record: %w", unavailable)
	}
	s.metrics.events.Add(float64(events))
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
func (s *Service) sealSubject(r *kgo.Record) string {
	key := string(r.Key)
	switch r.Topic {
	case s.cfg.StateTopic:
		if key == metaKey {
			return ""
		}
		if part := s.parts[r.Partition]; part != nil {
			if prof := part.profiles[key]; prof != nil && prof.UserID != "" {
				return prof.UserID
			}
		}
		return key
	case s.cfg.EventsTopic:
		return key
	case s.cfg.RepartitionTopic:
		if bytes.HasPrefix(r.Value, []byte(`{"op":"`+opEvent+`"`)) || bytes.HasPrefix(r.Value, []byte(`{"op":"`+opAbsorb+`"`)) {
			return key
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

func (b *batch) touch(p int32, part *partition, id string) {
	if part.dirty == nil {
		part.dirty = map[string]bool{}
	}
	part.dirty[id] = true
	b.touched[p] = part
}

// changelog appends the records of the partition's changed profiles (a tombstone for a
// removed one) and clears its dirty set.
func (s *Service) changelog(out []*kgo.Record, p int32, part *partition) []*kgo.Record {
	for id := range part.dirty {
		r := &kgo.Record{Topic: s.cfg.StateTopic, Partition: p, Key: []byte(id)}
		if id == metaKey {
			r.Value, _ = json.Marshal(part.meta)
		} else if prof := part.profiles[id]; prof != nil {
			r.Value = prof.changelogValue(make([]byte, 0, 512))
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
	prof := part.profiles[id]
	switch {
	case prof != nil && prof.Suppressed:
		return
	case prof != nil && prof.MergedInto != "":
		// An id merged into another profile: its events count there.
		b.out = append(b.out, s.handOff(prof.MergedInto, op{Op: opEvent, Into: prof.MergedInto, Message: raw}))
		return
	case prof == nil:
		prof = &profile{ID: id}
		// A message handed on by a merged id (into) goes to an identified profile.
		if into != "" || m.UserID == id {
			prof.UserID = id
		} else {
			prof.AnonymousID = id
		}
		if part.profiles == nil {
			part.profiles = map[string]*profile{}
		}
		part.profiles[id] = prof
		s.metrics.profiles.Inc()
	}
	if prof.repeated(messageHash(m.MessageID)) {
		s.metrics.duplicates.Inc()
		return
	}
	at := eventTime(m, recTime, b.now)
	prof.seen(at)
	switch m.Type {
	case schemas.TypeIdentify:
		prof.mergeTraits(m.Traits, s.intern)
	case schemas.TypeTrack:
		if m.Event != "" {
			if ser := prof.eventSeries(s.intern.str(m.Event), true); ser != nil {
				ser.add(at, b.now, 0, false)
			}
			s.model.apply(prof, m.Event, m.Properties, at, b.now)
		}
	}
	b.touch(p, part, id)
	// Identity: an identified message that carries another id merges that profile into
	// this one (docs/audiences.md#merging-profiles).
	if prof.UserID != "" {
		for _, other := range []string{m.AnonymousID, m.PreviousID} {
			if other != "" && other != prof.ID && !slices.Contains(prof.Merged, other) {
				prof.addMerged(other)
				b.out = append(b.out, s.handOff(other, op{Op: opMerge, From: other, Into: prof.ID}))
			}
		}
	}
	if s.model.realtime {
		b.out = s.syncProfile(b.out, part, prof, b.now, true, nil)
	}
}

// handOff is an audiences.repartition record for the partition of the profile key.
func (s *Service) handOff(key string, o op) *kgo.Record {
	return &kgo.Record{Topic: s.cfg.RepartitionTopic, Partition: s.partitionOf(key), Key: []byte(key), Value: opRecord(o)}
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

func (s *Service) handleOp(b *batch, p int32, part *partition, key string, o *op, recTime time.Time) {
	if part.profiles == nil {
		part.profiles = map[string]*profile{}
	}
	switch o.Op {
	case opMerge:
		from := part.profiles[o.From]
		if from != nil && (from.MergedInto != "" || from.Suppressed) {
			return // merged already (the first identified user keeps it), or suppressed
		}
		if from == nil {
			s.metrics.profiles.Inc()
		}
		part.profiles[o.From] = &profile{ID: o.From, MergedInto: o.Into}
		b.touch(p, part, o.From)
		if from != nil {
			b.out = append(b.out, s.handOff(o.Into, op{Op: opAbsorb, Into: o.Into, Profile: from}))
		}
	case opAbsorb:
		if o.Profile == nil {
			return
		}
		prof := part.profiles[o.Into]
		switch {
		case prof != nil && !prof.active():
			return
		case prof == nil:
			prof = &profile{ID: o.Into, UserID: o.Into}
			part.profiles[o.Into] = prof
			s.metrics.profiles.Inc()
		}
		prof.absorb(o.Profile, b.now)
		b.touch(p, part, o.Into)
		if s.model.realtime {
			b.out = s.syncProfile(b.out, part, prof, b.now, true, nil)
		}
	case opEvent:
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
	case opDelete:
		req := o.Deletion
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
		}
		if req.Deletes() {
			if part.deletedAt == nil {
				part.deletedAt = map[string]int64{}
			}
			part.deletedAt[req.UserID] = b.now
		}
		prof := part.profiles[req.UserID]
		done := map[string]int64{schemas.CountProfiles: 0, schemas.CountRedirects: 0, schemas.CountTombstones: 0}
		var merged []string
		if prof != nil && req.Deletes() {
			merged = slices.Clone(prof.Merged)
		}
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
		s.metrics.deletions.Inc()
		b.out = s.forgetNext(b.out, req, merged, done)
	case opForget:
		// A redirect of an id merged into a deleted profile: it goes (a tombstone), unless the
		// id was merged into another profile (the first identified user keeps it).
		if prof := part.profiles[o.From]; prof != nil && prof.MergedInto == o.Into && o.Into != "" {
			delete(part.profiles, o.From)
			s.metrics.profiles.Dec()
			b.touch(p, part, o.From)
			if o.Done != nil {
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
	case opTick:
		for id, at := range part.deletedAt {
			if b.now-at > deletedAtKept.Milliseconds() {
				delete(part.deletedAt, id)
			}
		}
		if o.Sync {
			b.out = s.syncPartition(b, p, part)
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
		n += len(part.profiles)
	}
	s.metrics.restores.Inc()
	s.recountProfiles()
	s.logger.Info().Ints32("partitions", missing).Int("profiles", n).Str("took", time.Since(start).String()).
		Msg("audiences state restored from " + s.cfg.StateTopic)
	go s.updateReady()
	return nil
}

func (s *Service) recountProfiles() {
	n := 0
	for _, part := range s.parts {
		n += len(part.profiles)
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
			default:
				// A version sealed with a shredded key is the profile of a deleted user:
				// skipped (counted), as is every older version of it.
				value, ok, err := s.open(r)
				if err != nil && unavailable == nil {
					unavailable = err
				}
				if !ok {
					delete(part.profiles, key)
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
				part.profiles[key] = &prof
			}
		})
	if err == nil && unavailable != nil {
		err = fmt.Errorf("restoring %s: %w", s.cfg.StateTopic, unavailable)
	}
	if err != nil {
		return nil, err
	}
	if bad > 0 {
		s.logger.Warn().Int("records", bad).Msg("skipped audiences.state records that do not decode")
	}
	return out, nil
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
	if prof.UserID != "" {
		b = append(b, `,"userId":`...)
		b = schemas.AppendJSONString(b, prof.UserID)
	} else {
		b = append(b, `,"anonymousId":`...)
		b = schemas.AppendJSONString(b, prof.ID)
	}
	b = append(b, `,"traits":{`...)
	b = schemas.AppendJSONString(b, key)
	b = append(b, ':')
	b = v.appendJSON(b)
	b = append(b, `},"timestamp":"`...)
	b = append(b, ts...)
	b = append(b, `","receivedAt":"`...)
	b = append(b, ts...)
	b = append(b, `","context":{"library":{"name":"tributary-audiences","version":`...)
	b = schemas.AppendJSONString(b, platform.Version)
	b = append(b, `},"personas":{"computation_class":`...)
	b = schemas.AppendJSONString(b, class)
	b = append(b, `,"computation_id":`...)
	b = schemas.AppendJSONString(b, id)
	b = append(b, `,"computation_key":`...)
	b = schemas.AppendJSONString(b, key)
	if class == classAudience {
		b = append(b, `,"audience_id":`...)
		b = schemas.AppendJSONString(b, id)
		b = append(b, `,"audience_key":`...)
		b = schemas.AppendJSONString(b, key)
	} else {
		b = append(b, `,"computed_trait_id":`...)
		b = schemas.AppendJSONString(b, id)
		b = append(b, `,"computed_trait_key":`...)
		b = schemas.AppendJSONString(b, key)
	}
	b = append(b, `}}}`...)
	userKey := prof.UserID
	if userKey == "" {
		userKey = prof.ID
	}
	s.metrics.identifies.WithLabelValues(class, id).Inc()
	return &kgo.Record{Topic: s.cfg.EventsTopic, Key: []byte(userKey), Value: b, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderSourceID, Value: []byte(source)},
		{Key: schemas.HeaderMessageID, Value: []byte(msgID)},
		{Key: schemas.HeaderType, Value: []byte(schemas.TypeIdentify)},
		{Key: HeaderOrigin, Value: []byte(OriginAudiences)},
	}}
}

// computation classes of context.personas.
const (
	classAudience      = "audience"
	classComputedTrait = "computed_trait"
)

// changeCounter collects the joins and leaves of one sync of one partition.
type changeCounter struct {
	joins, leaves, members map[string]int
	n                      int
}

// syncProfile compares the profile's current membership and computed-trait values with what
// was last sent and appends an identify for each difference (realtime: only the definitions
// marked realtime; the removed ones are left to the sync). It records what it sent.
func (s *Service) syncProfile(out []*kgo.Record, part *partition, prof *profile, now int64, realtimeOnly bool, cc *changeCounter) []*kgo.Record {
	if !prof.active() {
		return out
	}
	m := s.model
	changed := false
	for _, d := range m.audiences {
		if realtimeOnly && !d.realtime {
			continue
		}
		sid := d.sid
		member := d.root.eval(prof, now)
		e := prof.synced(sid)
		has := e != nil && e.Version == d.version
		switch {
		case member && !has:
			// A member of an audience whose name or source changed: false under the old
			// key or source first, so that no destination keeps the old trait true.
			if md, ok := part.meta.Defs[sid]; ok && e != nil && (md.Key != d.key || md.Source != d.source) {
				out = append(out, s.identify(prof, md.Key, md.Source, d.id, classAudience, boolVal(false), now))
			}
			out = append(out, s.identify(prof, d.key, d.source, d.id, classAudience, boolVal(true), now))
			prof.setSynced(sid, d.version, 0, true)
			changed = true
			if cc != nil {
				cc.joins[sid]++
			}
		case !member && e != nil:
			// Left, or the rule changed and the user is not in the new audience.
			key, source := d.key, d.source
			if !has {
				if md, ok := part.meta.Defs[sid]; ok {
					key, source = md.Key, md.Source
				}
			}
			out = append(out, s.identify(prof, key, source, d.id, classAudience, boolVal(false), now))
			prof.setSynced(sid, "", 0, false)
			changed = true
			if cc != nil {
				cc.leaves[sid]++
			}
		}
		if cc != nil && member {
			cc.members[sid]++
		}
	}
	for _, d := range m.traits {
		if realtimeOnly && !d.realtime {
			continue
		}
		sid := d.sid
		v := d.value(prof, now)
		h, prev := valueHash(v), d.emptyHash
		// A changed definition (name, source or aggregate) is a new computed trait: its
		// value is sent again under its trait key.
		if e := prof.synced(sid); e != nil && e.Version == d.version {
			prev = e.H
		}
		if h != prev {
			out = append(out, s.identify(prof, d.key, d.source, d.id, classComputedTrait, v, now))
			prof.setSynced(sid, d.version, h, h != d.emptyHash)
			changed = true
			if cc != nil {
				cc.joins[sid]++
			}
		}
		if cc != nil && h != d.emptyHash {
			cc.members[sid]++
		}
	}
	if !realtimeOnly {
		// Aggregates no definition reads any more (removed or changed): their memory goes.
		if n := len(prof.Aggs); n > 0 {
			prof.Aggs = slices.DeleteFunc(prof.Aggs, func(a agg) bool { return !m.aggKeys[a.Key] })
			changed = changed || len(prof.Aggs) != n
		}
		// Audiences removed from the config: their members get false once (the trait key and
		// source were kept in the partition's metadata).
		for i := 0; i < len(prof.Synced); i++ {
			e := prof.Synced[i]
			kind, id := e.ID[:1], e.ID[2:]
			current := (kind == "a" && m.audienceByID(id) != nil) || (kind == "t" && m.traitByID[id] != nil)
			if current {
				continue
			}
			if md, ok := part.meta.Defs[e.ID]; ok && kind == "a" {
				out = append(out, s.identify(prof, md.Key, md.Source, id, classAudience, boolVal(false), now))
				if cc != nil {
					cc.leaves[e.ID]++
				}
			}
			prof.Synced = slices.Delete(prof.Synced, i, i+1)
			i--
			changed = true
		}
	}
	if changed {
		if part.dirty == nil {
			part.dirty = map[string]bool{}
		}
		part.dirty[prof.ID] = true
		if cc != nil {
			cc.n++
		}
	}
	return out
}

func (m *model) audienceByID(id string) *audienceDef {
	for _, d := range m.audiences {
		if d.id == id {
			return d
		}
	}
	return nil
}

// empty is the computed trait's value when no event counts.
func (d *traitDef) empty() val {
	switch d.kind {
	case schemas.AggCount, schemas.AggSum:
		return numVal(0)
	case schemas.AggUniqueList:
		return val{k: kRaw, s: "[]"}
	}
	return null
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
			defs[d.sid] = metaDef{Key: d.key, Source: d.source, Version: d.version}
		}
		for _, d := range s.model.traits {
			defs[d.sid] = metaDef{Key: d.key, Source: d.source, Version: d.version}
		}
		if !sameDefs(defs, part.meta.Defs) {
			part.meta.Defs = defs
			b.touch(p, part, metaKey)
		}
		part.synced = time.UnixMilli(b.now)
		s.recordSync(p, cc, part.synced)
	} else {
		out = append(out, &kgo.Record{Topic: s.cfg.RepartitionTopic, Partition: p, Value: opRecord(op{Op: opTick, Sync: true})})
	}
	s.metrics.syncSeconds.Observe(time.Since(start).Seconds())
	return out
}

func sameDefs(a, b map[string]metaDef) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

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

// String is for logs.
func (o op) String() string {
	return o.Op + " " + o.From + "→" + o.Into + " " + strconv.FormatBool(o.Sync)
}
