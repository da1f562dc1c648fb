package deliverer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Destinations finds a destination by id; *platform.Snapshot is one.
type Destinations interface {
	DestinationByID(id string) (*schemas.Destination, bool)
}

var _ Destinations = (*platform.Snapshot)(nil)

// Deps are the service's dependencies.
type Deps struct {
	Kafka platform.KafkaSettings
	// KafkaOpts are added to the client (tests use them).
	KafkaOpts []kgo.Opt
	// Config returns the current config snapshot; it is read for every record.
	Config func() Destinations
	// ConfigReady, when set, is waited for before the first poll.
	ConfigReady <-chan struct{}
	Logger      zerolog.Logger
	// Registerer for metrics; nil: a private registry.
	Registerer prometheus.Registerer
	// Health gets a Kafka check; nil: none.
	Health *platform.Health
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Service is the deliverer.
type Service struct {
	cfg     Config
	deps    Deps
	logger  zerolog.Logger
	client  *http.Client
	cl      *kgo.Client
	metrics *metrics
	hosts   *hosts
	track   *tracker
	sem     chan struct{}
	now     func() time.Time

	tierDelays []time.Duration
	tierTopics []string
	isTier     map[string]bool

	mu       sync.Mutex
	timers   map[partKey]*time.Timer
	limiters map[string]*destLimiter

	wg sync.WaitGroup // deliveries and hand-offs in progress
}

type destLimiter struct {
	rps float64
	lim *rate.Limiter
}

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
		timers: map[partKey]*time.Timer{}, limiters: map[string]*destLimiter{}, isTier: map[string]bool{}}
	s.tierDelays, s.tierTopics = cfg.tiers()
	for _, t := range s.tierTopics {
		s.isTier[t] = true
	}
	s.hosts = newHosts(cfg.MaxPerHost, cfg.MaxWaitingPerHost, cfg.BreakerFailures, cfg.BreakerCooldown, s.tierDelays[len(s.tierDelays)-1])
	var err error
	if s.client, err = newHTTPClient(cfg); err != nil {
		return nil, err
	}
	if s.metrics, err = newMetrics(deps.Registerer, s); err != nil {
		return nil, err
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
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.SessionTimeout(20 * time.Second),
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	opts = append(opts, deps.KafkaOpts...)
	if s.cl, err = platform.NewKafkaClient(deps.Kafka, s.logger, opts...); err != nil {
		return nil, fmt.Errorf("deliverer Kafka client: %w", err)
	}
	if deps.Health != nil {
		deps.Health.AddCheck("kafka", platform.KafkaCheck(s.cl))
	}
	return s, nil
}

// Run delivers until ctx is done, then waits for the deliveries in progress (each bounded by
// DELIVERY_TIMEOUT), commits what finished and leaves the group.
func (s *Service) Run(ctx context.Context) error {
	defer s.cl.Close()
	if s.deps.ConfigReady != nil {
		select {
		case <-s.deps.ConfigReady:
		case <-ctx.Done():
			return nil
		}
	}
	s.logger.Info().Strs("tiers", s.tierTopics).Dur("window", s.cfg.RetryWindow).Bool("allow_private", s.cfg.AllowPrivate).Msg("deliverer running")
	commitDone := make(chan struct{})
	cctx, stopCommits := context.WithCancel(context.Background())
	go func() { defer close(commitDone); s.commitLoop(cctx) }()
	defer func() {
		s.wg.Wait()
		stopCommits()
		<-commitDone
		s.commit(context.Background(), false)
		s.stopTimers()
	}()
	for {
		fs := s.cl.PollRecords(ctx, s.cfg.MaxPollRecords)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			s.logger.Warn().Err(err).Str("topic", t).Int32("partition", p).Msg("fetching")
		})
		paused := map[partKey]bool{}
		fs.EachRecord(func(r *kgo.Record) {
			k := partKey{r.Topic, r.Partition}
			if paused[k] || ctx.Err() != nil {
				return
			}
			if s.isTier[r.Topic] {
				due := headerTime(r, schemas.HeaderDueAt)
				if now := s.now(); due.After(now) {
					s.pauseUntil(k, r, due)
					paused[k] = true
					return
				} else if !due.IsZero() {
					s.metrics.lateness.WithLabelValues(r.Topic).Observe(now.Sub(due).Seconds())
				}
			}
			s.dispatch(ctx, r, s.track.add(r))
		})
	}
}

