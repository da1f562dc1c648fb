package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
)

// TestLagCollector: a group that committed 4 of a topic's 10 records lags 6 behind.
func TestLagCollector(t *testing.T) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "lag")
	if err := platform.EnsureTopics(ctx, adm, -1, []platform.TopicSpec{{Name: topic, Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "lagging", offsets); err != nil {
		t.Fatal(err)
	}
	lag := platform.NewLagCollector("router", s, zerolog.Nop(), []string{"lagging"})
	defer lag.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(lag)
	want := `
# HELP tributary_consumer_lag_records Records a consumer group has not committed yet, per topic: end offset minus committed offset, summed over the partitions.
# TYPE tributary_consumer_lag_records gauge
tributary_consumer_lag_records{group="lagging",service="router",topic="` + topic + `"} 6
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tributary_consumer_lag_records"); err != nil {
		t.Error(err)
	}
}

// TestReadGroupLag: the one reading of a group's lag sums it per topic over the partitions (3
// of 5 records behind on one, 1 on the other: 4), as the console's overview and the collector
// read it.
func TestReadGroupLag(t *testing.T) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := platform.NewKafkaClient(s, zerolog.Nop(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := kafkatest.UniqueTopic(t, "lag")
	if err := platform.EnsureTopics(ctx, adm, -1, []platform.TopicSpec{{Name: topic, Partitions: 2}}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte("x")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offsets := kadm.Offsets{}
	offsets.AddOffset(topic, 0, 2, -1)
	offsets.AddOffset(topic, 1, 4, -1)
	if _, err := adm.CommitOffsets(ctx, "lagging", offsets); err != nil {
		t.Fatal(err)
	}
	lags, err := platform.ReadGroupLag(ctx, adm, "lagging")
	if err != nil {
		t.Fatal(err)
	}
	if len(lags) != 1 || lags[0].Group != "lagging" || lags[0].Err != nil || lags[0].Topics[topic] != 4 || len(lags[0].Topics) != 1 {
		t.Fatalf("lag %+v, want group lagging 4 behind on %s only", lags, topic)
	}
}
