package platform_test

import (
	"context"
	"slices"
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

// TestTopicReaderStarts: a reader of two topics starts where its configuration says — each
// partition's start, its last N records (none for N = 0, all when it holds fewer), the
// records at or after a time — or reads only the partitions it names, and is ready once it
// read them to their ends; a partition whose records were all deleted counts as read whatever
// the start.
func TestTopicReaderStarts(t *testing.T) {
	kafka, _, logger := servicetest.Connect(t, kafkatest.Embedded(t))
	cl, err := platform.NewKafkaClient(kafka, logger, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const a, b, gone = "starts-a", "starts-b", "starts-deleted"
	if _, err := adm.CreateTopics(t.Context(), 2, 1, nil, a, b, gone); err != nil {
		t.Fatal(err)
	}
	// Per topic and partition: o0..o2 two hours old, then (in later batches) n3, n4 now.
	now := time.Now()
	produce := func(from, to int, key string, ts time.Time) {
		t.Helper()
		var recs []*kgo.Record
		for _, topic := range []string{a, b, gone} {
			for p := range int32(2) {
				for i := from; i < to; i++ {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Timestamp: ts,
						Key: []byte(topic + "/" + strconv.Itoa(int(p)) + "/" + key + strconv.Itoa(i))})
				}
			}
		}
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 3, "o", now.Add(-2*time.Hour))
	produce(3, 5, "n", now)
	servicetest.DeleteRecords(t, t.Context(), adm, gone)

	for _, tt := range []struct {
		name       string
		topics     []string
		partitions []int32
		start      platform.Start
		want       []string // suffixes of the keys read, per partition read: topic/partition/ is left out
	}{
		{name: "from the start", topics: []string{a, b}, want: []string{"o0", "o1", "o2", "n3", "n4"}},
		{name: "last 2", topics: []string{a, b}, start: platform.StartLast(2), want: []string{"n3", "n4"}},
		{name: "last 0", topics: []string{a, b}, start: platform.StartLast(0)},
		{name: "last 9 of 5", topics: []string{a, b}, start: platform.StartLast(9), want: []string{"o0", "o1", "o2", "n3", "n4"}},
		{name: "after an hour ago", topics: []string{a, b}, start: platform.StartAfter(now.Add(-time.Hour)), want: []string{"n3", "n4"}},
		{name: "partition 1 only", topics: []string{a}, partitions: []int32{1}, want: []string{"o0", "o1", "o2", "n3", "n4"}},
		{name: "deleted, from the start", topics: []string{gone}},
		{name: "deleted, last 2", topics: []string{gone}, start: platform.StartLast(2)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			reader, err := platform.NewTopicReader(platform.TopicReaderConfig{
				Kafka: kafka, Topics: tt.topics, Partitions: tt.partitions, Start: tt.start, Logger: logger,
				Opts:  []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
				Apply: func(r *kgo.Record) { got = append(got, string(r.Key)) },
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			if err := reader.Run(ctx); err != nil || ctx.Err() != nil {
				t.Fatalf("Run: %v (context: %v), want it to return once caught up", err, ctx.Err())
			}
			var want []string
			for _, topic := range tt.topics {
				for p := range int32(2) {
					if tt.partitions != nil && !slices.Contains(tt.partitions, p) {
						continue
					}
					for _, k := range tt.want {
						want = append(want, topic+"/"+strconv.Itoa(int(p))+"/"+k)
					}
				}
			}
			slices.Sort(got) // in order per partition; the partitions interleave
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("read %q, want %q", got, want)
			}
		})
	}
}

// TestTopicReaderReadCommitted: a reader of committed records applies what committed
// transactions wrote and no transaction marker, and is ready at the last stable offsets: an
// open transaction does not hold it back; following, it applies that transaction's records
// once it commits.
func TestTopicReaderReadCommitted(t *testing.T) {
	kafka, cl, logger := servicetest.Connect(t, kafkatest.Embedded(t))
	const topic = "committed"
	if _, err := kadm.NewClient(cl).CreateTopics(t.Context(), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	txn := func(id string, keys ...string) *kgo.Client {
		t.Helper()
		tc, err := platform.NewKafkaClient(kafka, logger, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close)
		if err := tc.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if err := tc.ProduceSync(t.Context(), &kgo.Record{Key: []byte(k)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		return tc
	}
	if err := txn("committed", "c1", "c2").EndTransaction(t.Context(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := txn("aborted", "x").EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	open := txn("open", "o1")

	applied := make(chan string, 10)
	reader, err := platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka: kafka, Topic: topic, ReadCommitted: true, Follow: true, Logger: logger,
		Opts: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
		Apply: func(r *kgo.Record) {
			if r.Attrs.IsControl() {
				applied <- "control record at " + strconv.FormatInt(r.Offset, 10)
				return
			}
			applied <- string(r.Key)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- reader.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-reader.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("reader not ready with a transaction open")
	}
	var got []string
	for len(applied) > 0 {
		got = append(got, <-applied)
	}
	if !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("applied %q when ready, want the committed c1 and c2 only", got)
	}
	if err := open.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-applied:
		if k != "o1" {
			t.Fatalf("applied %q after the commit, want o1", k)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("o1 not applied once its transaction committed")
	}
	select {
	case k := <-applied:
		t.Fatalf("applied %q after o1, want nothing", k)
	case <-time.After(300 * time.Millisecond):
	}
}
