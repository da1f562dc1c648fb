package audiences

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Snapshot is the part of the config the service reads.
type Snapshot interface {
	Version() uint64
	Audiences() []*schemas.Audience
	ComputedTraits() []*schemas.ComputedTrait
	// Identity is the config's identity rules (nil: none): what it gives overrides the
	// AUDIENCES_IDENTITY_* settings (docs/audiences.md#identity-rules).
	Identity() *schemas.IdentityRules
}

// Deps are the service's dependencies.
type Deps struct {
	// Deps are the dependencies every service shares (docs/architecture.md#how-a-service-is-wired):
	// the Kafka settings and options of every client, the logger, the metrics' Registerer
	// (nil: a private registry) and Gatherer (when set, served on /metrics of the profile
	// API's address), and the Health that gets a Kafka check and the "audiences state"
	// component (nil: none).
	platform.Deps
	// Config returns the current config snapshot.
	Config func() Snapshot
	// ConfigReady, when set, is waited for before the first poll.
	ConfigReady <-chan struct{}
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
	// held are the changelog buffers of the transaction in progress, recycled once it
	// committed (ended).
	held changelogBufs

	keyPart kgo.TopicPartitioner // the pipe goroutine's
	keyRecs gosync.Pool          // partitionOf's records
	apiPart gosync.Mutex         // guards apiKey
	apiKey  kgo.TopicPartitioner

	server    *platform.HTTPServer
	peers     *http.Client
	ownersMu  gosync.Mutex
	ownersMap map[int32]string
	ownersAt  time.Time
	limiter   *rate.Limiter // of Segment's Profile API (AUDIENCES_PROFILE_API_RATE); nil: none
	// rules are the identity rules in force: AUDIENCES_IDENTITY_* with the config's identity
	// section over them (refreshModel; docs/audiences.md#identity-rules). Swapped whole: the
	// Segment Profile API reads them beside the transform.
	rules atomic.Pointer[identityRules]
	bf    backfills // guarded by mu (backfill.go)
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
		bf:      backfills{jobs: map[int32]*backfillJob{}, wake: make(chan struct{}, 1)},
		keyPart: kgo.StickyKeyPartitioner(nil).ForTopic(cfg.EventsTopic),
		apiKey:  kgo.StickyKeyPartitioner(nil).ForTopic(cfg.EventsTopic)}
	rules, err := compileRules(&cfg, nil)
	if err != nil {
		return nil, err
	}
	s.rules.Store(rules)
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
	if cfg.ProfileAPIRate > 0 {
		s.limiter = rate.NewLimiter(rate.Limit(cfg.ProfileAPIRate), cfg.ProfileAPIRate)
	}
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
	return platform.RunAll(ctx, main, deletions, platform.RunnerFunc(s.tick), platform.RunnerFunc(s.runBackfills))
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
