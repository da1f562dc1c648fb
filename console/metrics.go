package console

import "github.com/prometheus/client_golang/prometheus"

// metrics are the console's Prometheus metrics (docs/console.md#metrics).
type metrics struct {
	unauthorized    prometheus.Counter
	configWrites    *prometheus.CounterVec
	regulations     *prometheus.CounterVec
	replayed        prometheus.Counter
	retriedNow      prometheus.Counter
	tests           prometheus.Counter
	attemptsRead    prometheus.Counter
	attemptsSkipped prometheus.Counter
	liveStreams     prometheus.Gauge
	streamsRefused  prometheus.Counter
	purges          prometheus.Counter
	forgotten       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		unauthorized: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_unauthorized_requests_total",
			Help: "API requests refused for a missing or wrong bearer token."}),
		configWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tributary_console_config_writes_total",
			Help: "Config objects written to tributary.config by the console, by kind."}, []string{"kind"}),
		regulations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tributary_console_regulations_total",
			Help: "Deletion and suppression requests created, by regulation type."}, []string{"type"}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_dlq_replayed_total",
			Help: "Dead letters replayed from the console."}),
		retriedNow: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_retried_now_total",
			Help: "Messages waiting in a retry tier sent now from the console (retry now)."}),
		tests: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_destination_tests_total",
			Help: "Test events sent to destinations."}),
		attemptsRead: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_attempts_read_total",
			Help: "webhooks.attempts records applied to the delivery log."}),
		attemptsSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_attempts_skipped_total",
			Help: "webhooks.attempts records that did not decode."}),
		liveStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tributary_console_live_streams",
			Help: "Open live event streams (the source debugger)."}),
		streamsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_live_streams_refused_total",
			Help: "Live event streams refused for the stream limits (CONSOLE_MAX_STREAMS, CONSOLE_MAX_STREAMS_PER_SESSION)."}),
		purges: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_forget_purges_total",
			Help: "Purges of the views after a deletion or suppression was read (docs/console.md#what-the-console-forgets)."}),
		forgotten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tributary_console_forgotten_entries_total",
			Help: "Entries of deleted or suppressed users the views dropped, by purge or as they were read, by view (events, attempts, dlq, pending)."}, []string{"view"}),
	}
	reg.MustRegister(m.unauthorized, m.configWrites, m.regulations, m.replayed, m.retriedNow, m.tests, m.attemptsRead, m.attemptsSkipped, m.liveStreams, m.streamsRefused, m.purges, m.forgotten)
	return m
}
