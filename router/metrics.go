package router

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	messages   *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	deletions  *prometheus.CounterVec
	// filtered counts the filtered records written (docs/routing.md#filtered-records).
	filtered prometheus.Counter
	// forwarded counts the calls a tracking plan forwarded to other sources (docs/routing.md#forwarding).
	forwarded prometheus.Counter
	// filterDrops counts the messages each destination filter dropped
	// (docs/routing.md#destination-filters).
	filterDrops *prometheus.CounterVec
	// keysShredded counts the data keys tombstoned for deletions (docs/security.md#crypto-shredding).
	keysShredded prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, sup *suppressions, dd *dedupe) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_router_messages_total",
			Help: "tracking.events messages by outcome: routed, no_destination, blocked_tracking_plan, suppressed, duplicate, unknown_source, invalid, deleted (sealed with a shredded key).",
		}, []string{"outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_router_deliveries_total",
			Help: "Records written to webhooks.deliveries, by destination and kind (message, delete).",
		}, []string{"destination", "kind"}),
		deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_router_deletion_requests_total",
			Help: "tracking.deletions requests by kind (or invalid).",
		}, []string{"kind"}),
		filtered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_router_filtered_records_total",
			Help: "Records of class filtered written to webhooks.attempts: one per message dropped for a destination (ROUTER_FILTERED_RECORDS).",
		}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_router_forwarded_records_total",
			Help: "Records a tracking plan forwarded to tracking.events for another source: blocked calls and Violation Generated calls.",
		}),
		filterDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_router_filtered_total",
			Help: "Messages a destination filter sampled out or dropped, by destination and filter name.",
		}, []string{"destination", "filter"}),
		keysShredded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_router_keys_shredded_total",
			Help: "Data keys of deleted users tombstoned on tributary.keys (DELETE_ONLY and SUPPRESS_WITH_DELETE requests).",
		}),
	}
	suppressed := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tributary_router_suppressed_users",
		Help: "Users on the suppression list.",
	}, func() float64 { return float64(sup.Len()) })
	cs := []prometheus.Collector{m.messages, m.deliveries, m.deletions, m.filtered, m.forwarded, m.filterDrops, m.keysShredded, suppressed}
	if dd != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tributary_router_dedupe_entries",
			Help: "(source, messageId) pairs the router remembers for de-duplication (ROUTER_DEDUPE_MAX_ENTRIES at most).",
		}, func() float64 { n, _ := dd.stats(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "tributary_router_dedupe_oldest_seconds",
				Help: "Age of the oldest pair remembered; below DEDUPE_WINDOW under load, the memory bound shortens the window.",
			}, func() float64 { _, age := dd.stats(); return age.Seconds() }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering router metrics: %w", err)
		}
	}
	return m, nil
}
