package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// ApplyConfig upserts every object of cfg into the config topic (normally
// schemas.TopicConfig) and waits until the brokers have acknowledged all of them. It is an
// upsert: objects that exist in the topic but not in cfg stay. cfg is validated first
// (cfg.Records), and sources are written with their write-key hash, never the key itself.
// With keys (KafkaSettings.ConfigKeyring; nil: none), the destinations' secrets are written
// encrypted (schemas.SealConfigRecord). It writes without the config writers' transaction
// (ConfigWriter): it checks nothing against the topic, so nothing serializes it with the
// console's conditional writes; tests use it to seed a config.
func ApplyConfig(ctx context.Context, cl *kgo.Client, topic string, cfg *schemas.Config, keys *schemas.Keyring) error {
	recs, err := cfg.Records()
	if err != nil {
		return fmt.Errorf("applying config: %w", err)
	}
	for i := range recs {
		if recs[i], err = schemas.SealConfigRecord(recs[i], keys); err != nil {
			return fmt.Errorf("applying config: %w", err)
		}
	}
	return ProduceConfigRecords(ctx, cl, topic, recs...)
}

// ProduceConfigRecords writes config records to the config topic, in order, and waits for
// their acknowledgement. A record with a nil Value is a tombstone: it deletes the object.
// The records are written as they are: seal them first (schemas.SealConfigRecord).
// It writes outside the config writers' transaction (ConfigWriter): a write that depends on
// what the topic holds (a version check) goes through ConfigWriter.Write instead, or it is not
// serialized with the console's and tributary-init's writes (docs/topics.md#tributaryconfig).
func ProduceConfigRecords(ctx context.Context, cl *kgo.Client, topic string, recs ...schemas.ConfigRecord) error {
	if len(recs) == 0 {
		return nil
	}
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Topic: topic, Key: []byte(r.Key), Value: r.Value}
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return fmt.Errorf("producing to %s: %w", topic, err)
	}
	return nil
}

// DeleteConfigObject writes the tombstone that deletes one config object, e.g.
// DeleteConfigObject(ctx, cl, topic, schemas.ConfigKindSource, "web").
func DeleteConfigObject(ctx context.Context, cl *kgo.Client, topic string, kind schemas.ConfigKind, id string) error {
	key := schemas.ConfigObject{Kind: kind, ID: id}.Key()
	return ProduceConfigRecords(ctx, cl, topic, schemas.ConfigRecord{Key: key})
}

// Snapshot is one immutable, consistent view of the tenant config. Its methods are safe for
// concurrent use; the objects it returns are shared and must not be modified.
type Snapshot struct {
	version      uint64
	sources      map[string]*schemas.Source
	byKeyHash    map[string]*schemas.Source
	byPrevHash   map[string]previousKey
	destinations map[string]*schemas.Destination
	bySource     map[string][]*schemas.Destination
	audiences    map[string]*schemas.Audience
	traits       map[string]*schemas.ComputedTrait
	plans        map[string]*schemas.Plan
	users        map[string]*schemas.ConsoleUser
	tokens       map[string]*schemas.APIToken
	byTokenHash  map[string]*schemas.APIToken
	identity     *schemas.IdentityRules
	revisions    map[string]int64
	unsealed     map[string]bool
	positions    map[int32]int64 // by partition: the offset of the next record to read
	stale        chan struct{}
}

// previousKey is a write key a rotation replaced, accepted until expires.
type previousKey struct {
	src     *schemas.Source
	expires time.Time
}

func emptySnapshot() *Snapshot {
	return &Snapshot{stale: make(chan struct{})}
}

// Version counts the snapshots a ConfigStore has published: 0 before it is ready, then one
// more on every change.
func (s *Snapshot) Version() uint64 { return s.version }

// Stale returns a channel that is closed once a newer snapshot has replaced this one.
func (s *Snapshot) Stale() <-chan struct{} { return s.stale }

// SourceByID returns the source with this id.
func (s *Snapshot) SourceByID(id string) (*schemas.Source, bool) {
	src, ok := s.sources[id]
	return src, ok
}

// SourceByKeyHash returns the source whose write-key hash (schemas.HashWriteKey) is hash, or
// whose previous key (a rotation's, schemas.Source.PreviousWriteKeyHash) it is until that key
// expires. If two sources share a hash, the one with the smaller id wins; a current key wins
// over a previous one.
func (s *Snapshot) SourceByKeyHash(hash string) (*schemas.Source, bool) {
	if src, ok := s.byKeyHash[hash]; ok {
		return src, true
	}
	if p, ok := s.byPrevHash[hash]; ok && time.Now().Before(p.expires) {
		return p.src, true
	}
	return nil, false
}

