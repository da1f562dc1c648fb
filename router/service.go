package router

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Deps are the service's dependencies.
type Deps struct {
	// Deps are the dependencies every service shares (docs/architecture.md#how-a-service-is-wired):
	// the Kafka settings and options of every client, the logger, the metrics' Registerer
	// (nil: a private registry), and the Health that gets a Kafka check and the pipes'
	// components (nil: none). The router has no HTTP API: Gatherer is not used.
	platform.Deps
	// Config returns the current config snapshot; it is called once per poll, so a config
	// change applies from the next poll on.
	Config func() Snapshot
	// ConfigReady, when set, is waited for before routing starts.
	ConfigReady <-chan struct{}
	// Keys open the sealed tracking.events records, seal their deliveries and shred deleted
	// users' keys (docs/security.md#crypto-shredding); the caller runs it. nil: the service
	// makes its own from Kafka and runs it in Run.
	Keys *shred.Keyring
}

// Service is the router: the tracking.events fan-out, the tracking.deletions consumer and the
// suppression list.
type Service struct {
	cfg      Config
	deps     Deps
	logger   zerolog.Logger
	metrics  *metrics
	sup      *suppressions
	dedupe   *dedupe     // nil: DEDUPE_WINDOW 0
	batchAt  time.Time   // when the batch being routed was routed (the events pipe's goroutine)
	producer *kgo.Client // suppression-list writes, and router.dedupe's at least once
	lag      *platform.LagCollector
	now      func() time.Time
	keys     *shred.Keyring
	ownKeys  bool         // keys is the service's own: Run runs it
	filters  *FilterCache // compiled destination filters (the events pipe's goroutine)
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
	if s.sup, err = newSuppressions(cfg.SuppressionsTopic, deps.Kafka, deps.KafkaOpts, s.logger); err != nil {
		return nil, err
	}
	if cfg.DedupeWindow > 0 {
		s.dedupe = newDedupe(cfg, deps.Kafka, deps.KafkaOpts, s.logger)
	}
	if s.metrics, err = newMetrics(deps.Registerer, s.sup, s.dedupe); err != nil {
		return nil, err
	}
	s.filters = NewFilterCache(s.metrics.filterDrops)
	if s.keys = deps.Keys; s.keys == nil {
		s.ownKeys = true
		if s.keys, err = shred.New(shred.Config{Kafka: deps.Kafka, Opts: deps.KafkaOpts, Logger: s.logger}); err != nil {
			return nil, fmt.Errorf("router: %w", err)
		}
	}
	popts := append([]kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(newPartitioner(cfg.DedupeTopic))}, deps.KafkaOpts...)
	if s.producer, err = platform.NewKafkaClient(deps.Kafka, s.logger, popts...); err != nil {
		return nil, fmt.Errorf("router producer: %w", err)
	}
	if deps.Health != nil {
		deps.Health.AddCheck("kafka", platform.KafkaCheck(s.producer))
	}
	s.lag = platform.NewLagCollector("router", deps.Kafka, s.logger, []string{cfg.Group, cfg.DeletionsGroup}, deps.KafkaOpts...)
	if err := deps.Registerer.Register(s.lag); err != nil {
		return nil, fmt.Errorf("registering router metrics: %w", err)
	}
	return s, nil
}

