package deliverer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Destinations finds a destination by id; *platform.Snapshot is one.
type Destinations interface {
	DestinationByID(id string) (*schemas.Destination, bool)
}

var _ Destinations = (*platform.Snapshot)(nil)

// Deps are the service's dependencies.
type Deps struct {
	// Deps are the dependencies every service shares (docs/architecture.md#how-a-service-is-wired):
	// the Kafka settings and options of the client, the logger, the metrics' Registerer (nil:
	// a private registry), and the Health that gets a Kafka check (nil: none). The deliverer
	// has no HTTP API: Gatherer is not used.
	platform.Deps
	// Config returns the current config snapshot; it is read for every record.
	Config func() Destinations
	// ConfigReady, when set, is waited for before the first poll.
	ConfigReady <-chan struct{}
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// DialContext, when set, opens the connections to webhook endpoints instead of a
	// net.Dialer (tests: an in-memory network, so that delivery runs in a testing/synctest
	// bubble). The address guard is the default dialer's: with DialContext, nothing is refused.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Keys open the sealed bodies of deliveries (docs/security.md#crypto-shredding); the
	// caller runs it. nil: the service makes its own from Kafka and runs it in Run.
	Keys *shred.Keyring
}

// Service is the deliverer.
type Service struct {
	cfg     Config
	deps    Deps
	logger  zerolog.Logger
	client  *webhookClient
	local   *localLag // the process's scheduler latency (lag.go)
	cl      *kgo.Client
	metrics *metrics
	hosts   *hosts
	flog    *failureLog // failures and recoveries in the log
	lag     *platform.LagCollector
	track   *tracker
	// regs are the suppressed and deleted users (regulations.go).
	regs *platform.Regulations
	// reports is the deliverer's part of the regulations' status; droppedBy counts the
	// deliveries dropped per user, for it (regulations.go).
	reports   reports
	droppedMu sync.Mutex
	droppedBy map[string]int64
	// recovery logs when the deliverer resumed after a Kafka outage (docs/operations.md#broker-outages).
	recovery *platform.Recovery
	sem      chan struct{}
	now      func() time.Time
	keys     *shred.Keyring
	ownKeys  bool // keys is the service's own: Run runs it

	tierDelays []time.Duration
	tierTopics []string
	isTier     map[string]bool

	mu       sync.Mutex
	held     map[partKey]*held // tier partitions paused until their next record is due (pause.go)
	limiters map[string]*destLimiter

	// order holds back the records of a destination with ordering: perUser (ordering.go).
	order ordering
	warm  warming

	parkMu sync.Mutex
	parked parking // retry-tier records waiting for their endpoint's breaker or pause (park.go)

	// streaks are the destinations failing since their last delivery (autodisable.go).
	streaks failStreaks
	seen    seenNotices // the notices of every deliverer (autodisable.go)

	// marks are the retry-now marks of webhooks.retried-now (retrynow.go).
	marks *retryMarks

	// grace is the context of the work that may outlive the stop signal: POSTs in progress,
	// hand-offs, the attempt log, the last commits. Run ends it SHUTDOWN_TIMEOUT after its ctx
	// is done (platform.GraceContext); it is also the Kafka client's context, so every Kafka
	// request still waiting then fails at once.
	grace    context.Context
	endGrace context.CancelFunc

	// wg counts the goroutines and hand-offs in progress; Run returns once it is zero. Add is
	// only called by the poll loop (before Run waits) or by work wg already counts (so the
	// count is above zero): see spawn.
	wg sync.WaitGroup
}

// handOffTimeout bounds one produce of a hand-off (and of an attempt-log record): Kafka
// unreachable for that long fails it, and the hand-off is retried (handOff). franz-go's
// default is no limit.
const handOffTimeout = 30 * time.Second

