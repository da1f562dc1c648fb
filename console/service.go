package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Store is the config store the console reads (and waits on after its own writes):
// *platform.ConfigStore.
type Store interface {
	Snapshot() *platform.Snapshot
	Ready() <-chan struct{}
	WaitFor(ctx context.Context, cond func(*platform.Snapshot) bool) (*platform.Snapshot, error)
}

// Deps are the console's dependencies.
type Deps struct {
	// Deps are the dependencies every service shares (docs/architecture.md#how-a-service-is-wired):
	// the Kafka settings and options of every client, the logger, the metrics' Registerer
	// (nil: a private registry) and Gatherer (when set, served on /metrics beside the API),
	// and the Health that gets the "console views" component, ready once the views caught up
	// (nil: none).
	platform.Deps
	// Store is the materialised tributary.config.
	Store Store
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	// Keys open the sealed records the console's views read (docs/security.md#crypto-shredding);
	// the caller runs it. nil: the service makes its own from Kafka and runs it in Run.
	Keys *shred.Keyring
}

// Service is the console: the admin API over the config topic, deletion requests, the
// delivery log, the DLQ and the live event debugger (docs/console.md).
type Service struct {
	cfg    Config
	deps   Deps
	logger zerolog.Logger
	now    func() time.Time
	keys   *schemas.Keyring
	// dataKeys open sealed records; ownDataKeys: the service's own, run by Run.
	dataKeys    *shred.Keyring
	ownDataKeys bool

	producer *kgo.Client
	adm      *kadm.Client // of producer: the deliverer group's lag (the overview)
	server   *platform.HTTPServer
	handler  http.Handler

	writeMu sync.Mutex // serialises this console's config writes: check the version, write, see it applied
	// writer writes tributary.config in transactions that fence the other writers (configTx);
	// tx is the transaction of the write in progress (nil between writes), under writeMu.
	writer platform.ConfigWriter
	tx     *platform.ConfigTx

	// stopping is closed when Run's context ends: open streams end then.
	stopping     chan struct{}
	stoppingOnce sync.Once

	attempts    *views.Attempts
	messages    *views.Messages
	health      *views.Health // what became of each destination's messages
	events      *views.Events
	violations  *views.Violations
	regulations *views.Regulations
	forget      *forgetting // what the views forget of deleted and suppressed users
	dlq         *views.DLQ
	notices     *noticeBoard   // the auto-disable notices (notices.go)
	pending     *views.Pending // the messages waiting in the retry tiers (pending_reader.go)
	sessions    *sessionView
	streams     *streamLimits
	tiers       views.TierLag  // the retry tiers' backlog, read in the background
	ready       viewsReady     // closed as each view catches up
	replays     sync.Map       // destination id → *sync.Mutex: one DLQ replay at a time
	replayRuns  replays        // the replays by time range and filter (replay.go)
	replayWG    sync.WaitGroup // the running replays' goroutines: Run waits for them
	metrics     *metrics
	auditTrail  *auditTrail // the audit trail's writer and view (audit.go)
	ui          *ui
	// apiPatterns are the API's routes as routes registered them (permissions.go).
	apiPatterns []string

	// pinnedPrincipal, set by tests only (export_test.go), is the principal whose PII grant
	// masks every answer (pii.go), whoever makes the request.
	pinnedPrincipal atomic.Pointer[Principal]
}

