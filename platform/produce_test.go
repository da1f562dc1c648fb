package platform_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
)

// produceClient is a client of a fresh embedded broker with opts, and a topic of three
// partitions whose metadata the client already knows (one record produced and flushed).
func produceClient(t *testing.T, opts ...kgo.Opt) (*kgo.Client, string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3}
	cl, err := platform.NewKafkaClient(s, zerolog.Nop(), opts...)
	if err != nil {
		t.Fatalf("NewKafkaClient: %v", err)
	}
	t.Cleanup(cl.Close)
	topic := kafkatest.UniqueTopic(t, "produce")
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	// Flush sends without lingering: the warm-up does not take the linger either.
	cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("warm-up")}, nil)
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return cl, topic
}

// TestProduceAllSkipsTheLinger: a caller that waits for its records does not wait out the
// client's linger: a lone record is sent at once.
func TestProduceAllSkipsTheLinger(t *testing.T) {
	const linger = 2 * time.Second
	cl, topic := produceClient(t, kgo.ProducerLinger(linger))
	ctx := testCtx(t, 30*time.Second)
	for i := range 3 {
		rec := &kgo.Record{Topic: topic, Key: []byte{byte('a' + i)}, Value: []byte("lone")}
		start := time.Now()
		if err := platform.ProduceAll(ctx, cl, []*kgo.Record{rec}); err != nil {
			t.Fatalf("ProduceAll %d: %v", i, err)
		}
		// Slack for a loaded machine: the acknowledgement takes a millisecond or so.
		if took := time.Since(start); took >= linger/2 {
			t.Errorf("ProduceAll %d of one record took %v with a %v linger: it waited for the linger", i, took, linger)
		}
	}
	if got, _ := written(t, cl, topic); got != 4 {
		t.Errorf("the topic holds %d records, want 4 (the warm-up and 3)", got)
	}
}

// written counts the records of topic (from its end offsets) and the partitions holding any.
func written(t *testing.T, cl *kgo.Client, topic string) (records, partitions int) {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t, 30*time.Second), topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	if err := ends.Error(); err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		records += int(o.Offset)
		if o.Offset > 0 {
			partitions++
		}
	})
	return records, partitions
}

func TestProduceAll(t *testing.T) {
	tests := []struct {
		name string
		recs func(topic string) []*kgo.Record
		// wantErr: ProduceAll fails with this Kafka error, naming the topic; nil: it succeeds.
		wantErr error
		// acked: how many of recs must be written.
		acked int
	}{
		{name: "no records", recs: func(string) []*kgo.Record { return nil }},
		{name: "many records over every partition", acked: 60, recs: func(topic string) []*kgo.Record {
			recs := make([]*kgo.Record, 60)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: topic, Key: []byte{byte(i)}, Value: []byte("v")}
			}
			return recs
		}},
		{name: "one record too large", wantErr: kerr.MessageTooLarge, acked: 2, recs: func(topic string) []*kgo.Record {
			return []*kgo.Record{
				{Topic: topic, Key: []byte("a"), Value: []byte("fits")},
				{Topic: topic, Key: []byte("b"), Value: bytes.Repeat([]byte("x"), 8<<10)},
				{Topic: topic, Key: []byte("c"), Value: []byte("fits")},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, topic := produceClient(t, kgo.ProducerBatchMaxBytes(4<<10))
			recs := tt.recs(topic)
			err := platform.ProduceAll(testCtx(t, 30*time.Second), cl, recs)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("ProduceAll: %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("ProduceAll = %v, want %v", err, tt.wantErr)
			case tt.wantErr != nil && !strings.HasPrefix(err.Error(), "producing to "+topic+": "):
				t.Errorf("ProduceAll = %q, want it to name the topic %s", err, topic)
			}
			// Every record not refused was written (besides the warm-up), spread over every
			// partition when there are many.
			total, partitions := written(t, cl, topic)
			if want := tt.acked + 1; total != want {
				t.Errorf("the topic holds %d records, want %d (the warm-up and %d)", total, want, tt.acked)
			}
			if tt.acked >= 60 && partitions != 3 {
				t.Errorf("records went to %d partitions, want 3", partitions)
			}
		})
	}
}

// TestSealingClientsDoNotCompress: a client of KafkaSettings with ShredEvents writes its
// batches uncompressed (sealed values do not compress: docs/security.md#crypto-shredding); one
// without keeps franz-go's default compression, and a client's own option still wins.
func TestSealingClientsDoNotCompress(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	ctx := testCtx(t, 30*time.Second)
	value := bytes.Repeat([]byte(`{"type":"track","event":"Order Completed"}`), 50) // compresses well
	for _, tt := range []struct {
		name  string
		shred bool
		opts  []kgo.Opt
		want  uint8 // kgo.RecordAttrs.CompressionType: 0 none, 2 snappy
	}{
		{"sealing", true, nil, 0},
		{"plain", false, nil, 2},
		{"sealing, the client's own choice", true, []kgo.Opt{kgo.ProducerBatchCompression(kgo.SnappyCompression())}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := platform.KafkaSettings{Brokers: brokers, ReplicationFactor: -1, Partitions: 1, ShredEvents: tt.shred}
			cl, err := platform.NewKafkaClient(s, zerolog.Nop(), tt.opts...)
			if err != nil {
				t.Fatalf("NewKafkaClient: %v", err)
			}
			defer cl.Close()
			topic := kafkatest.UniqueTopic(t, "compression")
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
				t.Fatalf("CreateTopic: %v", err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			for {
				fs := rd.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("the record was not read back: %v", err)
				}
				if recs := fs.Records(); len(recs) > 0 {
					if got := recs[0].Attrs.CompressionType(); got != tt.want {
						t.Errorf("batch compression %d, want %d", got, tt.want)
					}
					return
				}
			}
		})
	}
}