// Revision returns the version of one object: 1 + the offset of the tributary.config record
// that last wrote it (so it grows with every write of the object, whoever made it), or 0 when
// the object does not exist. The console answers it as the object's "version".
func (s *Snapshot) Revision(kind schemas.ConfigKind, id string) int64 {
	return s.revisions[schemas.ConfigObject{Kind: kind, ID: id}.Key()]
}

// ReadThrough reports whether this snapshot holds every record of the config topic before
// ends (by partition; ConfigTx.Ends): the console checks a write's versions against a
// snapshot that read through the ends its transaction listed
// (docs/console.md#more-than-one-console). A partition the store has not seen yet counts as
// read only if its end is 0.
func (s *Snapshot) ReadThrough(ends map[int32]int64) bool {
	for p, end := range ends {
		if next, ok := s.positions[p]; ok && next < end || !ok && end > 0 {
			return false
		}
	}
	return true
}

// NeedsSealing reports whether the record of one object holds a secret in clear, or encrypted
// with another key than the first of CONFIG_ENCRYPTION_KEY (schemas.NeedsSealing): written
// before the key was set or before a rotation. Re-encrypting the config (the console's
// POST /v1/config/reencrypt, `tributary-init reencrypt`) writes such objects again
// (docs/configuration.md#secrets-at-rest). Without a key it is always false.
func (s *Snapshot) NeedsSealing(kind schemas.ConfigKind, id string) bool {
	return s.unsealed[schemas.ConfigObject{Kind: kind, ID: id}.Key()]
}

// DestinationByID returns the destination with this id.
func (s *Snapshot) DestinationByID(id string) (*schemas.Destination, bool) {
	d, ok := s.destinations[id]
	return d, ok
}

// DestinationsForSource returns the destinations that list sourceID among their sources,
// enabled or not (callers filter with IsEnabled), ordered by id. The slice is shared by every
// caller (it is not copied, to keep the per-message path allocation-free): do not modify it.
func (s *Snapshot) DestinationsForSource(sourceID string) []*schemas.Destination {
	return s.bySource[sourceID]
}

// Sources returns every source, ordered by id.
func (s *Snapshot) Sources() []*schemas.Source { return sortedValues(s.sources) }

// Destinations returns every destination, ordered by id.
func (s *Snapshot) Destinations() []*schemas.Destination { return sortedValues(s.destinations) }

// Audiences returns every audience, ordered by id.
func (s *Snapshot) Audiences() []*schemas.Audience { return sortedValues(s.audiences) }

// AudienceByID returns the audience with this id.
func (s *Snapshot) AudienceByID(id string) (*schemas.Audience, bool) {
	a, ok := s.audiences[id]
	return a, ok
}

// ComputedTraits returns every computed trait, ordered by id.
func (s *Snapshot) ComputedTraits() []*schemas.ComputedTrait { return sortedValues(s.traits) }

// ComputedTraitByID returns the computed trait with this id.
func (s *Snapshot) ComputedTraitByID(id string) (*schemas.ComputedTrait, bool) {
	t, ok := s.traits[id]
	return t, ok
}

// TrackingPlans returns every tracking plan, ordered by id.
func (s *Snapshot) TrackingPlans() []*schemas.Plan { return sortedValues(s.plans) }

// TrackingPlanByID returns the tracking plan with this id, compiled (schemas.Plan.Compiled).
func (s *Snapshot) TrackingPlanByID(id string) (*schemas.Plan, bool) {
	p, ok := s.plans[id]
	return p, ok
}

// ConsoleUsers returns the console's user list, ordered by email
// (docs/console.md#users-roles-and-tokens).
func (s *Snapshot) ConsoleUsers() []*schemas.ConsoleUser { return sortedValues(s.users) }

// ConsoleUserByEmail returns the listed person of email, compared case-insensitively.
func (s *Snapshot) ConsoleUserByEmail(email string) (*schemas.ConsoleUser, bool) {
	u, ok := s.users[strings.ToLower(email)]
	return u, ok
}

// Identity returns the identity rules of the config (nil: none; the audiences service's
// run-time settings then hold).
func (s *Snapshot) Identity() *schemas.IdentityRules { return s.identity }