// New builds the service and its Kafka client (one consumer group over webhooks.deliveries and
// every retry tier; one idempotent producer for tiers, the DLQ and the attempt log).
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Config == nil {
		return nil, errors.New("deliverer: Deps.Config is required")
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	s := &Service{cfg: cfg, deps: deps, logger: deps.Logger.With().Str("service", "deliverer").Logger(),
		track: newTracker(), sem: make(chan struct{}, cfg.MaxInFlight), now: deps.Now,
		held: map[partKey]*held{}, limiters: map[string]*destLimiter{}, isTier: map[string]bool{},
		parked: parking{byUnits: map[string][]*parkedRec{}}}
	if cfg.AllowPrivate {
		// Said once at start, loudly: a setting for make run and the demo receiver that must
		// not reach production unnoticed (docs/security.md#webhook-delivery).
		s.logger.Warn().Str("setting", "WEBHOOK_ALLOW_PRIVATE").
			Msg("WEBHOOK_ALLOW_PRIVATE=true: the address guard is off; webhooks may reach loopback, private and link-local addresses (cloud metadata included)")
	}
	s.grace, s.endGrace = context.WithCancel(context.Background())
	s.tierDelays, s.tierTopics = cfg.tiers()
	for _, t := range s.tierTopics {
		s.isTier[t] = true
	}
	s.marks = newRetryMarks(cfg.RetryWindow + slices.Max(s.tierDelays))
	s.hosts = newHosts(cfg.MaxPerHost, cfg.MaxWaitingPerHost, cfg.BreakerFailures, cfg.BreakerCooldown, s.tierDelays[len(s.tierDelays)-1], s.spawnTask)
	s.flog = newFailureLog(s.logger)
	s.streaks.m = map[string]*failStreak{}
	s.seen.m = map[string]schemas.Notice{}
	s.recovery = platform.NewRecovery(s.logger, "deliverer "+cfg.Group)
	s.hosts.onBreaker = s.flog.breaker
	s.local = newLocalLag()
	s.hosts.local = s.local.roundTrip
	var err error
	if s.client, err = newWebhookClient(cfg, deps.DialContext, s.grace); err != nil {
		s.endGrace()
		return nil, err
	}
	if s.metrics, err = newMetrics(deps.Registerer, s); err != nil {
		s.endGrace()
		return nil, err
	}
	if s.keys = deps.Keys; s.keys == nil {
		s.ownKeys = true
		if s.keys, err = shred.New(shred.Config{Kafka: deps.Kafka, Opts: deps.KafkaOpts, Logger: s.logger}); err != nil {
			s.endGrace()
			return nil, fmt.Errorf("deliverer: %w", err)
		}
	}
	s.regs, err = platform.NewRegulations(platform.RegulationsConfig{Kafka: deps.Kafka, SuppressionsTopic: cfg.SuppressionsTopic,
		StatusTopic: cfg.DeletionsStatusTopic, OnStatus: s.onStatus, Opts: deps.KafkaOpts, Logger: s.logger})
	s.reports.reported, s.droppedBy = map[string]bool{}, map[string]int64{}
	if err != nil {
		s.endGrace()
		return nil, err
	}
	s.lag = platform.NewLagCollector("deliverer", deps.Kafka, s.logger, []string{cfg.Group}, deps.KafkaOpts...)
	if err := deps.Registerer.Register(s.lag); err != nil {
		s.endGrace()
		return nil, fmt.Errorf("registering deliverer metrics: %w", err)
	}
	topics := append([]string{cfg.DeliveriesTopic}, s.tierTopics...)
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		// Bounded read-ahead: a backlog stays in Kafka, not in memory.
		kgo.FetchMaxBytes(8 << 20),
		kgo.MaxBufferedRecords(4000),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.SessionTimeout(20 * time.Second),
		kgo.RecordDeliveryTimeout(handOffTimeout),
		kgo.WithContext(s.grace),
		kgo.WithHooks(s.recovery.Hook()),
		// Compressed even with sealing on (platform.SealedCompression is for the other
		// services): most of what the deliverer writes is attempt records, plain unless they
		// hold an answer (attemptRecord), and they compress well; sealed records go to the
		// retry tiers and the DLQ only on failures.
		kgo.ProducerBatchCompression(kgo.SnappyCompression()),
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	opts = append(opts, deps.KafkaOpts...)
	if s.cl, err = platform.NewKafkaClient(deps.Kafka, s.logger, opts...); err != nil {
		s.endGrace()
		return nil, fmt.Errorf("deliverer Kafka client: %w", err)
	}
	if deps.Health != nil {
		deps.Health.AddCheck("kafka", platform.KafkaCheck(s.cl))
	}
	return s, nil
}

