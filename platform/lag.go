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
	lags, err := ReadGroupLag(ctx, kadm.NewClient(c.cl), c.groups...)
	if err != nil {
		c.logger.Debug().Err(err).Msg("consumer lag: Kafka did not answer")
		return
	}
	for _, g := range lags {
		if g.Err != nil {
			continue
		}
		for topic, sum := range g.Topics {
			if sum >= 0 {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(sum), g.Group, topic)
			}
		}
	}
}

// GroupLag is a consumer group's lag: per topic, the records it has not committed yet, the
// sum over the topic's partitions of the end offset (the last stable one) minus the group's
// committed offset. A partition Kafka could not answer for is left out of its topic's sum;
// a topic none of whose partitions it answered for is -1.
type GroupLag struct {
	Group  string
	Topics map[string]int64
	// Err is why the group's lag is unknown (Kafka could not describe the group or fetch its
	// offsets); Topics is then empty.
	Err error
}

// ReadGroupLag reads the lag of groups (kadm's Client.Lag), sorted by group: the one reading
// of consumer lag, shared by LagCollector and the console's overview. An error says Kafka did
// not answer at all.
func ReadGroupLag(ctx context.Context, adm *kadm.Client, groups ...string) ([]GroupLag, error) {
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return nil, err
	}
	var out []GroupLag
	for _, g := range lags.Sorted() {
		gl := GroupLag{Group: g.Group, Topics: map[string]int64{}, Err: g.Error()}
		if gl.Err == nil {
			for topic, parts := range g.Lag {
				sum := int64(-1)
				for _, p := range parts {
					if p.Err == nil && p.Lag >= 0 {
						sum = max(sum, 0) + p.Lag
					}
				}
				gl.Topics[topic] = sum
			}
		}
		out = append(out, gl)
	}
	return out, nil
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
