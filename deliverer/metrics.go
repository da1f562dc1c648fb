package deliverer

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	attempts  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	delivered *prometheus.CounterVec
	retried   *prometheus.CounterVec
	deferred  *prometheus.CounterVec
	orderHeld *prometheus.CounterVec
	queued    *prometheus.CounterVec
	heldBack  prometheus.Counter
	limit     *prometheus.GaugeVec
	dlq       *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	endToEnd  prometheus.Histogram
	lateness  *prometheus.HistogramVec
	retryNow  *prometheus.CounterVec

	dests sync.Map // destination id → *destMetrics
}

// destMetrics caches one destination's metric children: the per-POST path then does no label
// hashing.
type destMetrics struct {
	m         *metrics
	id        string
	delivered prometheus.Counter
	latency   prometheus.Observer
	limit     prometheus.Gauge
	mu        sync.Mutex
	byStatus  map[string]prometheus.Counter
}

func (m *metrics) forDestination(id string) *destMetrics {
	if v, ok := m.dests.Load(id); ok {
		return v.(*destMetrics)
	}
	dm := &destMetrics{m: m, id: id, delivered: m.delivered.WithLabelValues(id),
		latency: m.latency.WithLabelValues(id), limit: m.limit.WithLabelValues(id), byStatus: map[string]prometheus.Counter{}}
	v, _ := m.dests.LoadOrStore(id, dm)
	return v.(*destMetrics)
}

func (dm *destMetrics) attempts(status string) prometheus.Counter {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	c := dm.byStatus[status]
	if c == nil {
		c = dm.m.attempts.WithLabelValues(dm.id, status)
		dm.byStatus[status] = c
	}
	return c
}

func newMetrics(reg prometheus.Registerer, s *Service) (*metrics, error) {
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_attempts_total", Help: "POSTs by destination and status class (2xx, 4xx, 5xx, or the error class: timeout, connection, tls, blocked_address).",
		}, []string{"destination", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tributary_deliverer_attempt_seconds", Help: "Latency of one POST.", Buckets: buckets,
		}, []string{"destination"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_delivered_total", Help: "Messages delivered (a 2xx from one URL).",
		}, []string{"destination"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_retried_total", Help: "Records handed to a retry tier, by destination and tier topic.",
		}, []string{"destination", "tier"}),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_deferred_total", Help: "Records sent to a tier unsent: host at its limit with a full queue, paused by the endpoint, or breaker open.",
		}, []string{"destination", "reason"}),
		orderHeld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_order_held_total", Help: "Records of an ordered destination handed to a tier unsent, behind an earlier message of their user (docs/delivery.md#ordering).",
		}, []string{"destination"}),
		queued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_queued_total", Help: "Records that waited in memory for a slot on their host (host at its in-flight bound).",
		}, []string{"destination"}),
		heldBack: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_deliverer_held_back_total", Help: "Times the poll loop waited for room in a fast host's full queue instead of polling more (backpressure: the deliverer, not the endpoint, was the bottleneck).",
		}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tributary_deliverer_concurrency_limit", Help: "The adaptive concurrency limit of the destination's endpoint host, after its last POST.",
		}, []string{"destination"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_dlq_total", Help: "Records dead-lettered, by destination and reason.",
		}, []string{"destination", "reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_deliverer_dropped_total", Help: "Records not delivered because their user is suppressed or deleted (after the message was accepted, or its data key shredded), by destination and reason (suppressed, deleted).",
		}, []string{"destination", "reason"}),
		endToEnd: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tributary_deliverer_first_attempt_to_delivery_seconds", Help: "From first-attempt-at (routing) to a 2xx.",
			Buckets: []float64{.01, .05, .1, .5, 1, 10, 60, 600, 3600, 14400},
		}),
	}
	m.retryNow = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tributary_deliverer_retry_now_total", Help: "Retry-now copies by destination and outcome (delivered, failed, skipped), and tier records finished unsent because their retry-now delivered them (tier_skipped).",
	}, []string{"destination", "outcome"})
	m.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tributary_deliverer_tier_lateness_seconds", Help: "Tier lag: how long after its due-at a retry-tier record was taken up.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"tier"})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tributary_deliverer_in_progress", Help: "Records read and not yet finished (delivered or handed on).",
	}, func() float64 { return float64(s.track.inProgress()) })
	breakers := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tributary_deliverer_open_breakers", Help: "Endpoint hosts whose circuit breaker is open.",
	}, func() float64 { return float64(len(s.hosts.openBreakers())) })
	paused := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tributary_deliverer_paused_tier_partitions", Help: "Retry-tier partitions paused until their next record is due.",
	}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(len(s.held)) })
	parked := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tributary_deliverer_parked", Help: "Retry-tier records waiting in memory for their endpoint's open breaker or pause to end (not rewritten meanwhile).",
	}, func() float64 { return float64(s.parkedCount()) })
	for _, c := range []prometheus.Collector{m.attempts, m.latency, m.delivered, m.retried, m.deferred, m.orderHeld, m.queued, m.heldBack, m.limit, m.dlq, m.dropped, m.endToEnd, m.lateness, m.retryNow, inFlight, breakers, paused, parked} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering deliverer metrics: %w", err)
		}
	}
	return m, nil
}