// Run routes until ctx is done. In exactly-once mode a stopped router aborts its open
// transaction; at least once, it commits what it produced. Either way the stop takes at most
// ShutdownTimeout: what was not committed by then is routed again after a restart.
func (s *Service) Run(ctx context.Context) error {
	// A suppression write to a broker that never answers is failed when the shutdown deadline
	// passes, by closing its client.
	gctx, gcancel := platform.GraceContext(ctx, s.cfg.ShutdownTimeout)
	defer gcancel()
	closeProducer := sync.OnceFunc(s.producer.Close)
	stopClosing := context.AfterFunc(gctx, closeProducer)
	defer func() {
		stopClosing()
		_ = s.producer.Flush(gctx) // at least once, the last batch's router.dedupe records
		closeProducer()
		s.lag.Close()
	}()
	var ready []<-chan struct{}
	if s.deps.ConfigReady != nil {
		ready = append(ready, s.deps.ConfigReady)
	}
	ready = append(ready, s.sup.Ready(), s.keys.Ready())
	pipe := func(name, group, topic, txnSuffix string, maxPoll int, transform platform.Transform, dd *dedupe) (*platform.Pipe, error) {
		cfg := platform.PipeConfig{
			Name: "router " + name, Kafka: s.deps.Kafka, Group: group, Topics: []string{topic},
			Transform: transform, ExactlyOnce: s.cfg.ExactlyOnce, MaxPollRecords: maxPoll,
			ShutdownTimeout: s.cfg.ShutdownTimeout, Ready: ready, Health: s.deps.Health,
			Logger: s.logger.With().Str("consumer", name).Logger(),
			Opts:   append([]kgo.Opt{kgo.SessionTimeout(20 * time.Second)}, s.deps.KafkaOpts...),
		}
		if dd != nil {
			reset := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { dd.reset(ps[s.cfg.EventsTopic]) }
			cfg.Opts = append(cfg.Opts, kgo.RecordPartitioner(newPartitioner(s.cfg.DedupeTopic)),
				kgo.OnPartitionsAssigned(reset), kgo.OnPartitionsRevoked(reset), kgo.OnPartitionsLost(reset))
			cfg.Ended = s.batchEnded
		}
		if s.cfg.ExactlyOnce {
			cfg.TransactionalID = s.cfg.TransactionalID + txnSuffix
			cfg.TransactionTimeout = s.cfg.TransactionTimeout
			// Looked at for transactions Kafka left open after a broker restart
			// (docs/operations.md#hanging-transactions).
			cfg.TransactionTopics = []string{s.cfg.DeliveriesTopic, s.cfg.DedupeTopic, s.cfg.DeletionsStatusTopic, s.cfg.EventsTopic}
			if s.cfg.FilteredRecords {
				cfg.TransactionTopics = append(cfg.TransactionTopics, s.cfg.AttemptsTopic)
			}
		}
		// Static membership: a restarted router takes its predecessor's partitions back at
		// once instead of waiting for the dead member's session to time out.
		cfg.InstanceID = s.cfg.TransactionalID + txnSuffix
		return platform.NewPipe(cfg)
	}
	events, err := pipe("events", s.cfg.Group, s.cfg.EventsTopic, "-events", s.cfg.MaxPollRecords, s.routeBatch, s.dedupe)
	if err != nil {
		return err
	}
	deletions, err := pipe("deletions", s.cfg.DeletionsGroup, s.cfg.DeletionsTopic, "-deletions", 500, s.deleteBatch, nil)
	if err != nil {
		return err
	}
	s.logger.Info().Bool("exactly_once", s.cfg.ExactlyOnce).Msg("router running")
	runners := []platform.Runner{s.sup, events, deletions}
	if s.ownKeys {
		runners = append(runners, s.keys)
	}
	return platform.RunAll(ctx, runners...)
}

// routeBatch routes one poll of tracking.events. With de-duplication on, a message whose
// (source, messageId) was routed within the window is dropped, and the batch's pairs go to
// router.dedupe: in its transaction (exactly once), or once it was handed on (batchEnded).
func (s *Service) routeBatch(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
	if s.dedupe != nil {
		if err := s.dedupe.prepare(ctx, fs); err != nil {
			return nil, err
		}
	}
	s.batchAt = s.now()
	step := Step{
		DeliveriesTopic: s.cfg.DeliveriesTopic,
		Config:          s.deps.Config(),
		Suppressions:    s.sup,
		FirstAttemptAt:  []byte(schemas.FormatTimestamp(s.batchAt)),
		Keys:            s.keys,
		EventsTopic:     s.cfg.EventsTopic,
		Filters:         s.filters,
		Tracer:          s.deps.Tracer,
	}
	if s.cfg.FilteredRecords {
		step.AttemptsTopic = s.cfg.AttemptsTopic
	}
	out := Deliveries{Records: make([]*kgo.Record, 0, fs.NumRecords())}
	outcomes := map[Outcome]int{}
	nowMs := s.batchAt.UnixMilli()
	var unavailable error
	fs.EachRecord(func(r *kgo.Record) {
		if unavailable != nil {
			return
		}
		if s.dedupe != nil {
			src, id := headerValue(r, schemas.HeaderSourceID), headerValue(r, schemas.HeaderMessageID)
			if len(src) > 0 && len(id) > 0 && s.dedupe.seenBefore(r.Partition, src, id, nowMs) {
				outcomes[Duplicate]++
				out = step.Filter(out, string(src), string(id), schemas.FilterDuplicate)
				return
			}
		}
		var o Outcome
		var err error
		out, o, err = step.Route(r, out)
		if errors.Is(err, shred.ErrUnavailable) {
			unavailable = err // the batch is read again: it cannot be routed now
			return
		}
		outcomes[o]++
		if err != nil {
			s.logger.Warn().Err(err).Int32("partition", r.Partition).Int64("offset", r.Offset).
				Msg("skipping a tracking.events record that is not a routable message")
		}
	})
	if unavailable != nil {
		return nil, fmt.Errorf("routing tracking.events: %w", unavailable)
	}
	for o, n := range outcomes {
		s.metrics.messages.WithLabelValues(string(o)).Add(float64(n))
	}
	perDest := map[string]int{}
	for _, d := range out.DestinationIDs {
		perDest[d]++
	}
	for d, n := range perDest {
		s.metrics.deliveries.WithLabelValues(d, "message").Add(float64(n))
	}
	// The filtered records go with the deliveries: in the same transaction (exactly once), or
	// acknowledged before the offsets are committed (at least once).
	out.Records = append(out.Records, out.Filtered...)
	s.metrics.filtered.Add(float64(len(out.Filtered)))
	// So do the calls a tracking plan forwards to other sources (docs/routing.md#forwarding).
	out.Records = append(out.Records, out.Forwarded...)
	s.metrics.forwarded.Add(float64(len(out.Forwarded)))
	if s.dedupe != nil && s.cfg.ExactlyOnce {
		out.Records = append(out.Records, s.dedupe.records(s.batchAt)...)
	}
	return out.Records, nil
}