// pauseUntil pauses partition k until due, rewinding it to r so r is fetched again then. It
// never sleeps in the poll loop: a timer resumes the partition.
func (s *Service) pauseUntil(k partKey, r *kgo.Record, due time.Time) {
	s.cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.part}})
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{k.topic: {k.part: {Epoch: r.LeaderEpoch, Offset: r.Offset}}})
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.timers[k]; t != nil {
		t.Stop()
	}
	s.timers[k] = time.AfterFunc(time.Until(due), func() {
		s.mu.Lock()
		delete(s.timers, k)
		s.mu.Unlock()
		s.cl.ResumeFetchPartitions(map[string][]int32{k.topic: {k.part}})
	})
}

func (s *Service) stopTimers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.timers {
		t.Stop()
		delete(s.timers, k)
	}
}

// onRevoked commits what finished in the revoked partitions, clears their timers and resumes
// them (pausing outlives a rebalance in franz-go), and forgets them.
func (s *Service) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if marks := s.track.commitMarks(false, revoked); len(marks) > 0 {
		cl.CommitOffsetsSync(ctx, marks, s.commitDone)
	}
	s.onLost(ctx, cl, revoked)
}

func (s *Service) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	for topic, parts := range lost {
		for _, p := range parts {
			k := partKey{topic, p}
			if t := s.timers[k]; t != nil {
				t.Stop()
				delete(s.timers, k)
			}
		}
	}
	s.mu.Unlock()
	cl.ResumeFetchPartitions(lost)
	s.track.drop(lost)
}

func (s *Service) commitLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.commit(ctx, true)
		}
	}
}

func (s *Service) commit(ctx context.Context, onlyDirty bool) {
	marks := s.track.commitMarks(onlyDirty, nil)
	if len(marks) == 0 {
		return
	}
	s.cl.CommitOffsetsSync(ctx, marks, s.commitDone)
}

// commitDone logs a failed commit; the records are then delivered again after a restart.
func (s *Service) commitDone(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err == nil && resp != nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					err = e
				}
			}
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.Warn().Err(err).Msg("committing offsets; those records will be delivered again after a restart")
	}
}

// delivery is what a record's headers say.
type delivery struct {
	r              *kgo.Record
	destID         string
	messageID      string
	attempt        int
	firstAttemptAt time.Time
}

func parseDelivery(r *kgo.Record, now time.Time) delivery {
	d := delivery{r: r, attempt: 1, firstAttemptAt: now}
	for _, h := range r.Headers {
		switch h.Key {
		case schemas.HeaderDestinationID:
			d.destID = string(h.Value)
		case schemas.HeaderMessageID:
			d.messageID = string(h.Value)
		case schemas.HeaderAttempt:
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 0 {
				d.attempt = n
			}
		case schemas.HeaderFirstAttemptAt:
			if t, err := schemas.ParseTimestamp(string(h.Value)); err == nil {
				d.firstAttemptAt = t
			}
		}
	}
	return d
}