// New checks cfg and prepares the console; Run serves it.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, errors.New("console: no config store")
	}
	keys, err := deps.Kafka.ConfigKeyring()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, deps: deps, logger: deps.Logger.With().Str("service", "console").Logger(), now: deps.Now, keys: keys,
		stopping: make(chan struct{})}
	if s.now == nil {
		s.now = time.Now
	}
	if _, err := deps.Kafka.ClientOpts(); err != nil {
		return nil, err
	}
	s.producer, err = platform.NewKafkaClient(deps.Kafka, s.logger,
		append([]kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0)}, deps.KafkaOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("console: kafka client: %w", err)
	}
	s.adm = kadm.NewClient(s.producer)
	s.writer = platform.ConfigWriter{Kafka: deps.Kafka, Topic: cfg.ConfigTopic, Logger: s.logger, Opts: deps.KafkaOpts}
	reg := deps.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(reg)
	s.auditTrail = newAuditTrail(cfg.AuditWindow, reg)
	if s.dataKeys = deps.Keys; s.dataKeys == nil {
		s.ownDataKeys = true
		if s.dataKeys, err = shred.New(shred.Config{Kafka: deps.Kafka, Opts: deps.KafkaOpts, Logger: s.logger}); err != nil {
			s.producer.Close()
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	s.attempts = views.NewAttempts(cfg.AttemptsPerDestination, cfg.StatsWindow)
	s.messages = views.NewMessages(cfg.MessagesPerDestination, cfg.MessageBytesPerDestination)
	s.health = views.NewHealth(cfg.StatsWindow, cfg.HealthMessages)
	s.events = views.NewEvents(cfg.RecentEvents)
	s.violations = views.NewViolations()
	s.regulations = views.NewRegulations(cfg.RegulationStores)
	s.forget = newForgetting()
	s.dlq = views.NewDLQ(cfg.DLQPerDestination)
	s.notices = newNoticeBoard()
	s.pending = views.NewPending(cfg.PendingPerDestination)
	s.ready = newViewsReady()
	s.sessions = newSessionView()
	s.streams = newStreamLimits(cfg.MaxStreams, cfg.MaxStreamsPerSession)
	if s.ui, err = newUI(s); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	s.server = platform.NewHTTPServer(cfg.Addr, s.handler, deps.Health, deps.Gatherer, s.logger)
	s.server.ShutdownTimeout = cfg.ShutdownTimeout
	if err := s.server.AllowHosts("CONSOLE_ALLOWED_HOSTS", cfg.AllowedHosts); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler is the API (without /healthz, /readyz and /metrics): tests serve it directly.
func (s *Service) Handler() http.Handler { return s.handler }

// Listen binds CONSOLE_ADDR before Run (so that Addr is known, e.g. with port 0).
func (s *Service) Listen() error { return s.server.Listen() }

// Addr is the address the API listens on, once Listen or Run bound it.
func (s *Service) Addr() string { return s.server.Addr() }

// Run serves the API and keeps the views up to date until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	defer s.producer.Close()
	defer func() { // the replays end (cancelled) before their producer closes
		s.stoppingOnce.Do(func() { close(s.stopping) })
		s.replayWG.Wait()
	}()
	stop := context.AfterFunc(ctx, func() { s.stoppingOnce.Do(func() { close(s.stopping) }) })
	defer stop()
	if h := s.deps.Health; h != nil {
		h.SetWarming("console views", false)
	}
	views := []platform.Runner{
		platform.RunnerFunc(s.runAttempts),
		platform.RunnerFunc(s.runEvents),
		platform.RunnerFunc(s.runRegulations),
		platform.RunnerFunc(s.runForget),
		platform.RunnerFunc(s.runDLQView),
		platform.RunnerFunc(s.runSessions),
		platform.RunnerFunc(s.runTierLag),
		platform.RunnerFunc(s.runPending),
		platform.RunnerFunc(s.runPrune),
		platform.RunnerFunc(s.runNotices),
		platform.RunnerFunc(s.runAudit),
	}
	if s.ownDataKeys {
		views = append(views, s.dataKeys)
	}
	ready := platform.RunnerFunc(func(ctx context.Context) error {
		for _, ch := range []<-chan struct{}{s.forget.ready, s.ready.attempts, s.ready.events, s.ready.regulations, s.ready.dlq, s.sessions.ready, s.deps.Store.Ready()} {
			select {
			case <-ch:
			case <-ctx.Done():
				return nil
			}
		}
		if h := s.deps.Health; h != nil {
			h.SetWarming("console views", true)
		}
		s.logger.Info().Str("addr", s.server.Addr()).Msg("console ready")
		<-ctx.Done() // RunAll ends everything when one runner returns
		return nil
	})
	return platform.RunAll(ctx, append(views, s.server, ready)...)
}

// runView keeps one view: a platform.TopicReader of its topics, every partition, without a
// consumer group (every console replica reads everything), committed records only, following
// them until ctx is done. It closes ready, and logs "view caught up", once everything written
// before the start was applied (docs/console.md#what-the-console-forgets: the forget view's
// ready is what the others wait for). cfg gives the topics, where to start (by default at the
// start of each partition), Apply and, optionally, Polled's work (polled); the rest is set here.
func (s *Service) runView(ctx context.Context, name string, ready chan struct{}, cfg platform.TopicReaderConfig, polled func()) error {
	logger := s.logger.With().Str("view", name).Logger()
	caughtUp := false
	cfg.Kafka, cfg.Logger = s.deps.Kafka, logger
	cfg.ReadCommitted, cfg.Follow, cfg.Retry = true, true, true
	cfg.Opts = append([]kgo.Opt{kgo.FetchMaxWait(platform.ConfigFetchMaxWait)}, s.deps.KafkaOpts...)
	cfg.Polled = func(now bool) error {
		if polled != nil {
			polled()
		}
		if now && !caughtUp {
			caughtUp = true
			logger.Info().Msg("view caught up")
			close(ready)
		}
		return nil
	}
	r, err := platform.NewTopicReader(cfg)
	if err != nil {
		return fmt.Errorf("console %s: %w", name, err)
	}
	if err := r.Run(ctx); err != nil {
		return fmt.Errorf("console %s: %w", name, err)
	}
	return nil
}

// apiError is the body of every error answer: {code, message, field}.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request field the error is about, as a path ("settings.webhooks[5]").
	Field string `json:"field,omitempty"`
	// Errors lists every problem when there are several (the first is the one above).
	Errors []fieldError `json:"errors,omitempty"`
}