// batchEnded is the events pipe's Ended: a batch handed on is remembered as routed, an
// aborted one forgotten. At least once, its router.dedupe records are written only now, after
// its deliveries were acknowledged: were they written with them, a crash between the two
// acknowledgements would drop, after the restart, messages whose deliveries were never
// written. A dedupe record lost here (a crash, a failed write) only lets a later duplicate
// through.
func (s *Service) batchEnded(handedOn bool) {
	if handedOn && !s.cfg.ExactlyOnce {
		for _, r := range s.dedupe.records(s.batchAt) {
			s.producer.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				if err != nil {
					s.logger.Warn().Err(err).Msg("writing router.dedupe (at least once): a duplicate of this batch may be routed again after a restart")
				}
			})
		}
	}
	s.dedupe.ended(handedOn, s.batchAt)
}

// deleteBatch turns one poll of tracking.deletions into delete notices and suppression-list
// writes, and one tracking.deletions.status record per request it decoded (key: the request
// id; a request that does not decode has none). The suppression writes are made (and
// acknowledged) before the notices are produced; they are idempotent, so a batch read again
// after a crash writes the same state again. The status records are produced with the notices:
// in the Pipe's transaction, or at least once in the same batch, acknowledged before the
// offsets are committed.
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
		// A deletion shreds the user's data keys before anything else is written: every
		// record sealed with them, on every topic, is unreadable from then on
		// (docs/security.md#crypto-shredding).
		shredded := 0
		if req.Deletes() {
			err = platform.RetryUntil(ctx, s.logger, "shredding the data keys of a deleted user", func(ctx context.Context) error {
				var serr error
				shredded, serr = s.keys.Shred(ctx, req.UserID)
				return serr
			})
			if err != nil {
				return
			}
			s.metrics.keysShredded.Add(float64(shredded))
		}
		s.metrics.deletions.WithLabelValues(req.Kind).Inc()
		before := len(out)
		if req.Deletes() {
			out = s.deleteNotices(out, snap, req, reqID, at)
		}
		status := schemas.DeletionStatus{RequestID: reqID, UserID: req.UserID, Kind: req.Kind,
			Notices: len(out) - before, KeysShredded: shredded, SuppressionWritten: req.Suppresses() || req.Kind == schemas.KindUnsuppress,
			ProcessedAt: schemas.FormatTimestamp(s.now())}
		out = append(out, &kgo.Record{Topic: s.cfg.DeletionsStatusTopic, Key: []byte(reqID), Value: status.Record()})
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
			if !d.Routed() || d.Type != schemas.DestinationTypeWebhooks {
				continue
			}
			// Plain: a delete notice names only the user, and must reach the receiver even
			// though the user's keys are gone.
			out = append(out, step.delivery(d.ID, req.UserID, []byte("delete-"+reqID+"-"+sid), typeValue(schemas.TypeDelete), []byte(sid), nil, body, platform.TraceContext{}))
			s.metrics.deliveries.WithLabelValues(d.ID, "delete").Inc()
		}
	}
	return out
}

// writeSuppression writes one suppression-list record (value nil: a tombstone), retrying until
// Kafka acknowledges it or ctx is done, and applies it locally.
func (s *Service) writeSuppression(ctx context.Context, userID string, value []byte) error {
	rec := &kgo.Record{Topic: s.cfg.SuppressionsTopic, Key: []byte(userID), Value: value}
	err := platform.RetryUntil(ctx, s.logger, "writing the suppression list", func(ctx context.Context) error {
		if err := s.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return fmt.Errorf("producing to %s: %w", rec.Topic, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.sup.apply(userID, value != nil)
	return nil
}
