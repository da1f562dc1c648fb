package platform_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// The reader is ready once it has applied everything written before it started: on an empty
// topic, on a topic whose records were all deleted, and after reading N records. Following,
// it applies what comes later too; not following, Run returns once ready.
func TestTopicReaderReady(t *testing.T) {
	for _, tt := range []struct {
		name    string
		records int  // written before the reader starts
		deleted bool // ... and then deleted (DeleteRecords up to the end)
		follow  bool
	}{
		{name: "empty topic", follow: true},
		{name: "empty topic, not following"},
		{name: "every record deleted", records: 30, deleted: true, follow: true},
		{name: "every record deleted, not following", records: 30, deleted: true},
		{name: "N records", records: 250, follow: true},
		{name: "N records, not following", records: 250},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kafka, cl, logger := servicetest.Connect(t, kafkatest.Embedded(t))
			adm := kadm.NewClient(cl)
			const topic = "compacted"
			if _, err := adm.CreateTopics(t.Context(), 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			produce := func(prefix string, n int) {
				t.Helper()
				recs := make([]*kgo.Record, n)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: topic, Key: []byte(prefix + strconv.Itoa(i))}
				}
				if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			produce("a", tt.records)
			if tt.deleted {
				servicetest.DeleteRecords(t, t.Context(), adm, topic)
			}

			applied := make(chan string, 1000) // keys, in the order applied
			var atCaughtUp int
			caughtUps := 0
			reader, err := platform.NewTopicReader(platform.TopicReaderConfig{
				Kafka: kafka, Topic: topic, Follow: tt.follow, Logger: logger,
				Opts:  []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
				Apply: func(r *kgo.Record) { applied <- string(r.Key) },
				Polled: func(caughtUp bool) error {
					if caughtUp {
						if caughtUps == 0 {
							atCaughtUp = len(applied)
						}
						caughtUps++
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- reader.Run(ctx) }()
			select {
			case <-reader.Ready():
			case err := <-done:
				t.Fatalf("Run returned %v before Ready", err)
			case <-time.After(15 * time.Second):
				t.Fatal("reader not ready")
			}
			want := tt.records
			if tt.deleted {
				want = 0
			}
			if atCaughtUp != want {
				t.Errorf("applied %d records when caught up, want %d", atCaughtUp, want)
			}
			if !tt.follow {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("Run: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Run did not return once caught up")
				}
				if caughtUps != 1 || len(applied) != want {
					t.Fatalf("caught up %d times, applied %d, want once and %d", caughtUps, len(applied), want)
				}
				return
			}
			// Following: later records are applied too.
			produce("b", 20)
			deadline := time.After(15 * time.Second)
			for len(applied) < want+20 {
				select {
				case <-deadline:
					t.Fatalf("applied %d records, want %d", len(applied), want+20)
				case <-time.After(20 * time.Millisecond):
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			seen := map[string]bool{}
			for len(applied) > 0 {
				seen[<-applied] = true
			}
			if len(seen) != want+20 || !seen["b19"] {
				t.Fatalf("applied %d distinct keys, want %d", len(seen), want+20)
			}
		})
	}
}

// With NoWait, a reader of a topic that does not exist fails at once instead of waiting.
func TestTopicReaderNoWaitMissingTopic(t *testing.T) {
	kafka := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3}
	reader, err := platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka: kafka, Topic: "missing", NoWait: true, Logger: zerolog.Nop(),
		Apply: func(*kgo.Record) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := reader.Run(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Run: %v (context: %v), want an error at once", err, ctx.Err())
	}
}
