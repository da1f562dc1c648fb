package deliverer_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// Dead letters are re-enqueued, filtered by destination, with a fresh window, and delivered.
func TestReplayDeadLetters(t *testing.T) {
	var fixed atomic.Bool
	respond := func(_ int, _ *http.Request, w http.ResponseWriter) {
		if !fixed.Load() {
			w.WriteHeader(http.StatusGone)
		}
	}
	a, b := newReceiver(t, respond), newReceiver(t, respond)
	h := newHarness(t, "1s,2s", destYAML(dest("a", []string{a.URL}, ""), dest("b", []string{b.URL}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	deliveries := h.reader(schemas.TopicDeliveries)
	h.run(h.config())
	h.send("a", "a1", "a2", "a3")
	h.send("b", "b1")
	dlq.waitFor(4, 10*time.Second)
	deliveries.waitFor(4, 10*time.Second)
	before := time.Now()

	fixed.Store(true)
	onlyA := deliverer.ReplayFilter{DestinationID: "a", Since: before.Add(-time.Minute)}
	dry, err := deliverer.Replay(h.ctx, h.kafka, h.logger, deliverer.DefaultReplayTopics, onlyA, true)
	if err != nil || len(dry) != 3 || dry[0].DestinationID != "a" || dry[0].Reason == "" || dry[0].MessageID == "" {
		t.Fatalf("dry run: %+v (%v), want a's 3 dead letters", dry, err)
	}
	time.Sleep(500 * time.Millisecond)
	if len(a.requests()) != 3 {
		t.Fatalf("a dry run re-enqueued: %d requests", len(a.requests()))
	}
	replayed, err := deliverer.Replay(h.ctx, h.kafka, h.logger, deliverer.DefaultReplayTopics, onlyA, false)
	if err != nil || len(replayed) != 3 {
		t.Fatalf("replayed %d (%v), want 3", len(replayed), err)
	}
	a.waitRequests(t, 6, 10*time.Second) // 3 refused, then 3 replayed
	time.Sleep(time.Second)
	if len(b.requests()) != 1 {
		t.Fatalf("destination b was replayed too: %d requests", len(b.requests()))
	}
	if len(a.requests()) != 6 {
		t.Fatalf("destination a got %d requests, want 6", len(a.requests()))
	}
	for _, r := range deliveries.waitFor(7, 5*time.Second)[4:] {
		fa, _ := schemas.ParseTimestamp(hdr(r, "first-attempt-at"))
		if hdr(r, "attempt") != "1" || fa.Before(before.Add(-time.Second)) || hdr(r, "reason") != "" || hdr(r, "destination-id") != "a" {
			t.Errorf("replayed record headers %v", r.Headers)
		}
	}
	if got, err := deliverer.Replay(h.ctx, h.kafka, h.logger, deliverer.DefaultReplayTopics,
		deliverer.ReplayFilter{Until: before.Add(-time.Hour)}, false); err != nil || len(got) != 0 {
		t.Fatalf("a time filter before every dead letter replayed %d (%v)", len(got), err)
	}
	// Idempotent: the same replay again sends nothing; b's dead letter is still there to replay;
	// Again replays a's once more.
	if got, err := deliverer.Replay(h.ctx, h.kafka, h.logger, deliverer.DefaultReplayTopics, onlyA, false); err != nil || len(got) != 0 {
		t.Fatalf("the same replay again replayed %d (%v), want 0", len(got), err)
	}
	list, err := deliverer.ListDeadLetters(h.ctx, h.kafka, h.logger, deliverer.DefaultReplayTopics, deliverer.ReplayFilter{Again: true})
	if err != nil || len(list) != 4 {
		t.Fatalf("list: %d (%v), want 4", len(list), err)
	}
	for _, d := range list {
		if (d.DestinationID == "a") == d.ReplayedAt.IsZero() {
			t.Errorf("listed %+v: only a's are replayed", d)
		}
	}
	if got, err := deliverer.Replay(h.ctx, h.kafka, h.logger, deliverer.DefaultReplayTopics, deliverer.ReplayFilter{}, false); err != nil || len(got) != 1 || got[0].DestinationID != "b" {
		t.Fatalf("replay of the rest: %+v (%v), want b's only", got, err)
	}
	again := onlyA
	again.Again = true
	if got, err := deliverer.Replay(h.ctx, h.kafka, h.logger, deliverer.DefaultReplayTopics, again, false); err != nil || len(got) != 3 {
		t.Fatalf("replay again: %d (%v), want 3", len(got), err)
	}
	a.waitRequests(t, 9, 10*time.Second)
}

// Replay reads a DLQ to the end offsets it finds when called, and a partition whose dead
// letters all expired (deleted by retention: its start offset is its end offset) counts as
// read: Replay returns, replaying what the other partitions hold.
func TestReplayReturnsWhenDeadLettersExpired(t *testing.T) {
	kafka, cl, logger := servicetest.Connect(t, kafkatest.Embedded(t))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopics(t.Context(), 2, 1, nil, schemas.TopicDLQ, schemas.TopicDeliveries, schemas.TopicDLQReplayed); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		expired []int32 // partitions whose dead letters expire
		want    int
	}{
		{name: "one partition expired", expired: []int32{0}, want: 5},
		{name: "every partition expired", expired: []int32{0, 1}, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var recs []*kgo.Record
			for p := range int32(2) {
				for i := range 5 {
					recs = append(recs, &kgo.Record{Topic: schemas.TopicDLQ, Partition: p, Key: []byte("d:u" + strconv.Itoa(i)),
						Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("d")}}})
				}
			}
			pcl, err := platform.NewKafkaClient(kafka, logger, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer pcl.Close()
			if err := pcl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			servicetest.DeleteRecords(t, t.Context(), adm, schemas.TopicDLQ, tt.expired...)
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			got, err := deliverer.Replay(ctx, kafka, logger, deliverer.DefaultReplayTopics, deliverer.ReplayFilter{Again: true}, false)
			if err != nil || len(got) != tt.want {
				t.Fatalf("Replay: %d replayed (%v), want %d and no error", len(got), err, tt.want)
			}
		})
	}
}