// APITokens returns the console's API tokens, ordered by id.
func (s *Snapshot) APITokens() []*schemas.APIToken { return sortedValues(s.tokens) }

// APITokenByID returns the API token with this id.
func (s *Snapshot) APITokenByID(id string) (*schemas.APIToken, bool) {
	t, ok := s.tokens[id]
	return t, ok
}

// APITokenByHash returns the API token whose secret hashes (schemas.HashAPITokenSecret) to
// hash; a revoked token is gone. If two tokens share a hash, the one with the smaller id wins.
func (s *Snapshot) APITokenByHash(hash string) (*schemas.APIToken, bool) {
	t, ok := s.byTokenHash[hash]
	return t, ok
}

func sortedValues[T any](m map[string]*T) []*T {
	keys := slices.Sorted(maps.Keys(m))
	out := make([]*T, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// configState is the mutable state of ConfigStore.Run, owned by its goroutine.
type configState struct {
	sources      map[string]*schemas.Source
	destinations map[string]*schemas.Destination
	audiences    map[string]*schemas.Audience
	traits       map[string]*schemas.ComputedTrait
	plans        map[string]*schemas.Plan
	users        map[string]*schemas.ConsoleUser
	tokens       map[string]*schemas.APIToken
	identity     *schemas.IdentityRules
	revisions    map[string]int64 // object key → 1 + offset of its record
	unsealed     map[string]bool  // object keys whose record needs sealing (Snapshot.NeedsSealing)
	positions    map[int32]int64  // partition → offset of the next record to read
}

func (st *configState) apply(o schemas.ConfigObject) {
	switch o.Kind {
	case schemas.ConfigKindSource:
		if o.Deleted() {
			delete(st.sources, o.ID)
		} else {
			st.sources[o.ID] = o.Source
		}
	case schemas.ConfigKindDestination:
		if o.Deleted() {
			delete(st.destinations, o.ID)
		} else {
			st.destinations[o.ID] = o.Destination
		}
	case schemas.ConfigKindAudience:
		if o.Deleted() {
			delete(st.audiences, o.ID)
		} else {
			st.audiences[o.ID] = o.Audience
		}
	case schemas.ConfigKindComputedTrait:
		if o.Deleted() {
			delete(st.traits, o.ID)
		} else {
			st.traits[o.ID] = o.ComputedTrait
		}
	case schemas.ConfigKindTrackingPlan:
		if o.Deleted() {
			delete(st.plans, o.ID)
		} else {
			st.plans[o.ID] = o.TrackingPlan
		}
	case schemas.ConfigKindConsoleUser:
		if o.Deleted() {
			delete(st.users, o.ID)
		} else {
			setIn(&st.users, o.ID, o.ConsoleUser)
		}
	case schemas.ConfigKindAPIToken:
		if o.Deleted() {
			delete(st.tokens, o.ID)
		} else {
			setIn(&st.tokens, o.ID, o.APIToken)
		}
	case schemas.ConfigKindIdentity:
		st.identity = o.Identity // nil for the tombstone
	}
}

// setIn sets (*m)[k] = v, making the map first when it is nil.
func setIn[T any](m *map[string]*T, k string, v *T) {
	if *m == nil {
		*m = map[string]*T{}
	}
	(*m)[k] = v
}

// object returns the current state of one object (a tombstone when there is none).
func (st *configState) object(kind schemas.ConfigKind, id string) schemas.ConfigObject {
	o := schemas.ConfigObject{Kind: kind, ID: id}
	switch kind {
	case schemas.ConfigKindSource:
		o.Source = st.sources[id]
	case schemas.ConfigKindDestination:
		o.Destination = st.destinations[id]
	case schemas.ConfigKindAudience:
		o.Audience = st.audiences[id]
	case schemas.ConfigKindComputedTrait:
		o.ComputedTrait = st.traits[id]
	case schemas.ConfigKindTrackingPlan:
		o.TrackingPlan = st.plans[id]
	case schemas.ConfigKindConsoleUser:
		o.ConsoleUser = st.users[id]
	case schemas.ConfigKindAPIToken:
		o.APIToken = st.tokens[id]
	case schemas.ConfigKindIdentity:
		o.Identity = st.identity
	}
	return o
}

func (st *configState) snapshot(version uint64) *Snapshot {
	s := &Snapshot{
		version:      version,
		sources:      maps.Clone(st.sources),
		byKeyHash:    make(map[string]*schemas.Source, len(st.sources)),
		destinations: maps.Clone(st.destinations),
		bySource:     make(map[string][]*schemas.Destination),
		audiences:    maps.Clone(st.audiences),
		traits:       maps.Clone(st.traits),
		plans:        maps.Clone(st.plans),
		users:        maps.Clone(st.users),
		tokens:       maps.Clone(st.tokens),
		identity:     st.identity,
		revisions:    maps.Clone(st.revisions),
		unsealed:     maps.Clone(st.unsealed),
		positions:    maps.Clone(st.positions),
		stale:        make(chan struct{}),
	}
	for _, src := range sortedValues(st.sources) {
		if h := src.KeyHash(); h != "" {
			if _, dup := s.byKeyHash[h]; !dup {
				s.byKeyHash[h] = src
			}
		}
		if h := src.PreviousWriteKeyHash; h != "" {
			exp, err := schemas.ParseTimestamp(src.PreviousWriteKeyExpiresAt)
			if _, dup := s.byPrevHash[h]; err == nil && !dup {
				if s.byPrevHash == nil {
					s.byPrevHash = map[string]previousKey{}
				}
				s.byPrevHash[h] = previousKey{src: src, expires: exp}
			}
		}
	}
	for _, t := range sortedValues(st.tokens) {
		if _, dup := s.byTokenHash[t.SecretHash]; !dup {
			setIn(&s.byTokenHash, t.SecretHash, t)
		}
	}
	for _, d := range sortedValues(st.destinations) {
		for _, id := range slices.Compact(slices.Sorted(slices.Values(d.Sources))) {
			s.bySource[id] = append(s.bySource[id], d)
		}
	}
	return s
}

// ConfigFetchMaxWait is how long one fetch of the config topic waits for new records: it bounds
// how long an update takes to become visible when the broker holds fetches (well under a second).
const ConfigFetchMaxWait = 250 * time.Millisecond

// ConfigStore materialises the compacted config topic in memory: every record upserts its
// object, a tombstone deletes it, and each batch of changes is published as a new immutable
// Snapshot. It reads committed records only (read_committed): the writes of a transaction
// that was aborted, or whose writer was fenced or died, are never applied. It reads every partition directly from the start, without a consumer group (a
// TopicReader), so every replica of every service holds the whole config.
//
// Snapshot, Ready, Changes and WaitFor are safe for concurrent use; Run is called once.
type ConfigStore struct {
	reader *TopicReader
	logger zerolog.Logger

	snap atomic.Pointer[Snapshot]

	// keys decrypt the destinations' secrets (CONFIG_ENCRYPTION_KEY); nil: none.
	keys *schemas.Keyring

	// Owned by Run's goroutine (the reader's callbacks).
	state   configState
	version uint64
	changed bool
	records int // read so far
}

// NewConfigStore prepares a store of topic (normally schemas.TopicConfig). It validates the
// settings; the Kafka client is created by Run and closed when Run returns. opts are added to
// the client's options (tests use them, e.g. for a client id).
func NewConfigStore(s KafkaSettings, topic string, logger zerolog.Logger, opts ...kgo.Opt) (*ConfigStore, error) {
	if _, err := s.ClientOpts(); err != nil {
		return nil, fmt.Errorf("config store: %w", err)
	}
	if topic == "" {
		return nil, errors.New("config store: no topic")
	}
	keys, err := s.ConfigKeyring()
	if err != nil {
		return nil, fmt.Errorf("config store: %w", err)
	}
	logger = logger.With().Str("component", "configstore").Str("topic", topic).Logger()
	cs := &ConfigStore{
		logger: logger,
		keys:   keys,
		state: configState{
			sources:      map[string]*schemas.Source{},
			destinations: map[string]*schemas.Destination{},
			audiences:    map[string]*schemas.Audience{},
			traits:       map[string]*schemas.ComputedTrait{},
			plans:        map[string]*schemas.Plan{},
			revisions:    map[string]int64{},
			unsealed:     map[string]bool{},
			positions:    map[int32]int64{},
		},
	}
	cs.reader, err = NewTopicReader(TopicReaderConfig{
		Kafka: s,
		Topic: topic,
		// Committed writes only: a writer fenced or killed mid-transaction, or that aborted,
		// leaves nothing applied (docs/console.md#more-than-one-console).
		ReadCommitted: true,
		Apply:         cs.apply,
		Position:      cs.position,
		Polled:        cs.polled,
		Follow:        true,
		Opts:          append([]kgo.Opt{kgo.FetchMaxWait(ConfigFetchMaxWait)}, opts...),
		Logger:        logger,
	})
	if err != nil {
		return nil, fmt.Errorf("config store: %w", err)
	}
	cs.snap.Store(emptySnapshot())
	return cs, nil
}

// Snapshot returns the current snapshot: never nil, empty (version 0) until the store is
// ready.
func (cs *ConfigStore) Snapshot() *Snapshot { return cs.snap.Load() }

// Ready returns a channel that is closed once the store has read the topic up to the end
// offsets it found when Run started, and published that config.
func (cs *ConfigStore) Ready() <-chan struct{} { return cs.reader.Ready() }

// Changes returns a channel that is closed when a snapshot newer than the current one is
// published. To react to every change without missing one, prefer Snapshot().Stale().
func (cs *ConfigStore) Changes() <-chan struct{} { return cs.Snapshot().Stale() }

// WaitFor blocks until the current snapshot satisfies cond, and returns that snapshot, or
// returns ctx's error. The console uses it to read its own writes.
func (cs *ConfigStore) WaitFor(ctx context.Context, cond func(*Snapshot) bool) (*Snapshot, error) {
	for {
		s := cs.Snapshot()
		if s.Version() > 0 && cond(s) {
			return s, nil
		}
		select {
		case <-s.Stale():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Run consumes the topic until ctx is cancelled, then closes its client and returns nil. It
// returns an error if it cannot create its client or is called twice. Records that do not
// decode are logged by key and offset (never by value: it may hold secrets) and skipped; the
// object keeps its previous state.
func (cs *ConfigStore) Run(ctx context.Context) error {
	if err := cs.reader.Run(ctx); err != nil {
		return fmt.Errorf("config store: %w", err)
	}
	return nil
}

// position notes how far the store has read a partition (published with the next snapshot,
// for Snapshot.ReadThrough): a transaction's marker, which Apply does not see, moves it too.
func (cs *ConfigStore) position(_ string, partition int32, next int64) {
	if next > cs.state.positions[partition] {
		cs.state.positions[partition] = next
		cs.changed = true
	}
}

// apply applies one record to the state (not yet published).
func (cs *ConfigStore) apply(r *kgo.Record) {
	cs.changed = true
	cs.records++
	o, err := schemas.DecodeConfigRecordWith(string(r.Key), r.Value, cs.keys)
	if err != nil {
		cs.logger.Error().Err(err).Str("key", string(r.Key)).Int32("partition", r.Partition).
			Int64("offset", r.Offset).Msg("skipping config record that does not decode")
		return
	}
	if cs.version > 0 { // a change while running (not the initial load): say what changed
		if changes := schemas.ConfigChanges(cs.state.object(o.Kind, o.ID), o); len(changes) > 0 {
			what := "updated: " + strings.Join(changes, ", ") + " changed"
			if changes[0] == "created" || changes[0] == "deleted" {
				what = changes[0]
			}
			cs.logger.Info().Str("key", o.Key()).Str("origin", o.Origin()).Strs("changed", changes).
				Msg(string(o.Kind) + " " + o.ID + " " + what)
		}
	}
	cs.state.apply(o)
	delete(cs.state.unsealed, o.Key())
	if o.Deleted() {
		delete(cs.state.revisions, o.Key())
	} else {
		cs.state.revisions[o.Key()] = r.Offset + 1
		if schemas.NeedsSealing(schemas.ConfigRecord{Key: o.Key(), Value: r.Value}, cs.keys) {
			cs.state.unsealed[o.Key()] = true
		}
	}
}

// polled publishes the state read so far: once caught up (the first snapshot, which makes the
// store ready), then after every poll that changed something.
func (cs *ConfigStore) polled(caughtUp bool) error {
	if !caughtUp || (cs.version > 0 && !cs.changed) {
		return nil
	}
	cs.changed = false
	cs.version++
	prev := cs.snap.Swap(cs.state.snapshot(cs.version))
	close(prev.stale)
	if cs.version == 1 {
		cs.logger.Info().Uint64("version", cs.version).Int("records", cs.records).Int("sources", len(cs.state.sources)).
			Int("destinations", len(cs.state.destinations)).Int("audiences", len(cs.state.audiences)).Int("computed_traits", len(cs.state.traits)).
			Msg("config loaded")
	}
	return nil
}
