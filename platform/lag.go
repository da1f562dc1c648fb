package platform

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LagCollector exports the consumer lag of a service's consumer groups as the gauge
// tributary_consumer_lag_records{service, group, topic}: per topic, the sum over its partitions of the
// end offset (the last stable one) minus the group's committed offset. It asks Kafka at each
// scrape (at most lagTimeout); a group or partition Kafka cannot answer for is left out of
// that scrape. Close it when the service stops.
type LagCollector struct {
	groups []string
	logger zerolog.Logger
	desc   *prometheus.Desc

	newClient func() (*kgo.Client, error)
	mu        sync.Mutex
	cl        *kgo.Client
}

// lagTimeout bounds one scrape's questions to Kafka.
const lagTimeout = 5 * time.Second

// NewLagCollector returns the collector of groups' lag; its client is created at the first
// scrape.
func NewLagCollector(service string, kafka KafkaSettings, logger zerolog.Logger, groups []string, opts ...kgo.Opt) *LagCollector {
	return &LagCollector{
		groups: groups, logger: logger,
		desc: prometheus.NewDesc("tributary_consumer_lag_records",
			"Records a consumer group has not committed yet, per topic: end offset minus committed offset, summed over the partitions.",
			[]string{"group", "topic"}, prometheus.Labels{"service": service}),
		newClient: func() (*kgo.Client, error) { return NewKafkaClient(kafka, logger, opts...) },
	}
}

// Describe implements prometheus.Collector.
func (c *LagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *LagCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl == nil {
		cl, err := c.newClient()
		if err != nil {
			c.logger.Debug().Err(err).Msg("consumer lag: no Kafka client")
			return
		}
		c.cl = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	lags, err := kadm.NewClient(c.cl).Lag(ctx, c.groups...)
	if err != nil {
		c.logger.Debug().Err(err).Msg("consumer lag: Kafka did not answer")
		return
	}
	for _, g := range lags.Sorted() {
		if g.Error() != nil {
			continue
		}
		for topic, parts := range g.Lag {
			sum, ok := int64(0), false
			for _, p := range parts {
				if p.Err == nil && p.Lag >= 0 {
					sum, ok = sum+p.Lag, true
				}
			}
			if ok {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(sum), g.Group, topic)
			}
		}
	}
}

// Close closes its client.
func (c *LagCollector) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl != nil {
		c.cl.Close()
		c.cl = nil
	}
}
