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
	// Once reads the topics to the end offsets found when Run starts, then Run returns (a DLQ
	// replay's look at the regulations); a missing topic is an error then. False: Run follows
	// the topics until its context is done.
	Once bool
	// OnStatus, when set, is called (from the status topic's reader) with each record of
	// StatusTopic after it was applied: the router's status of a request (st), or another
	// store's report on it (rep) — the deliverer writes its own report from it.
	OnStatus func(st *schemas.DeletionStatus, rep *schemas.DeletionReport)
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
	cfg       RegulationsConfig
	readers   []*TopicReader
	ready     chan struct{}
	readyOnce sync.Once

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
	// Read committed (the reader sees the transactions' markers, so that a topic whose last
	// record is a commit marker is read to its end, and applies none).
	sup, err := NewTopicReader(TopicReaderConfig{
		Kafka: cfg.Kafka, Topic: cfg.SuppressionsTopic, ReadCommitted: true, Follow: !cfg.Once, NoWait: cfg.Once,
		Opts: cfg.Opts, Logger: cfg.Logger,
		Apply:  func(r *kgo.Record) { g.ApplySuppression(string(r.Key), r.Value != nil) },
		Polled: g.loaded(cfg.SuppressionsTopic),
	})
	if err != nil {
		return nil, fmt.Errorf("suppression list: %w", err)
	}
	g.readers = append(g.readers, sup)
	if cfg.StatusTopic != "" {
		st, err := NewTopicReader(TopicReaderConfig{
			Kafka: cfg.Kafka, Topic: cfg.StatusTopic, ReadCommitted: true, Follow: !cfg.Once, NoWait: cfg.Once,
			Opts: cfg.Opts, Logger: cfg.Logger,
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
	rep, st, err := schemas.DecodeDeletionStatusRecord(r.Value)
	if err == nil && st == nil { // another store's report (docs/topics.md#trackingdeletionsstatus): no deletion in it
		if g.cfg.OnStatus != nil {
			g.cfg.OnStatus(nil, &rep)
		}
		return
	}
	if err != nil || st.UserID == "" {
		g.cfg.Logger.Warn().Err(err).Str("topic", r.Topic).Int32("partition", r.Partition).Int64("offset", r.Offset).
			Msg("skipping a deletion status record that does not decode")
		return
	}
	if st.Kind == schemas.KindDeleteOnly || st.Kind == schemas.KindSuppressWithDelete {
		at, err := schemas.ParseTimestamp(st.ProcessedAt)
		if err != nil {
			at = r.Timestamp
		}
		g.ApplyDeletion(st.UserID, at)
	}
	if g.cfg.OnStatus != nil {
		g.cfg.OnStatus(st, nil)
	}
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

// Run reads the topics from their start until ctx is done (Once: until it read them to their
// end); Run is called once.
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
		g.readyOnce.Do(func() { close(g.ready) })
	}()
	// Following, a reader that stops stops the other (as RunAll); once, each reads to its end.
	errs := make([]error, len(g.readers))
	var wg sync.WaitGroup
	for i, r := range g.readers {
		wg.Go(func() {
			errs[i] = r.Run(ctx)
			if errs[i] != nil || !g.cfg.Once {
				cancel()
			}
		})
	}
	wg.Wait()
	if g.cfg.Once && g.allReady() {
		g.readyOnce.Do(func() { close(g.ready) })
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("regulations: %w", err)
	}
	return nil
}

// allReady says whether every reader has read its topic to its end.
func (g *Regulations) allReady() bool {
	for _, r := range g.readers {
		select {
		case <-r.Ready():
		default:
			return false
		}
	}
	return true
}

// Reasons a regulation forbids delivering a message (Regulations.Forgets).
const (
	// ForgetDeleted: the user was deleted after the message was accepted.
	ForgetDeleted = "deleted"
	// ForgetSuppressed: the user is suppressed.
	ForgetSuppressed = "suppressed"
)

// Forgets says whether the webhooks.deliveries record r (or a dead letter or a retry-tier copy
// of one) of destination destID must not be delivered: ForgetDeleted when its user has a
// deletion processed after the message was accepted (AcceptedAt), else ForgetSuppressed when
// its user is suppressed, else "". exempt records (a delete notice, a test delivery) are never
// forgotten, nor is a record whose key is not "<destID>:<user>". It allocates nothing; only a
// deleted user's record is read further, for its acceptance time.
func (g *Regulations) Forgets(r *kgo.Record, destID string, exempt bool) string {
	if exempt {
		return ""
	}
	user, ok := DeliveryUser(r.Key, destID)
	if !ok {
		return ""
	}
	suppressed, deletedAt := g.Check(user)
	if !deletedAt.IsZero() && AcceptedAt(r).Before(deletedAt) {
		return ForgetDeleted
	}
	if suppressed {
		return ForgetSuppressed
	}
	return ""
}

// DeliveryUser returns the user of a webhooks.deliveries record (docs/topics.md#webhooksdeliveries):
// its key after "<destID>:", the message's userId, else its anonymousId; false when the key
// does not have that form. It aliases key.
func DeliveryUser(key []byte, destID string) ([]byte, bool) {
	if len(key) <= len(destID) || key[len(destID)] != ':' || string(key[:len(destID)]) != destID {
		return nil, false
	}
	return key[len(destID)+1:], true
}

// errStopScan stops schemas.EachMember once the wanted member was seen.
var errStopScan = errors.New("stop")

// AcceptedAt is when the message of a webhooks.deliveries record was accepted: its body's
// receivedAt (set by ingest, and by audiences on its identify calls), else its first-attempt-at
// header (when the router routed it; a DLQ replay resets it), else the record's Kafka
// timestamp.
func AcceptedAt(r *kgo.Record) time.Time {
	var at time.Time
	_ = schemas.EachMember(r.Value, func(k, v []byte) error {
		if string(k) != "receivedAt" {
			return nil
		}
		if text, ok := schemas.JSONString(v); ok {
			at, _ = schemas.ParseTimestamp(string(text))
		}
		return errStopScan
	})
	if at.IsZero() {
		for _, h := range r.Headers {
			if h.Key == schemas.HeaderFirstAttemptAt {
				at, _ = schemas.ParseTimestamp(string(h.Value))
				break
			}
		}
	}
	if at.IsZero() {
		at = r.Timestamp
	}
	return at
}

// IsDeleteNotice reports whether r's type header says delete: a delete notice.
func IsDeleteNotice(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderType {
			return string(h.Value) == schemas.TypeDelete
		}
	}
	return false
}
