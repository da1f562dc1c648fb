package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
)

// A caller of ProduceAll waits for the acknowledgement, so nothing is gained by lingering: a
// lone record on a client that lingers a second must come back well before that second.
func TestProduceAllSkipsTheLinger(t *testing.T) {
	kafka := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 1}
	cl, err := platform.NewKafkaClient(kafka, zerolog.Nop(), kgo.ProducerLinger(time.Second), kgo.DefaultProduceTopic("lone"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := platform.EnsureTopics(ctx, kadm.NewClient(cl), -1, []platform.TopicSpec{{Name: "lone", Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	// The first produce also loads the topic's metadata; time the later ones.
	if err := platform.ProduceAll(ctx, cl, []*kgo.Record{{Value: []byte("warm-up")}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		if err := platform.ProduceAll(ctx, cl, []*kgo.Record{{Value: []byte("lone")}}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Fatalf("produce %d took %s: it waited for the 1s linger", i, took)
		}
	}
}

func TestProduceAllNamesTheTopicOfAFailure(t *testing.T) {
	kafka := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 1}
	cl, err := platform.NewKafkaClient(kafka, zerolog.Nop(), kgo.ProducerBatchMaxBytes(1<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	big := []*kgo.Record{{Topic: "too-big", Value: make([]byte, 4<<10)}}
	err = platform.ProduceAll(t.Context(), cl, big)
	if err == nil || !strings.Contains(err.Error(), "producing to too-big") {
		t.Fatalf("err = %v, want one naming the topic", err)
	}
}
