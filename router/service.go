package router

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Deps are the service's dependencies.
type Deps struct {
	// Kafka are the settings of every client.
	Kafka platform.KafkaSettings
	// KafkaOpts are added to every client (tests use them).
	KafkaOpts []kgo.Opt
	// Config returns the current config snapshot; it is called once per poll, so a config
	// change applies from the next poll on.
	Config func() Snapshot
	// ConfigReady, when set, is waited for before routing starts.
	ConfigReady <-chan struct{}
	Logger      zerolog.Logger
	// Registerer for metrics; nil: a private registry.
	Registerer prometheus.Registerer
	// Health gets a Kafka check; nil: none.
	Health *platform.Health
}

// Service is the router: the tracking.events fan-out, the tracking.deletions consumer and the
// suppression list.
type Service struct {
	cfg      Config
	deps     Deps
	logger   zerolog.Logger
	metrics  *metrics
	sup      *suppressions
	producer *kgo.Client // suppression-list writes
	now      func() time.Time
}

// New builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Config == nil {
		return nil, errors.New("router: Deps.Config is required")
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	s := &Service{cfg: cfg, deps: deps, logger: deps.Logger.With().Str("service", "router").Logger(), now: time.Now}
	var err error
	s.sup = newSuppressions(cfg.SuppressionsTopic, deps.Kafka, deps.KafkaOpts, s.logger)
	if s.metrics, err = newMetrics(deps.Registerer, s.sup); err != nil {
		return nil, err
	}
	popts := append([]kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0)}, deps.KafkaOpts...)
	if s.producer, err = platform.NewKafkaClient(deps.Kafka, s.logger, popts...); err != nil {
		return nil, fmt.Errorf("router producer: %w", err)
	}
	if deps.Health != nil {
		deps.Health.AddCheck("kafka", platform.KafkaCheck(s.producer))
	}
	return s, nil
}

// Run routes until ctx is done. In exactly-once mode a stopped router aborts its open
// transaction; at least once, it commits what it produced.
func (s *Service) Run(ctx context.Context) error {
	defer s.producer.Close()
	var ready []<-chan struct{}
	if s.deps.ConfigReady != nil {
		ready = append(ready, s.deps.ConfigReady)
	}
	events := &pipe{
		name: "router events", group: s.cfg.Group, topic: s.cfg.EventsTopic,
		exactlyOnce: s.cfg.ExactlyOnce, txnID: s.cfg.TransactionalID + "-events", txnTimeout: s.cfg.TransactionTimeout,
		maxPoll: s.cfg.MaxPollRecords, kafka: s.deps.Kafka, opts: s.deps.KafkaOpts,
		logger: s.logger.With().Str("consumer", "events").Logger(), transform: s.routeBatch,
		ready: append(ready, s.sup.Ready()),
	}
	deletions := &pipe{
		name: "router deletions", group: s.cfg.DeletionsGroup, topic: s.cfg.DeletionsTopic,
		exactlyOnce: s.cfg.ExactlyOnce, txnID: s.cfg.TransactionalID + "-deletions", txnTimeout: s.cfg.TransactionTimeout,
		maxPoll: 500, kafka: s.deps.Kafka, opts: s.deps.KafkaOpts,
		logger: s.logger.With().Str("consumer", "deletions").Logger(), transform: s.deleteBatch,
		ready: append(ready, s.sup.Ready()),
	}
	s.logger.Info().Bool("exactly_once", s.cfg.ExactlyOnce).Msg("router running")
	return platform.RunAll(ctx, s.sup, events, deletions)
}

