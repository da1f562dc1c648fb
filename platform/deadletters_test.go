package platform_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The dead-letter library alone (deliverer/replay_test.go replays to a running deliverer):
// what a DeadLetter holds, the message-id filter, the headers of a replayed record (with and
// without a URL), a refused URL, and the markers that make a replay idempotent.
func TestDeadLetters(t *testing.T) {
	kafka, cl, logger := servicetest.Connect(t, kafkatest.Embedded(t))
	if _, err := kadm.NewClient(cl).CreateTopics(t.Context(), 1, 1, nil, schemas.TopicDLQ, schemas.TopicDeliveries, schemas.TopicDLQReplayed,
		schemas.TopicSuppressions, schemas.TopicDeletionsStatus); err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	dead := func(id string, extra ...kgo.RecordHeader) *kgo.Record {
		return &kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("d:u-" + id), Value: []byte(`{"messageId":"` + id + `"}`),
			Headers: append([]kgo.RecordHeader{
				{Key: schemas.HeaderDestinationID, Value: []byte("d")}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderType, Value: []byte("track")},
				{Key: schemas.HeaderAttempt, Value: []byte("4")}, {Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(first))},
				{Key: schemas.HeaderReason, Value: []byte("retries_exhausted")}, {Key: schemas.HeaderLastStatus, Value: []byte("503")},
				{Key: schemas.HeaderLastError, Value: []byte("status_5xx: HTTP 503")}, {Key: schemas.HeaderDeferrals, Value: []byte("2")},
			}, extra...)}
	}
	if err := cl.ProduceSync(t.Context(), dead("m1"), dead("m2"), dead("m3", kgo.RecordHeader{Key: schemas.HeaderURL, Value: []byte("https://old.example.com/x")})).FirstErr(); err != nil {
		t.Fatal(err)
	}
	topics := platform.DefaultReplayTopics

	all, err := platform.ListDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("list: %d (%v), want 3", len(all), err)
	}
	if d := all[0]; d.MessageID != "m1" || d.DestinationID != "d" || d.Reason != "retries_exhausted" || d.LastStatus != "503" ||
		d.Attempts != 4 || !d.FirstAttemptAt.Equal(first) || d.At.IsZero() || !d.ReplayedAt.IsZero() || d.URL != "" {
		t.Errorf("dead letter %+v", d)
	}
	if all[2].URL != "https://old.example.com/x" {
		t.Errorf("dead letter of a replay to a URL: %+v", all[2])
	}
	some, err := platform.ListDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{MessageIDs: []string{"m3", "m1", "nope"}})
	if err != nil || len(some) != 2 || some[0].MessageID != "m1" || some[1].MessageID != "m3" {
		t.Fatalf("list of m3, m1: %+v (%v)", some, err)
	}

	if _, err := platform.ReplayDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{}, platform.ReplayOptions{URL: "ftp://x.example.com"}); err == nil {
		t.Error("a replay to an ftp URL: no error")
	}
	dry, err := platform.ReplayDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{}, platform.ReplayOptions{DryRun: true, URL: "https://new.example.com/in"})
	if err != nil || len(dry) != 3 {
		t.Fatalf("dry run: %d (%v), want 3", len(dry), err)
	}
	before := time.Now().Add(-time.Second)
	// m1 to a URL; m3 (replayed to a URL before) back to the destination's webhooks.
	toURL, err := platform.ReplayDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{MessageIDs: []string{"m1"}}, platform.ReplayOptions{URL: "https://new.example.com/in"})
	if err != nil || len(toURL) != 1 || toURL[0].ReplayedAt.IsZero() {
		t.Fatalf("replay of m1 to a URL: %+v (%v)", toURL, err)
	}
	back, err := platform.ReplayDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{MessageIDs: []string{"m3"}}, platform.ReplayOptions{})
	if err != nil || len(back) != 1 {
		t.Fatalf("replay of m3: %+v (%v)", back, err)
	}
	recs := readAll(t, kafka, logger, schemas.TopicDeliveries, 2)
	for i, want := range []struct{ id, url string }{{"m1", "https://new.example.com/in"}, {"m3", ""}} {
		r := recs[i]
		fa, _ := schemas.ParseTimestamp(servicetest.Header(r, schemas.HeaderFirstAttemptAt))
		if servicetest.Header(r, schemas.HeaderMessageID) != want.id || servicetest.Header(r, schemas.HeaderURL) != want.url ||
			servicetest.Header(r, schemas.HeaderAttempt) != "1" || fa.Before(before) || servicetest.Header(r, schemas.HeaderType) != "track" ||
			string(r.Key) != "d:u-"+want.id || string(r.Value) != `{"messageId":"`+want.id+`"}` {
			t.Errorf("replayed %s: key %s, headers %v", want.id, r.Key, r.Headers)
		}
		for _, gone := range []string{schemas.HeaderReason, schemas.HeaderLastStatus, schemas.HeaderLastError, schemas.HeaderDeferrals, schemas.HeaderDueAt} {
			if servicetest.Header(r, gone) != "" {
				t.Errorf("replayed %s keeps header %s", want.id, gone)
			}
		}
		count := map[string]int{}
		for _, h := range r.Headers {
			count[h.Key]++
		}
		if wantURLs := min(1, len(want.url)); count[schemas.HeaderAttempt] != 1 || count[schemas.HeaderURL] != wantURLs {
			t.Errorf("replayed %s: headers %v, want one attempt and %d url", want.id, r.Headers, wantURLs)
		}
	}
	// Only m2 is left to replay; Again lists all three again.
	left, err := platform.ListDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{})
	if err != nil || len(left) != 1 || left[0].MessageID != "m2" {
		t.Fatalf("left after the replays: %+v (%v), want m2", left, err)
	}
	again, err := platform.ListDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{Again: true})
	if err != nil || len(again) != 3 || again[0].ReplayedAt.IsZero() || !again[1].ReplayedAt.IsZero() {
		t.Fatalf("list again: %+v (%v)", again, err)
	}
}

