package platform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// RegulationsConfig configures a Regulations view. SuppressionsTopic is required.
type RegulationsConfig struct {
	// Kafka are the settings of the readers' clients.
	Kafka KafkaSettings
	// SuppressionsTopic is the suppression list (schemas.TopicSuppressions): key userId, a
	// tombstone lifts the suppression.
	SuppressionsTopic string
	// StatusTopic, when set, is tracking.deletions.status (schemas.TopicDeletionsStatus): every
	// record of a request that deletes (DELETE_ONLY, SUPPRESS_WITH_DELETE) gives its user's
	// deletion time, its processedAt. Empty: deletions are not read (the router needs only the
	// suppression list).
	StatusTopic string
	// Opts are added to the readers' clients (tests use them).
	Opts []kgo.Opt
	// Logger receives the readers' warnings and the "loaded" lines.
	Logger zerolog.Logger
}

// Regulations is what the regulations of tracking.deletions left in force, in memory: the
// suppressed users (tracking.suppressions, compacted) and, with a StatusTopic, when each
// deleted user's deletion was processed (the latest processedAt of its deleting requests on
// tracking.deletions.status). Every replica reads both topics whole, without a consumer
// group (a TopicReader each, read committed: the router writes the status records in its
// transactions). It is the one implementation the router (its suppression check) and the
// deliverer (its egress check, docs/delivery.md#deleted-and-suppressed-users) share.
//
// The lookups take a read lock and allocate nothing; they are safe for concurrent use, as are
// the Apply methods, by which a service records what it learnt before the topics echo it.
type Regulations struct {
	cfg     RegulationsConfig
	readers []*TopicReader
	ready   chan struct{}

	mu         sync.RWMutex
	suppressed map[string]struct{}
	deleted    map[string]time.Time
}

// NewRegulations checks cfg; the readers' clients are created by Run.
func NewRegulations(cfg RegulationsConfig) (*Regulations, error) {
	if cfg.SuppressionsTopic == "" {
		return nil, errors.New("regulations: no suppressions topic")
	}
	g := &Regulations{cfg: cfg, ready: make(chan struct{}), suppressed: map[string]struct{}{}, deleted: map[string]time.Time{}}
	opts := append([]kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}, cfg.Opts...)
	sup, err := NewTopicReader(TopicReaderConfig{
		Kafka: cfg.Kafka, Topic: cfg.SuppressionsTopic, Follow: true, Opts: opts, Logger: cfg.Logger,
		Apply:  func(r *kgo.Record) { g.ApplySuppression(string(r.Key), r.Value != nil) },
		Polled: g.loaded(cfg.SuppressionsTopic),
	})
	if err != nil {
		return nil, fmt.Errorf("suppression list: %w", err)
	}
	g.readers = append(g.readers, sup)
	if cfg.StatusTopic != "" {
		st, err := NewTopicReader(TopicReaderConfig{
			Kafka: cfg.Kafka, Topic: cfg.StatusTopic, Follow: true, Opts: opts, Logger: cfg.Logger,
			Apply:  g.applyStatus,
			Polled: g.loaded(cfg.StatusTopic),
		})
		if err != nil {
			return nil, fmt.Errorf("deletion status: %w", err)
		}
		g.readers = append(g.readers, st)
	}
	return g, nil
}

// applyStatus reads one tracking.deletions.status record: a deleting request's user and
// processedAt. A record that does not decode is logged and skipped.
func (g *Regulations) applyStatus(r *kgo.Record) {
	if r.Value == nil {
		return
	}
	st, err := schemas.DecodeDeletionStatus(r.Value)
	if err != nil || st.UserID == "" {
		g.cfg.Logger.Warn().Err(err).Str("topic", r.Topic).Int32("partition", r.Partition).Int64("offset", r.Offset).
			Msg("skipping a deletion status record that does not decode")
		return
	}
	if st.Kind != schemas.KindDeleteOnly && st.Kind != schemas.KindSuppressWithDelete {
		return
	}
	at, err := schemas.ParseTimestamp(st.ProcessedAt)
	if err != nil {
		at = r.Timestamp
	}
	g.ApplyDeletion(st.UserID, at)
}

// loaded returns a TopicReader's Polled: it says once that topic was read to its end.
func (g *Regulations) loaded(topic string) func(bool) error {
	said := false
	return func(caughtUp bool) error {
		if caughtUp && !said {
			said = true
			s, d := g.Len()
			g.cfg.Logger.Info().Str("topic", topic).Int("suppressed_users", s).Int("deleted_users", d).Msg("regulations loaded")
		}
		return nil
	}
}

// Check reports whether user is suppressed, and when its latest deletion was processed (zero:
// never). user is a byte slice so that a record key's suffix can be looked up without a copy.
func (g *Regulations) Check(user []byte) (suppressed bool, deletedAt time.Time) {
	g.mu.RLock()
	_, suppressed = g.suppressed[string(user)]
	deletedAt = g.deleted[string(user)]
	g.mu.RUnlock()
	return suppressed, deletedAt
}

// Suppressed reports whether userID is on the suppression list.
func (g *Regulations) Suppressed(userID string) bool {
	g.mu.RLock()
	_, ok := g.suppressed[userID]
	g.mu.RUnlock()
	return ok
}

// ApplySuppression records one suppression (on) or its lifting.
func (g *Regulations) ApplySuppression(userID string, on bool) {
	g.mu.Lock()
	if on {
		g.suppressed[userID] = struct{}{}
	} else {
		delete(g.suppressed, userID)
	}
	g.mu.Unlock()
}

// ApplyDeletion records that userID's deletion was processed at at; the latest time is kept.
func (g *Regulations) ApplyDeletion(userID string, at time.Time) {
	g.mu.Lock()
	if at.After(g.deleted[userID]) {
		g.deleted[userID] = at
	}
	g.mu.Unlock()
}

// Len is how many users are suppressed, and how many have a deletion.
func (g *Regulations) Len() (suppressed, deleted int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.suppressed), len(g.deleted)
}

// Ready is closed once every topic has been read up to the end offsets found when Run started.
func (g *Regulations) Ready() <-chan struct{} { return g.ready }

// Run reads the topics from their start until ctx is done; Run is called once.
func (g *Regulations) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for _, r := range g.readers {
			select {
			case <-r.Ready():
			case <-ctx.Done():
				return
			}
		}
		close(g.ready)
	}()
	runners := make([]Runner, len(g.readers))
	for i, r := range g.readers {
		runners[i] = r
	}
	if err := RunAll(ctx, runners...); err != nil {
		return fmt.Errorf("regulations: %w", err)
	}
	return nil
}