type fieldError struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

// Error codes.
const (
	codeUnauthorized  = "unauthorized"
	codeInvalid       = "invalid"
	codeNotFound      = "not_found"
	codeConflict      = "conflict"
	codeVersion       = "version_mismatch"
	codeManagedByFile = "managed_by_file"
	codeInUse         = "in_use"
	codeUnavailable   = "unavailable"
	codeInternal      = "internal"
	codeMethod        = "method_not_allowed"
	codeTooLarge      = "too_large"
	// codeTooManyStreams refuses a live stream beyond the stream limits (429).
	codeTooManyStreams = "too_many_streams"
)

func errInvalid(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

func errNotFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: fmt.Sprintf(format, args...)}
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"internal","message":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// data answers 200 (or status) with {"data": v}.
func writeData(w http.ResponseWriter, status int, v any) {
	writeJSON(w, status, struct {
		Data any `json:"data"`
	}{v})
}

// fail answers err: an *apiError as itself, anything else as 500 (logged, not shown).
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		switch {
		case kafkaTooLarge(err) != nil:
			s.logger.Warn().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("a write was larger than Kafka takes")
			ae = kafkaTooLarge(err)
		case r.Context().Err() != nil:
			ae = &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "the request was cancelled"}
		default:
			s.logger.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("request failed")
			ae = &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Message: "internal error: see the console's log"}
		}
	}
	if ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, ae.Status, ae)
}

// Request limits (docs/console.md#request-limits).
const (
	// maxBody bounds an API request body.
	maxBody = 1 << 20
	// maxImportBody bounds the body of a config import (a whole config file) and of a form of
	// the web UI (its settings page imports one).
	maxImportBody = 4 << 20
	// maxRecordBytes bounds the key and value of one record the console writes to Kafka: an
	// object of the config (a request body under maxBody can still make a larger one:
	// secrets are sealed, headers repeat per webhook). franz-go's default batch limit is
	// 1,000,012 bytes and Kafka's default max.message.bytes 1,048,588; the rest is the batch's
	// own bytes.
	maxRecordBytes = 990_000
)

// readBody reads the request body, at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBodyLimit(w, r, maxBody)
}

// readBodyLimit reads the request body, at most limit bytes: more is 413.
func readBodyLimit(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errTooLarge("the body is larger than %d bytes", limit)
	case err != nil:
		return nil, errInvalid("", "reading the body: %v", err)
	}
	return b, nil
}

// kafkaTooLarge is the answer to a write Kafka refused as too large (413), nil for another
// error: a last resort, since every write checks its size first (maxRecordBytes).
func kafkaTooLarge(err error) *apiError {
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		return errTooLarge("the request makes a Kafka record larger than the broker takes: make it smaller")
	}
	return nil
}