// readAll reads n records of topic from the start.
func readAll(t *testing.T, kafka platform.KafkaSettings, logger zerolog.Logger, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := platform.NewKafkaClient(kafka, logger, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s, want %d", len(got), topic, n)
		}
		got = append(got, fs.Records()...)
	}
	return got
}

// ReplayDeadLetters reads a DLQ to the end offsets it finds when called, and a partition whose
// dead letters all expired (deleted by retention: its start offset is its end offset) counts
// as read: it returns, replaying what the other partitions hold.
func TestReplayReturnsWhenDeadLettersExpired(t *testing.T) {
	kafka, cl, logger := servicetest.Connect(t, kafkatest.Embedded(t))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopics(t.Context(), 2, 1, nil, schemas.TopicDLQ, schemas.TopicDeliveries, schemas.TopicDLQReplayed,
		schemas.TopicSuppressions, schemas.TopicDeletionsStatus); err != nil {
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
			got, err := platform.ReplayDeadLetters(ctx, kafka, logger, platform.DefaultReplayTopics, platform.ReplayFilter{Again: true}, platform.ReplayOptions{})
			if err != nil || len(got) != tt.want {
				t.Fatalf("ReplayDeadLetters: %d replayed (%v), want %d and no error", len(got), err, tt.want)
			}
		})
	}
}

// A message's dead letters are one: replaying a message takes only its newest dead letter and
// marks the older ones superseded, whatever the DLQ holds for it (each failed replay adds a
// dead letter), so that replaying one message by id again and again sends one copy each time;
// the list shows one entry per message. docs/delivery.md#dead-letters-and-replay.
func TestReplayOncePerMessage(t *testing.T) {
	kafka, cl, logger := servicetest.Connect(t, kafkatest.Embedded(t))
	if _, err := kadm.NewClient(cl).CreateTopics(t.Context(), 1, 1, nil, schemas.TopicDLQ, schemas.TopicDeliveries, schemas.TopicDLQReplayed,
		schemas.TopicSuppressions, schemas.TopicDeletionsStatus); err != nil {
		t.Fatal(err)
	}
	topics := platform.DefaultReplayTopics
	n := 0 // dead letters written
	dead := func(dest, id string) {
		t.Helper()
		n++
		r := &kgo.Record{Topic: schemas.TopicDLQ, Key: []byte(dest + ":u-" + id), Value: []byte(`{"messageId":"` + id + `","n":` + strconv.Itoa(n) + `}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte(dest)}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderReason, Value: []byte("status_4xx")}}}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	replay := func(f platform.ReplayFilter) []platform.DeadLetter {
		t.Helper()
		got, err := platform.ReplayDeadLetters(t.Context(), kafka, logger, topics, f, platform.ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	byID := platform.ReplayFilter{DestinationID: "d", MessageIDs: []string{"amp-1"}, Again: true} // as the console replays listed ids
	dead("d", "amp-1")
	sent := 0
	for i := range 4 {
		got := replay(byID)
		if len(got) != 1 || got[0].MessageID != "amp-1" {
			t.Fatalf("replay %d of amp-1: %+v, want 1", i+1, got)
		}
		sent++
		dead("d", "amp-1") // the replayed copy failed again: the deliverer dead-letters it anew
	}
	if recs := readAll(t, kafka, logger, schemas.TopicDeliveries, sent); len(recs) != sent {
		t.Fatalf("re-enqueued %d, want %d", len(recs), sent)
	}
	// Each replay took the newest dead letter: the n-th body.
	for i, r := range readAll(t, kafka, logger, schemas.TopicDeliveries, sent) {
		if want := `"n":` + strconv.Itoa(i+1) + `}`; !strings.HasSuffix(string(r.Value), want) {
			t.Errorf("replay %d re-enqueued %s, want the newest dead letter (%s)", i+1, r.Value, want)
		}
	}
	// One entry per message: the newest, not replayed yet.
	list, err := platform.ListDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{Again: true})
	if err != nil || len(list) != 1 || !list[0].ReplayedAt.IsZero() || list[0].Offset != int64(n-1) {
		t.Fatalf("list: %+v (%v), want amp-1's newest dead letter alone, not replayed", list, err)
	}

	// Two dead letters of one message neither replayed (it was dead-lettered twice), one of
	// another, one of the same message id at another destination: "replay all" sends 3.
	dead("d", "twice")
	dead("d", "twice")
	dead("d", "solo")
	dead("e", "twice")
	if got := replay(platform.ReplayFilter{DestinationID: "d"}); len(got) != 3 {
		t.Fatalf("replay of d: %+v, want amp-1, twice and solo once each", got)
	}
	if got := replay(platform.ReplayFilter{}); len(got) != 1 || got[0].DestinationID != "e" {
		t.Fatalf("replay of the rest: %+v, want e's twice", got)
	}
	if got := replay(platform.ReplayFilter{}); len(got) != 0 {
		t.Fatalf("a replay of everything once more: %+v, want nothing", got)
	}
	list, err = platform.ListDeadLetters(t.Context(), kafka, logger, topics, platform.ReplayFilter{Again: true})
	if err != nil || len(list) != 4 {
		t.Fatalf("list -all: %+v (%v), want 4 messages", list, err)
	}
	for _, d := range list {
		if d.ReplayedAt.IsZero() {
			t.Errorf("%s/%s not replayed: %+v", d.DestinationID, d.MessageID, d)
		}
	}
}
