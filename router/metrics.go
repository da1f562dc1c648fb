package router

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	messages   *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	deletions  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, sup *suppressions) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_router_messages_total",
			Help: "tracking.events messages by outcome: routed, no_destination, blocked_tracking_plan, suppressed, unknown_source, invalid.",
		}, []string{"outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_router_deliveries_total",
			Help: "Records written to webhooks.deliveries, by destination and kind (message, delete).",
		}, []string{"destination", "kind"}),
		deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_router_deletion_requests_total",
			Help: "tracking.deletions requests by kind (or invalid).",
		}, []string{"kind"}),
	}
	suppressed := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tributary_router_suppressed_users",
		Help: "Users on the suppression list.",
	}, func() float64 { return float64(sup.Len()) })
	for _, c := range []prometheus.Collector{m.messages, m.deliveries, m.deletions, suppressed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering router metrics: %w", err)
		}
	}
	return m, nil
}
