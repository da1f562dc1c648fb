package platform

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// HTTP server limits. Handlers that stream or run long set their own deadlines
// (http.ResponseController); there is no global write timeout for that reason.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	// DefaultShutdownTimeout is how long Run lets in-flight requests finish after its context
	// is cancelled, before it closes their connections.
	DefaultShutdownTimeout = 15 * time.Second
)

// HTTPServer serves a service's handler next to /healthz, /readyz and /metrics, with hardened
// timeouts, and shuts down gracefully. Create it with NewHTTPServer; Listen (optional) and Run
// are called once.
type HTTPServer struct {
	// ShutdownTimeout bounds the graceful drain (DefaultShutdownTimeout); set it before Run.
	ShutdownTimeout time.Duration

	srv    *http.Server
	health *Health
	logger zerolog.Logger
	// app is the service's handler; guarded is app behind the Host check (not the health
	// answers and metrics), which AllowHosts replaces before Run.
	app, guarded http.Handler

	mu sync.Mutex
	ln net.Listener
}

// NewHTTPServer returns a server for addr (host:port; port 0 picks a free one) that routes
// /healthz and /readyz to health, /metrics to gatherer (Prometheus text or OpenMetrics), and
// every other path to app. A nil health is always healthy, a nil gatherer serves no /metrics
// (they are served on another port), and a nil app answers 404 (and makes it a metrics port: /healthz?verbose and
// /readyz?verbose show a failed check's error; elsewhere it shows as "failing").
//
// The app answers only the host names of AllowHosts; until it is called, only the loopback
// names when addr is on loopback, any name otherwise (docs/security.md#dns-rebinding). Other
// requests get 421 Misdirected Request. /healthz, /readyz and /metrics answer any Host.
func NewHTTPServer(addr string, app http.Handler, health *Health, gatherer prometheus.Gatherer, logger zerolog.Logger) *HTTPServer {
	if health == nil {
		health = NewHealth()
	}
	// A server with no app of its own is a metrics port (METRICS_ADDR, not public): its
	// health answers may show a failed check's error (?verbose).
	details := app == nil
	if app == nil {
		app = http.NotFoundHandler()
	}
	logger = logger.With().Str("component", "http").Logger()
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health.HealthzHandler(details))
	mux.Handle("GET /readyz", health.ReadyzHandler(details))
	if gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
			ErrorLog:          zerologPrinter{logger},
			EnableOpenMetrics: true,
		}))
	}
	s := &HTTPServer{
		ShutdownTimeout: DefaultShutdownTimeout,
		srv: &http.Server{
			Addr:              addr,
			Handler:           mux,
			ReadHeaderTimeout: DefaultReadHeaderTimeout,
			ReadTimeout:       DefaultReadTimeout,
			IdleTimeout:       DefaultIdleTimeout,
			MaxHeaderBytes:    DefaultMaxHeaderBytes,
			ErrorLog:          log.New(zerologWriter{logger}, "", 0),
		},
		health: health,
		logger: logger,
		app:    app,
	}
	if details {
		mux.Handle("/", app) // a metrics port, which no browser is sent to
	} else {
		s.guarded = defaultHostCheck(addr).wrap(app)
		mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.guarded.ServeHTTP(w, r) }))
	}
	return s
}

// AllowHosts makes the app answer only requests whose Host (its port aside) is one of names or
// a loopback name; variable is the setting they come from (INGEST_ALLOWED_HOSTS, ...), named in
// the refusals and errors. Each name is a host name, an IP address, *.<name> (the names under
// it) or * (any name; also what an empty names means for a server not on loopback). Call it
// before Run; it fails on a name that ValidateAllowedHosts refuses.
func (s *HTTPServer) AllowHosts(variable string, names []string) error {
	if err := ValidateAllowedHosts(variable, names); err != nil {
		return err
	}
	if s.guarded == nil {
		return nil // a metrics port
	}
	check := newHostCheck(variable, names)
	if len(names) == 0 {
		check = defaultHostCheck(s.srv.Addr)
		check.variable = variable
	}
	s.guarded = check.wrap(s.app)
	return nil
}

// Handler returns the server's full handler (health, metrics and app), for tests.
func (s *HTTPServer) Handler() http.Handler { return s.srv.Handler }

// Listen binds the address, so that Addr can tell the port before Run serves. Run calls it if
// it has not been called.
func (s *HTTPServer) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.srv.Addr, err)
	}
	s.ln = ln
	return nil
}

// UseListener makes the server serve on ln instead of binding its address: a test's in-memory
// network (kfake.VirtualNetwork), on which a service runs inside a testing/synctest bubble. Call
// it instead of Listen, before Run; Run closes ln.
func (s *HTTPServer) UseListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ln = ln
}

// Addr returns the bound address (host:port) once Listen has succeeded, else the configured
// one.
func (s *HTTPServer) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.srv.Addr
}

// Run listens (unless Listen was called) and serves until ctx is cancelled; then it marks the
// service as shutting down (/readyz answers 503), stops accepting connections and waits up to
// ShutdownTimeout for in-flight requests to finish, closing the rest. It returns nil after a
// clean drain, and an error if serving fails or the drain times out.
func (s *HTTPServer) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	s.logger.Info().Str("addr", ln.Addr().String()).Msg("serving HTTP")

	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.health.SetShuttingDown()
	timeout := s.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if err != nil {
		_ = s.srv.Close()
		err = fmt.Errorf("draining HTTP requests on %s: %w", ln.Addr(), err)
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), serr)
	}
	s.logger.Info().Err(err).Msg("HTTP server stopped")
	return err
}

// zerologWriter turns net/http's error log lines into warnings.
type zerologWriter struct{ logger zerolog.Logger }

func (w zerologWriter) Write(p []byte) (int, error) {
	w.logger.Warn().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// zerologPrinter turns promhttp's error log lines into errors.
type zerologPrinter struct{ logger zerolog.Logger }

func (p zerologPrinter) Println(v ...any) {
	p.logger.Error().Msg(strings.TrimSpace(fmt.Sprintln(v...)))
}