func errTooLarge(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Message: fmt.Sprintf(format, args...)}
}

// decodeJSON decodes a JSON body strictly (unknown fields are errors) into v; an empty body
// is {} when allowEmpty.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		if allowEmpty {
			return nil
		}
		return errInvalid("", "the body is empty: send a JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errInvalid(jsonErrorField(err), "the body is not valid: %s", jsonErrorMessage(err))
	}
	if dec.More() {
		return errInvalid("", "the body is not valid: data after the JSON object")
	}
	return nil
}

// jsonErrorField names the field of an encoding/json error, when it has one.
func jsonErrorField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
	}
	return ""
}

func jsonErrorMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s must be %s, got %s", te.Field, te.Type, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// authorized wraps the API: every request needs Authorization: Bearer <CONSOLE_TOKEN> or an API
// token (the scheme in any case), compared in constant time (bearerPrincipal, tokens.go); the
// request carries its principal, whose role each route checks (permissions.go).
func (s *Service) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.bearerPrincipal(r)
		if !ok {
			s.metrics.unauthorized.Inc()
			s.auditRefusedToken(r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="tributary-console"`)
			writeJSON(w, http.StatusUnauthorized, &apiError{Code: codeUnauthorized, Message: "missing or wrong bearer token: send Authorization: Bearer <CONSOLE_TOKEN>"})
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// handle adapts a handler that returns an error.
func (s *Service) handle(f func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// routes is the API: every path under /v1/ (docs/console.md, console/openapi.yaml).
func (s *Service) routes() http.Handler {
	mux := http.NewServeMux()
	s.apiPatterns = nil
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request) error) {
		s.apiPatterns = append(s.apiPatterns, pattern)
		mux.Handle(pattern, s.permitted(pattern, s.handle(f)))
	}
	h("GET /v1/sources", s.listOf(schemas.ConfigKindSource))
	h("POST /v1/sources", s.createSource)
	h("GET /v1/sources/{id}", s.getOf(schemas.ConfigKindSource))
	h("PATCH /v1/sources/{id}", s.updateSource)
	h("DELETE /v1/sources/{id}", s.deleteOf(schemas.ConfigKindSource))
	h("POST /v1/sources/{id}/rotate-key", s.rotateKey)
	h("GET /v1/sources/{id}/events/live", s.liveEvents)
	h("GET /v1/sources/{id}/events/recent", s.recentEvents)
	h("GET /v1/sources/{id}/violations", s.sourceViolations)

	h("GET /v1/destinations", s.listOf(schemas.ConfigKindDestination))
	h("POST /v1/destinations", s.createOf(schemas.ConfigKindDestination))
	h("GET /v1/destinations/{id}", s.getOf(schemas.ConfigKindDestination))
	h("PATCH /v1/destinations/{id}", s.updateDestination)
	h("DELETE /v1/destinations/{id}", s.deleteOf(schemas.ConfigKindDestination))
	h("PUT /v1/destinations/{id}/sources/{sourceId}", s.connectSource)
	h("DELETE /v1/destinations/{id}/sources/{sourceId}", s.disconnectSource)
	h("GET /v1/destinations/{id}/attempts", s.destinationAttempts)
	h("GET /v1/destinations/{id}/stats", s.destinationStats)
	h("GET /v1/destinations/{id}/overview", s.destinationOverview)
	h("GET /v1/destinations/{id}/dlq", s.listDLQ)
	h("POST /v1/destinations/{id}/dlq/replay", s.replayDLQ)
	h("POST /v1/destinations/{id}/test", s.testDestination)
	h("POST /v1/destinations/{id}/filters/test", s.testFilters)
	h("GET /v1/destinations/{id}/pending", s.listPending)
	h("POST /v1/destinations/{id}/retry", s.retryPending)
	h("GET /v1/destinations/{id}/messages", s.destinationMessages)
	h("GET /v1/messages/{messageId}", s.getMessage)
	h("GET /v1/messages/{messageId}/attempts", s.messageAttempts)

	h("GET /v1/audiences", s.listOf(schemas.ConfigKindAudience))
	h("POST /v1/audiences", s.createOf(schemas.ConfigKindAudience))
	h("GET /v1/audiences/{id}", s.getOf(schemas.ConfigKindAudience))
	h("PATCH /v1/audiences/{id}", s.updateOf(schemas.ConfigKindAudience))
	h("DELETE /v1/audiences/{id}", s.deleteOf(schemas.ConfigKindAudience))
	h("GET /v1/computed-traits", s.listOf(schemas.ConfigKindComputedTrait))
	h("POST /v1/computed-traits", s.createOf(schemas.ConfigKindComputedTrait))
	h("GET /v1/computed-traits/{id}", s.getOf(schemas.ConfigKindComputedTrait))
	h("PATCH /v1/computed-traits/{id}", s.updateOf(schemas.ConfigKindComputedTrait))
	h("DELETE /v1/computed-traits/{id}", s.deleteOf(schemas.ConfigKindComputedTrait))
	h("GET /v1/tracking-plans", s.listOf(schemas.ConfigKindTrackingPlan))
	h("POST /v1/tracking-plans", s.createOf(schemas.ConfigKindTrackingPlan))
	h("GET /v1/tracking-plans/{id}", s.getOf(schemas.ConfigKindTrackingPlan))
	h("PATCH /v1/tracking-plans/{id}", s.updateOf(schemas.ConfigKindTrackingPlan))
	h("DELETE /v1/tracking-plans/{id}", s.deleteOf(schemas.ConfigKindTrackingPlan))

	h("GET /v1/openapi.yaml", s.openAPISpec)
	h("GET /v1/config", s.exportConfig)
	h("PUT /v1/config", s.importConfig)
	h("POST /v1/config/reencrypt", s.reencryptConfig)

	h("POST /v1/regulations", s.createRegulation)
	h("GET /v1/regulations", s.listRegulations)
	h("GET /v1/regulations/{id}", s.getRegulation)

	h("POST /v1/replays", s.createReplay)
	h("GET /v1/replays", s.listReplays)
	h("GET /v1/replays/{id}", s.getReplay)
	h("DELETE /v1/replays/{id}", s.cancelReplay)
	h("POST /v1/replays/{id}/cancel", s.cancelReplay)

	h("GET /v1/users", s.listUsers)
	h("GET /v1/users/{email}", s.getUser)
	h("PUT /v1/users/{email}", s.putUser)
	h("DELETE /v1/users/{email}", s.deleteUser)
	h("GET /v1/tokens", s.listTokens)
	h("POST /v1/tokens", s.createToken)
	h("DELETE /v1/tokens/{id}", s.revokeToken)

	h("GET /v1/audit", s.listAudit)
	h("GET /v1/audit/export", s.exportAudit)

	api := s.authorized(s.methodErrors(mux))
	root := http.NewServeMux()
	root.Handle("/v1/", api)
	s.ui.routes(root) // every other path: the web UI
	return withAuditOrigin(root)
}

// methodErrors turns the mux's plain-text 404 and 405 into the JSON error body.
func (s *Service) methodErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&methodWriter{ResponseWriter: w, r: r}, r)
	})
}

type methodWriter struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool
}

func (m *methodWriter) WriteHeader(status int) {
	if (status == http.StatusMethodNotAllowed || status == http.StatusNotFound) && !m.swallow && m.Header().Get("Content-Type") != "application/json" {
		m.swallow = true
		ae := &apiError{Code: codeMethod, Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", m.r.Method, m.r.URL.Path, m.Header().Get("Allow"))}
		if status == http.StatusNotFound {
			ae = &apiError{Code: codeNotFound, Message: fmt.Sprintf("no endpoint %s %s: see docs/console.md", m.r.Method, m.r.URL.Path)}
		}
		b, _ := json.Marshal(ae)
		m.Header().Set("Content-Type", "application/json")
		m.Header().Del("X-Content-Type-Options")
		m.ResponseWriter.WriteHeader(status)
		_, _ = m.ResponseWriter.Write(append(b, '\n'))
		return
	}
	m.ResponseWriter.WriteHeader(status)
}

func (m *methodWriter) Write(b []byte) (int, error) {
	if m.swallow {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}

// Flush lets a stream (Server-Sent Events) through the wrapper.
func (m *methodWriter) Flush() {
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (m *methodWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
