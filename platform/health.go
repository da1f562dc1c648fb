package platform

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckFunc checks one dependency on each health request (for example that the broker answers);
// a non-nil error makes the service unhealthy and is shown in the answer, so it must not hold
// secrets.
type CheckFunc func(ctx context.Context) error

// DefaultCheckTimeout bounds each CheckFunc call.
const DefaultCheckTimeout = 2 * time.Second

// Health holds a service's readiness: components that report themselves ready or not
// (SetReady), and checks run on each request (AddCheck). Its methods are safe for concurrent
// use.
//
// GET /healthz answers 200 when every component is ready and every check passes (docs/operations.md#health-and-metrics:
// once a service can serve: broker reachable, config loaded), else 503 naming what fails.
// GET /readyz answers the same, and also 503 while a component set with SetWarming is not
// ready (a service restoring its state is alive, not ready) and once the server is shutting
// down, so that load balancers stop sending requests while in-flight ones drain.
type Health struct {
	// scope, when set, makes this Health a view of another one (Scope).
	scope *healthScope

	mu           sync.Mutex
	components   map[string]bool
	warming      map[string]bool
	checks       map[string]CheckFunc
	checkTimeout time.Duration
	shuttingDown atomic.Bool
}

// NewHealth returns a Health with no components and no checks: healthy.
func NewHealth() *Health {
	return &Health{components: map[string]bool{}, warming: map[string]bool{}, checks: map[string]CheckFunc{}, checkTimeout: DefaultCheckTimeout}
}

// healthScope is what a scoped Health adds to the Health it reports to.
type healthScope struct {
	parent *Health
	prefix string
}

// Scope returns a view of h for one service of several that share h (`make run` serves one
// /healthz and /readyz for all five): a check added through it is named "<service> <name>"
// ("deliverer kafka"), so that two services' checks of the same name do not replace each
// other; components (already named after their service: "router events", "audiences state")
// keep their names. Everything else is h's.
func (h *Health) Scope(service string) *Health {
	root := h
	if h.scope != nil {
		root = h.scope.parent
	}
	return &Health{scope: &healthScope{parent: root, prefix: service + " "}}
}

// SetCheckTimeout changes how long each check may take (DefaultCheckTimeout).
func (h *Health) SetCheckTimeout(d time.Duration) {
	if h.scope != nil {
		h.scope.parent.SetCheckTimeout(d)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkTimeout = d
}

// SetReady records whether component is ready. Register every component as not ready at
// start-up, so that the service is unhealthy until each one has come up.
func (h *Health) SetReady(component string, ready bool) {
	if h.scope != nil {
		h.scope.parent.SetReady(component, ready)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.components[component] = ready
}

// SetWarming records whether component is ready, like SetReady, except that only /readyz
// (and tributary_ready) reflects it: /healthz stays 200 while it is not, so that a liveness
// probe does not restart a service that is restoring its state.
func (h *Health) SetWarming(component string, ready bool) {
	if h.scope != nil {
		h.scope.parent.SetWarming(component, ready)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warming[component] = ready
}

// AddCheck registers (or replaces) the check called name.
func (h *Health) AddCheck(name string, fn CheckFunc) {
	if h.scope != nil {
		h.scope.parent.AddCheck(h.scope.prefix+name, fn)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = fn
}

// SetShuttingDown makes /readyz answer 503 from now on; HTTPServer calls it when it starts to
// shut down.
func (h *Health) SetShuttingDown() {
	if h.scope != nil {
		h.scope.parent.SetShuttingDown()
		return
	}
	h.shuttingDown.Store(true)
}

// isShuttingDown says whether SetShuttingDown was called on h or the Health it is a view of.
func (h *Health) isShuttingDown() bool {
	if h.scope != nil {
		return h.scope.parent.isShuttingDown()
	}
	return h.shuttingDown.Load()
}

// HealthReport is the JSON body of /healthz and /readyz.
type HealthReport struct {
	// Status is "ok" or "unavailable".
	Status string `json:"status"`
	// Version is the build's version (Version).
	Version string `json:"version"`
	// Checks maps each component and check to "ok", "not ready", "failing", or (verbose, on the
	// metrics port) the check's error.
	Checks map[string]string `json:"checks,omitempty"`
}

// Check runs every check concurrently (each under the check timeout) and reports whether the
// service is healthy, with the state of each component and check (what /healthz answers;
// components set with SetWarming are left out).
func (h *Health) Check(ctx context.Context) (bool, HealthReport) { return h.check(ctx, false) }

// Ready is Check with the components set with SetWarming too: what /readyz answers (but for
// the shutdown).
func (h *Health) Ready(ctx context.Context) (bool, HealthReport) { return h.check(ctx, true) }

func (h *Health) check(ctx context.Context, ready bool) (bool, HealthReport) {
	if h.scope != nil {
		return h.scope.parent.check(ctx, ready)
	}
	h.mu.Lock()
	components := maps.Clone(h.components)
	if ready {
		maps.Copy(components, h.warming)
	}
	checks := maps.Clone(h.checks)
	timeout := h.checkTimeout
	h.mu.Unlock()

	report := HealthReport{Status: "ok", Version: Version, Checks: map[string]string{}}
	healthy := true
	for name, ready := range components {
		report.Checks[name] = "ok"
		if !ready {
			report.Checks[name] = "not ready"
			healthy = false
		}
	}
	results := make([]error, len(checks))
	names := slices.Sorted(maps.Keys(checks))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			results[i] = checks[name](cctx)
		})
	}
	wg.Wait()
	for i, name := range names {
		report.Checks[name] = "ok"
		if results[i] != nil {
			report.Checks[name] = results[i].Error()
			healthy = false
		}
	}
	if !healthy {
		report.Status = "unavailable"
	}
	return healthy, report
}

// HealthzHandler serves /healthz. A failed check shows as "failing": its error (which may name
// internal addresses, e.g. the broker's) is shown only with ?verbose, and only when details is
// true (the metrics port, not a public one).
func (h *Health) HealthzHandler(details bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, report := h.Check(r.Context())
		writeHealth(w, ok, redact(report, details && r.URL.Query().Has("verbose")))
	})
}

// ReadyzHandler serves /readyz; details as for HealthzHandler.
func (h *Health) ReadyzHandler(details bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, report := h.Ready(r.Context())
		report = redact(report, details && r.URL.Query().Has("verbose"))
		if h.isShuttingDown() {
			ok = false
			report.Status = "unavailable"
			report.Checks["shutdown"] = "shutting down"
		}
		writeHealth(w, ok, report)
	})
}

// redact replaces each failed check's error with "failing" unless verbose.
func redact(report HealthReport, verbose bool) HealthReport {
	if verbose {
		return report
	}
	for name, v := range report.Checks {
		if v != "ok" && v != "not ready" && v != "shutting down" {
			report.Checks[name] = "failing"
		}
	}
	return report
}

func writeHealth(w http.ResponseWriter, ok bool, report HealthReport) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(report)
}

// KafkaCheck returns a check that the cluster answers (kgo.Client.Ping).
func KafkaCheck(cl *kgo.Client) CheckFunc {
	return func(ctx context.Context) error { return cl.Ping(ctx) }
}

// ReadyGauge is the gauge tributary_ready: 1 while Ready says the service is ready (what
// /readyz answers 200 to), else 0. The alert rules page on it (deploy/helm/tributary/files/alerts.yaml).
func ReadyGauge(h *Health) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tributary_ready",
		Help: "1 when the service is ready (/readyz answers 200), else 0.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if ok, _ := h.Ready(ctx); ok && !h.isShuttingDown() {
			return 1
		}
		return 0
	})
}