// Run delivers until ctx is done. Then it stops within cfg.ShutdownTimeout (SHUTDOWN_TIMEOUT),
// Kafka reachable or not: the deliveries in progress finish (each bounded by DELIVERY_TIMEOUT)
// and are handed on, what finished is committed, and the group is left. Whatever is unfinished
// when the time is up stays uncommitted and is delivered again after a restart. Run may be
// called once; it closes the Kafka client.
func (s *Service) Run(ctx context.Context) error {
	grace, endGrace := platform.GraceContext(ctx, s.cfg.ShutdownTimeout)
	defer endGrace()
	context.AfterFunc(grace, s.endGrace)
	var keysDone chan error // nil: the keyring is the caller's
	if s.ownKeys {
		// The keyring stops with the stop signal, beside the rest: the deliveries in progress
		// only look keys up (Live), which needs no reading.
		kctx, stopKeys := context.WithCancel(ctx)
		keysDone = make(chan error, 1)
		go func() { keysDone <- s.keys.Run(kctx) }()
		defer func() {
			stopKeys()
			if keysDone != nil {
				<-keysDone
			}
		}()
	}
	// The regulations are read before anything is dispatched, and followed until ctx is done.
	regsDone := make(chan struct{})
	go func() {
		defer close(regsDone)
		if err := s.regs.Run(ctx); err != nil {
			s.logger.Error().Err(err).Msg("reading the regulations stopped: suppressions and deletions made from now on are not applied")
		}
	}()
	defer func() { <-regsDone }()
	// The retry-now marks too (retrynow.go): a tier record a retry-now delivered is not sent.
	marksReady, marksDone := make(chan struct{}), make(chan struct{})
	marksCtx, stopMarks := context.WithCancel(ctx)
	go func() {
		defer close(marksDone)
		if err := s.runMarks(marksCtx, marksReady); err != nil && marksCtx.Err() == nil {
			s.logger.Error().Err(err).Msg("reading the retry-now marks stopped: a tier record retried now since may be sent again")
		}
	}()
	defer func() { stopMarks(); <-marksDone }()
	for _, ready := range []<-chan struct{}{s.deps.ConfigReady, s.regs.Ready(), s.keys.Ready(), marksReady} {
		if ready == nil {
			continue
		}
		select {
		case <-ready:
		case err := <-keysDone: // a master key that does not open the data keys
			keysDone = nil
			s.close(nil)
			return err
		case <-ctx.Done():
			s.close(nil)
			return nil
		}
	}
	s.regulationsLoaded()
	s.logger.Info().Strs("tiers", s.tierTopics).Dur("window", s.cfg.RetryWindow).Bool("allow_private", s.cfg.AllowPrivate).Msg("deliverer running")
	commitsDone := make(chan struct{})
	commitCtx, stopCommits := context.WithCancel(s.grace)
	go func() { defer close(commitsDone); s.commitLoop(commitCtx) }()

	s.spawn(func() { s.parkLoop(ctx) })
	s.spawn(func() { s.autoLoop(ctx) })
	s.spawn(func() { s.runNotices(ctx) })
	s.spawn(func() { s.local.run(ctx) })
	s.poll(ctx)

	// Stopping: no record is dispatched any more, and no tier partition is resumed.
	s.dropHeld(nil)
	finished := make(chan struct{})
	go func() { s.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-s.grace.Done():
		s.logger.Warn().Dur("shutdown_timeout", s.cfg.ShutdownTimeout).
			Msg("stopping: deliveries still in progress at SHUTDOWN_TIMEOUT; they will be delivered again after a restart")
	}
	stopCommits()
	<-commitsDone
	s.commit(s.grace, false)
	s.close(finished)
	return nil
}

// close closes the Kafka client (leaving the group: the final revoke commits what finished,
// by the deadline; hand-offs still buffered fail and stay uncommitted), ends the grace, waits
// for finished (everything Run started has ended) and closes the HTTP connections.
func (s *Service) close(finished <-chan struct{}) {
	s.cl.Close()
	s.lag.Close()
	s.endGrace()
	if finished != nil {
		<-finished
	}
	s.client.close()
}

// poll reads records and dispatches them until ctx is done.
func (s *Service) poll(ctx context.Context) {
	for {
		s.warmDone(ctx) // ordering.go
		fs := s.cl.PollRecords(ctx, s.cfg.MaxPollRecords)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			s.recovery.Failed(err)
			s.logger.Warn().Err(err).Str("topic", t).Int32("partition", p).Msg("fetching")
		})
		if fs.NumRecords() > 0 {
			s.recovery.Resumed(fs)
		}
		// The deletions the poll's delete notices announce apply before any of its records is
		// dispatched (regulations.go).
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if !s.isTier[fp.Topic] {
				s.noteNotices(fp.Records)
			}
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if ctx.Err() != nil || len(fp.Records) == 0 {
				return
			}
			k := partKey{fp.Topic, fp.Partition}
			gen := s.track.genOf(k) // the assignment these records were fetched under
			if !s.isTier[fp.Topic] {
				for _, r := range fp.Records {
					s.dispatch(ctx, r, s.track.add(r, gen))
				}
				return
			}
			s.noteOrdered(fp.Records)
			s.warmRead(k, fp.Records[len(fp.Records)-1].Offset)
			s.dispatchDue(ctx, k, fp.Records, gen, nil)
		})
	}
}

// spawn runs f in a goroutine wg counts. It is called only by the poll loop or by work wg
// already counts, never after Run has seen the count reach zero.
func (s *Service) spawn(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// spawnTask runs t in a goroutine wg counts, then each task it hands on (a delivery whose slot
// t's POST freed: hosts.releaseInto), as spawn is called.
func (s *Service) spawnTask(t task) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		reserveStack(0)
		for t != nil {
			t = t()
		}
	}()
}

// attemptStack is about the stack a delivery's goroutine reaches (a POST through the lean
// client, its answer read, its record written): reserveStack grows a new goroutine's stack to
// it at once, while the stack is nearly empty, where growing it on demand copied it twice,
// deep (runtime.copystack was about 3 % of the whole product's CPU).
const attemptStack = 5 << 10

// reserveStack takes a frame of attemptStack bytes; i is always 0 (a variable index keeps the
// array, and so the frame, from being optimized away).
//
//go:noinline
func reserveStack(i int) byte {
	var b [attemptStack]byte
	b[i] = 1
	return b[i+1]
}