// dispatch decides a record: DLQ at once (destination gone, window over), a delivery attempt,
// a wait in its host's queue (host at its in-flight bound), or a retry tier unsent (queue full
// or breaker open). It blocks only on the global bound (MaxInFlight), whose token the record
// holds until its attempt ends or it is handed on.
func (s *Service) dispatch(ctx context.Context, r *kgo.Record, p *pending) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return // not finished: delivered again after a restart
	}
	now := s.now()
	d := parseDelivery(r, now)
	dest, ok := s.deps.Config().DestinationByID(d.destID)
	if !ok || !dest.IsEnabled() {
		why := "destination deleted"
		if ok {
			why = "destination disabled"
		}
		s.toDLQ(ctx, d, p, string(Unavailable), 0, why)
		<-s.sem
		return
	}
	if now.After(d.firstAttemptAt.Add(s.cfg.RetryWindow)) {
		s.toDLQ(ctx, d, p, "retry_window_expired", 0, "no attempt may start more than RETRY_WINDOW after the first")
		<-s.sem
		return
	}
	admitted, busy, reason, wait := s.admit(dest, "", now)
	refuse := func(reason string, wait time.Duration) {
		s.metrics.deferred.WithLabelValues(d.destID, reason).Inc()
		s.toTier(ctx, d, p, d.attempt, s.tierFor(wait), reason, 0)
		<-s.sem
	}
	if len(admitted) > 0 {
		s.launch(ctx, d, p, dest, admitted)
		return
	}
	if busy != "" {
		w := waiter{
			start: func() {
				more, _, _, _ := s.admit(dest, busy, s.now())
				s.launch(ctx, d, p, dest, append(more, webhooksOf(dest, busy)...))
			},
			refuse: refuse,
		}
		for {
			res, freed := s.hosts.enqueue(busy, w, s.now())
			switch res {
			case queued:
				s.metrics.queued.WithLabelValues(d.destID).Inc()
				return
			case full:
				select { // a busy but moving host: wait for room (backpressure)
				case <-freed:
				case <-time.After(minStall):
				case <-ctx.Done():
					<-s.sem
					return // not finished: delivered again after a restart
				}
				continue
			}
			reason = refusedBusy
			break
		}
	}
	refuse(reason, wait)
}

// admit takes a slot on each URL's host that has one (skipping the host `holding`, whose slot
// the caller already holds). It returns the admitted entries, a host that refused only for
// being at its bound (to queue on), and the other refusal's reason and breaker wait.
func (s *Service) admit(dest *schemas.Destination, holding string, now time.Time) (admitted []schemas.Webhook, busy, reason string, wait time.Duration) {
	for _, e := range dest.Settings.Webhooks {
		host := hostOf(e.URL)
		if host == holding {
			continue
		}
		ok, why, w := s.hosts.acquire(host, now)
		switch {
		case ok:
			admitted = append(admitted, e)
		case why == refusedBusy && busy == "":
			busy = host
		default:
			reason, wait = why, max(wait, w)
		}
	}
	return admitted, busy, reason, wait
}

// webhooksOf returns the destination's entries on host.
func webhooksOf(dest *schemas.Destination, host string) []schemas.Webhook {
	var out []schemas.Webhook
	for _, e := range dest.Settings.Webhooks {
		if hostOf(e.URL) == host {
			out = append(out, e)
		}
	}
	return out
}

// launch runs one attempt in a goroutine; the global token is released when it ends.
func (s *Service) launch(ctx context.Context, d delivery, p *pending, dest *schemas.Destination, entries []schemas.Webhook) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		s.attempt(ctx, d, p, dest, entries)
	}()
}

