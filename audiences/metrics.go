package audiences

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's own series (docs/audiences.md#metrics); the consumer lag of its
// group comes from platform.LagCollector.
type metrics struct {
	events     prometheus.Counter
	duplicates prometheus.Counter
	profiles   prometheus.Gauge
	restores   prometheus.Counter
	deletions  prometheus.Counter
	// shredded counts records not read because their data key was shredded, by topic.
	shredded    *prometheus.CounterVec
	identifies  *prometheus.CounterVec
	tracks      *prometheus.CounterVec
	syncSeconds prometheus.Histogram
	// merges and refusals: identity resolution (docs/audiences.md#identity-resolution).
	merges   prometheus.Counter
	refusals *prometheus.CounterVec
	// backfill (docs/audiences.md#backfill)
	backfillEvents  prometheus.Counter
	backfillRunning prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_audiences_events_total",
			Help: "tracking.events messages applied to profiles (the service's own identify calls are not counted).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_audiences_duplicate_events_total",
			Help: "tracking.events messages not applied because their profile had just applied the same messageId (a client's retry accepted twice).",
		}),
		profiles: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tributary_audiences_profiles",
			Help: "Profiles held in memory by this instance (anonymous, identified, merge redirects and suppressions).",
		}),
		restores: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_audiences_restores_total",
			Help: "Restores of owned partitions from audiences.state (after an assignment or an aborted transaction).",
		}),
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_audiences_deletion_requests_total",
			Help: "Deletion and suppression requests applied to profiles.",
		}),
		shredded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_audiences_shredded_records_total",
			Help: "Records skipped because their data key was shredded (their user was deleted, docs/security.md#crypto-shredding), by topic: tracking.events, audiences.repartition, audiences.state (at restore).",
		}, []string{"topic"}),
		identifies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_audiences_identifies_total",
			Help: "Identify calls emitted to tracking.events, by computation class (audience, computed_trait) and id.",
		}, []string{"class", "id"}),
		tracks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_audiences_tracks_total",
			Help: "Audience Entered and Audience Exited track calls emitted to tracking.events (audiences with output track or both), by audience id.",
		}, []string{"id"}),
		syncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tributary_audiences_sync_duration_seconds",
			Help:    "How long the sync of one partition took (evaluating every profile and building its identify calls).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}),
		merges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tributary_audiences_identity_merges_total",
			Help: "Profiles merged into another (an anonymousId or previousId of an identified message, or an external id two profiles share), each recorded on the merged profile.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_audiences_identity_refusals_total",
			Help: "Ids refused by the identity rules, each recorded on the profile, by rule: blocked, limit, maxMerges, taken (an anonymous id another user holds), suppressed.",
		}, []string{"rule"}),
	}
	m.backfillEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tributary_audiences_backfill_events_total",
		Help: "tracking.events records read by backfills of new aggregates (docs/audiences.md#backfill).",
	})
	m.backfillRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tributary_audiences_backfill_running",
		Help: "Partitions of this instance with a backfill read or merge in progress.",
	})
	for _, c := range []prometheus.Collector{m.events, m.duplicates, m.profiles, m.restores, m.deletions, m.shredded, m.identifies, m.tracks, m.syncSeconds, m.merges, m.refusals, m.backfillEvents, m.backfillRunning} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering audiences metrics: %w", err)
		}
	}
	return m, nil
}
