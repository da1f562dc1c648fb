package platform

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Deps are the dependencies every service shares, built once per process and embedded in each
// service's own Deps (ingest.Deps, router.Deps, deliverer.Deps, audiences.Deps, console.Deps)
// beside what is the service's own (its config snapshot, its keyring). A service's command
// builds them with Command.Deps; `make run` (devstack) builds them once for all five services,
// giving each a Health scoped to its name (Health.Scope). See
// docs/architecture.md#how-a-service-is-wired.
type Deps struct {
	// Kafka are the settings of every client the service opens.
	Kafka KafkaSettings
	// KafkaOpts are added to every client the service opens (tests use them).
	KafkaOpts []kgo.Opt
	// Logger is the service's logger; the zero value logs nothing.
	Logger zerolog.Logger
	// Registerer registers the service's metrics; nil: a private registry.
	Registerer prometheus.Registerer
	// Gatherer, when set, is served on /metrics beside a service's own HTTP API (ingest,
	// audiences, console); nil: no /metrics there.
	Gatherer prometheus.Gatherer
	// Health gets the service's checks and components (a Kafka check, a state that is
	// warming), served on /healthz and /readyz; nil: what each service's Deps says.
	Health *Health
	// Tracer starts the service's spans (docs/operations.md#tracing); nil, the default, exports
	// none: the trace context of each event is still passed on.
	Tracer *Tracer
}

// Deps returns the dependencies the command built for its service: the Kafka settings, the
// logger, the registry and the health. The Gatherer is the registry unless METRICS_ADDR moves
// /metrics off the service's public port (APIMetrics).
func (c *Command) Deps() Deps {
	gatherer, _ := c.APIMetrics()
	return Deps{Kafka: c.Kafka, Logger: c.Logger, Registerer: c.Registry, Gatherer: gatherer, Health: c.Health, Tracer: c.tracer}
}