// attempt makes one delivery attempt and hands the record on according to its verdict.
func (s *Service) attempt(ctx context.Context, d delivery, p *pending, dest *schemas.Destination, entries []schemas.Webhook) {
	if lim := s.limiter(dest); lim != nil {
		if err := lim.Wait(ctx); err != nil {
			for _, e := range entries {
				s.hosts.release(hostOf(e.URL), true, 0, s.now())
			}
			return // shutting down: not finished
		}
	}
	// A delivery in progress finishes even when shutdown starts: it is bounded by the timeout.
	results := post(context.WithoutCancel(ctx), s.client, s.cfg.Timeout, &request{dest: dest, entries: entries, messageID: d.messageID, body: d.r.Value}, s.now())
	now := s.now()
	for i := range results {
		res := &results[i]
		s.hosts.release(res.Host, res.Class == Success || res.Class == Status4xx || res.Class == Status408 || res.Class == Status429, res.Latency, now)
		s.logAttempt(d, res, now)
	}
	class, retryAfter, last := verdict(results)
	status := 0
	errText := ""
	if last != nil {
		status = last.Status
		errText = describe(last)
	}
	switch {
	case class == Success:
		s.metrics.forDestination(d.destID).delivered.Inc()
		s.metrics.endToEnd.Observe(now.Sub(d.firstAttemptAt).Seconds())
		s.track.finish(p)
	case class.Retryable():
		if d.attempt > len(s.cfg.RetrySchedule) {
			s.toDLQ(ctx, d, p, "retries_exhausted", status, errText)
			return
		}
		delay := max(s.cfg.RetrySchedule[d.attempt-1], retryAfter)
		tier := s.tierFor(delay)
		if now.Add(s.tierDelays[tier]).After(d.firstAttemptAt.Add(s.cfg.RetryWindow)) {
			s.toDLQ(ctx, d, p, "retry_window_expired", status, errText)
			return
		}
		s.toTier(ctx, d, p, d.attempt+1, tier, errText, status)
	default:
		s.toDLQ(ctx, d, p, string(class), status, errText)
	}
}

// tierFor picks the tier for a wanted delay: the shortest tier at least that long, else the
// longest.
func (s *Service) tierFor(delay time.Duration) int {
	best := -1
	for i, d := range s.tierDelays {
		if d >= delay && (best < 0 || d < s.tierDelays[best]) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	longest := 0
	for i, d := range s.tierDelays {
		if d > s.tierDelays[longest] {
			longest = i
		}
	}
	return longest
}

// toTier hands the record to a retry tier: due after the tier's delay, with the attempt number
// it will make there.
func (s *Service) toTier(ctx context.Context, d delivery, p *pending, attempt, tier int, lastError string, lastStatus int) {
	due := s.now().Add(s.tierDelays[tier])
	rec := s.derived(d.r, s.tierTopics[tier], map[string]string{
		schemas.HeaderAttempt:        strconv.Itoa(attempt),
		schemas.HeaderFirstAttemptAt: schemas.FormatTimestamp(d.firstAttemptAt),
		schemas.HeaderDueAt:          schemas.FormatTimestamp(due),
		schemas.HeaderLastError:      lastError,
		schemas.HeaderLastStatus:     strconv.Itoa(lastStatus),
	})
	s.metrics.retried.WithLabelValues(d.destID, s.tierTopics[tier]).Inc()
	s.handOff(ctx, rec, p)
}

// toDLQ hands the record to the dead-letter queue with its reason.
func (s *Service) toDLQ(ctx context.Context, d delivery, p *pending, reason string, lastStatus int, lastError string) {
	rec := s.derived(d.r, s.cfg.DLQTopic, map[string]string{
		schemas.HeaderReason:         reason,
		schemas.HeaderLastStatus:     strconv.Itoa(lastStatus),
		schemas.HeaderLastError:      lastError,
		schemas.HeaderAttempt:        strconv.Itoa(d.attempt),
		schemas.HeaderFirstAttemptAt: schemas.FormatTimestamp(d.firstAttemptAt),
	})
	s.metrics.dlq.WithLabelValues(d.destID, reason).Inc()
	s.logger.Warn().Str("destination", d.destID).Str("message_id", d.messageID).Str("reason", reason).
		Int("last_status", lastStatus).Str("last_error", lastError).Msg("delivery dead-lettered")
	s.handOff(ctx, rec, p)
}

// derived copies r to topic with headers replaced or added.
func (s *Service) derived(r *kgo.Record, topic string, set map[string]string) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		if _, ok := set[h.Key]; !ok && h.Key != schemas.HeaderDueAt {
			out.Headers = append(out.Headers, h)
		}
	}
	for _, k := range []string{schemas.HeaderAttempt, schemas.HeaderFirstAttemptAt, schemas.HeaderDueAt, schemas.HeaderReason, schemas.HeaderLastStatus, schemas.HeaderLastError} {
		if v, ok := set[k]; ok {
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	return out
}

// handOff produces rec and finishes p once Kafka acknowledged it, retrying until then. If the
// service stops first, p stays unfinished and the record is delivered again after a restart.
func (s *Service) handOff(ctx context.Context, rec *kgo.Record, p *pending) {
	s.wg.Add(1)
	var try func()
	try = func() {
		s.cl.Produce(context.WithoutCancel(ctx), rec, func(_ *kgo.Record, err error) {
			if err == nil {
				s.track.finish(p)
				s.wg.Done()
				return
			}
			s.logger.Warn().Err(err).Str("topic", rec.Topic).Msg("handing a delivery on; retrying")
			if ctx.Err() != nil {
				s.wg.Done()
				return
			}
			time.AfterFunc(time.Second, try)
		})
	}
	try()
}

// attemptRecord appends one line of webhooks.attempts: {"destinationId", "messageId", "url",
// "attempt", "status", "latencyMs", "errorClass", "error" (on failure), "at"}. It is written by
// hand: one per POST, on the hot path.
func appendAttemptRecord(b []byte, d *delivery, res *urlResult, now time.Time) []byte {
	b = append(b, `{"destinationId":`...)
	b = schemas.AppendJSONString(b, d.destID)
	b = append(b, `,"messageId":`...)
	b = schemas.AppendJSONString(b, d.messageID)
	b = append(b, `,"url":`...)
	b = schemas.AppendJSONString(b, res.URL)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(d.attempt), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(res.Status), 10)
	b = append(b, `,"latencyMs":`...)
	b = strconv.AppendFloat(b, float64(res.Latency.Microseconds())/1000, 'f', -1, 64)
	b = append(b, `,"errorClass":`...)
	b = schemas.AppendJSONString(b, string(res.Class))
	if res.Class != Success {
		b = append(b, `,"error":`...)
		b = schemas.AppendJSONString(b, describe(res))
	}
	b = append(b, `,"at":"`...)
	b = schemas.AppendTimestamp(b, now)
	return append(b, `"}`...)
}