// routeBatch routes one poll of tracking.events.
func (s *Service) routeBatch(_ context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
	step := Step{
		DeliveriesTopic: s.cfg.DeliveriesTopic,
		Config:          s.deps.Config(),
		Suppressions:    s.sup,
		FirstAttemptAt:  []byte(schemas.FormatTimestamp(s.now())),
	}
	var (
		out      = make([]*kgo.Record, 0, fs.NumRecords())
		outcomes = map[Outcome]int{}
		perDest  = map[string]int{}
	)
	fs.EachRecord(func(r *kgo.Record) {
		n := len(out)
		var o Outcome
		var err error
		out, o, err = step.Route(r, out)
		outcomes[o]++
		if err != nil {
			s.logger.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).
				Msg("skipping a tracking.events record that is not a routable message")
		}
		for _, d := range out[n:] {
			perDest[string(d.Headers[0].Value)]++
		}
	})
	for o, n := range outcomes {
		s.metrics.messages.WithLabelValues(string(o)).Add(float64(n))
	}
	for d, n := range perDest {
		s.metrics.deliveries.WithLabelValues(d, "message").Add(float64(n))
	}
	return out, nil
}

// deleteBatch turns one poll of tracking.deletions into delete notices and suppression-list
// writes. The suppression writes are made (and acknowledged) before the notices are produced;
// they are idempotent, so a batch read again after a crash writes the same state again.
func (s *Service) deleteBatch(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
	snap := s.deps.Config()
	var out []*kgo.Record
	var err error
	fs.EachRecord(func(r *kgo.Record) {
		if err != nil {
			return
		}
		req, at, derr := schemas.DecodeDeletionRequest(r.Value)
		if derr != nil {
			s.metrics.deletions.WithLabelValues("invalid").Inc()
			s.logger.Warn().Err(derr).Int32("partition", r.Partition).Int64("offset", r.Offset).
				Msg("skipping a deletion request that does not decode")
			return
		}
		if at.IsZero() {
			at = r.Timestamp
		}
		reqID := req.RequestID
		if reqID == "" {
			reqID = r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "-" + strconv.FormatInt(r.Offset, 10)
		}
		switch {
		case req.Suppresses():
			err = s.writeSuppression(ctx, req.UserID, schemas.Suppression{UserID: req.UserID, RequestID: reqID, SuppressedAt: schemas.FormatTimestamp(at)}.Record())
		case req.Kind == schemas.KindUnsuppress:
			err = s.writeSuppression(ctx, req.UserID, nil)
		}
		if err != nil {
			return
		}
		s.metrics.deletions.WithLabelValues(req.Kind).Inc()
		if req.Deletes() {
			out = s.deleteNotices(out, snap, req, reqID, at)
		}
	})
	return out, err
}

// deleteNotices appends one delete notice per (source, enabled destination) the request
// affects: the sources it names, or every source.
func (s *Service) deleteNotices(out []*kgo.Record, snap Snapshot, req *schemas.DeletionRequest, reqID string, at time.Time) []*kgo.Record {
	sources := req.SourceIDs
	if len(sources) == 0 {
		for _, src := range snap.Sources() {
			sources = append(sources, src.ID)
		}
	}
	body := schemas.AppendDeleteBody(nil, req.UserID, at)
	step := Step{DeliveriesTopic: s.cfg.DeliveriesTopic, FirstAttemptAt: []byte(schemas.FormatTimestamp(s.now()))}
	for _, sid := range sources {
		if _, ok := snap.SourceByID(sid); !ok {
			s.logger.Warn().Str("source", sid).Str("request", reqID).Msg("deletion request names an unknown source")
			continue
		}
		for _, d := range snap.DestinationsForSource(sid) {
			if !d.IsEnabled() || d.Type != schemas.DestinationTypeWebhooks {
				continue
			}
			out = append(out, step.delivery(d.ID, req.UserID, []byte("delete-"+reqID+"-"+sid), typeValue(schemas.TypeDelete), []byte(sid), body))
			s.metrics.deliveries.WithLabelValues(d.ID, "delete").Inc()
		}
	}
	return out
}

// writeSuppression writes one suppression-list record (value nil: a tombstone), retrying until
// Kafka acknowledges it or ctx is done, and applies it locally.
func (s *Service) writeSuppression(ctx context.Context, userID string, value []byte) error {
	rec := &kgo.Record{Topic: s.cfg.SuppressionsTopic, Key: []byte(userID), Value: value}
	for {
		err := s.producer.ProduceSync(ctx, rec).FirstErr()
		if err == nil {
			s.sup.apply(userID, value != nil)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.logger.Warn().Err(err).Msg("writing the suppression list; retrying")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