func (s *Service) logAttempt(d delivery, res *urlResult, now time.Time) {
	dm := s.metrics.forDestination(d.destID)
	dm.attempts(statusClass(res)).Inc()
	dm.latency.Observe(res.Latency.Seconds())
	v := appendAttemptRecord(make([]byte, 0, 256), &d, res, now)
	s.cl.Produce(context.Background(), &kgo.Record{Topic: s.cfg.AttemptsTopic, Key: []byte(d.destID), Value: v}, nil)
}

// statusClass is the status label of the attempts metric: 2xx, 4xx, 5xx, or the error class.
func statusClass(res *urlResult) string {
	if res.Status > 0 {
		return strconv.Itoa(res.Status/100) + "xx"
	}
	return string(res.Class)
}

// describe is the last-error text of a result; it never holds the URL's query (secrets).
func describe(res *urlResult) string {
	if res.Err != nil {
		var ue interface{ Unwrap() error }
		err := res.Err
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap() // *url.Error repeats the URL
		}
		return string(res.Class) + ": " + err.Error()
	}
	return fmt.Sprintf("%s: HTTP %d from %s", res.Class, res.Status, res.Host)
}

// limiter returns the rate limiter of a destination with maxRequestsPerSecond, or nil.
func (s *Service) limiter(dest *schemas.Destination) *rate.Limiter {
	rps := dest.Settings.MaxRequestsPerSecond
	if rps <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limiters[dest.ID]
	if l == nil || l.rps != rps {
		l = &destLimiter{rps: rps, lim: rate.NewLimiter(rate.Limit(rps), max(1, int(rps)))}
		s.limiters[dest.ID] = l
	}
	return l.lim
}

func headerTime(r *kgo.Record, key string) time.Time {
	for _, h := range r.Headers {
		if h.Key == key {
			t, _ := schemas.ParseTimestamp(string(h.Value))
			return t
		}
	}
	return time.Time{}
}
