package deliverer_test

import (
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Dead letters are re-enqueued (platform.ReplayDeadLetters, which `deliverer replay` and the
// console call), filtered by destination, with a fresh window, and delivered. The library
// alone is tested in platform/deadletters_test.go.
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
	onlyA := platform.ReplayFilter{DestinationID: "a", Since: before.Add(-time.Minute)}
	dry, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, onlyA, platform.ReplayOptions{DryRun: true})
	if err != nil || len(dry) != 3 || dry[0].DestinationID != "a" || dry[0].Reason == "" || dry[0].MessageID == "" {
		t.Fatalf("dry run: %+v (%v), want a's 3 dead letters", dry, err)
	}
	time.Sleep(500 * time.Millisecond)
	if len(a.requests()) != 3 {
		t.Fatalf("a dry run re-enqueued: %d requests", len(a.requests()))
	}
	replayed, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, onlyA, platform.ReplayOptions{})
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
	if got, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics,
		platform.ReplayFilter{Until: before.Add(-time.Hour)}, platform.ReplayOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("a time filter before every dead letter replayed %d (%v)", len(got), err)
	}
	// Idempotent: the same replay again sends nothing; b's dead letter is still there to replay;
	// Again replays a's once more.
	if got, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, onlyA, platform.ReplayOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("the same replay again replayed %d (%v), want 0", len(got), err)
	}
	list, err := platform.ListDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, platform.ReplayFilter{Again: true})
	if err != nil || len(list) != 4 {
		t.Fatalf("list: %d (%v), want 4", len(list), err)
	}
	for _, d := range list {
		if (d.DestinationID == "a") == d.ReplayedAt.IsZero() {
			t.Errorf("listed %+v: only a's are replayed", d)
		}
	}
	if got, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, platform.ReplayFilter{}, platform.ReplayOptions{}); err != nil || len(got) != 1 || got[0].DestinationID != "b" {
		t.Fatalf("replay of the rest: %+v (%v), want b's only", got, err)
	}
	again := onlyA
	again.Again = true
	if got, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, again, platform.ReplayOptions{}); err != nil || len(got) != 3 {
		t.Fatalf("replay again: %d (%v), want 3", len(got), err)
	}
	a.waitRequests(t, 9, 10*time.Second)
}

// A replay to another URL (platform.ReplayOptions.URL: header url) reaches that URL alone,
// signed with the destination's secret and with its first webhook's static headers; the
// destination's own URLs get nothing; a retry keeps the header.
func TestReplayToAnotherURL(t *testing.T) {
	old := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	var calls atomic.Int32
	fixed := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first attempt fails: retried via a tier
		}
	})
	h := newHarness(t, "1s,1s", destYAML(dest("a", []string{old.URL + "/first", old.URL + "/second"}, ", sharedSecret: s3cret")))
	deliveries := h.reader(schemas.TopicDeliveries)
	h.run(h.config())
	h.send("a", "a1", "a2")
	dlq := h.reader(schemas.TopicDLQ)
	dlq.waitFor(2, 10*time.Second)
	deliveries.waitFor(2, 10*time.Second)
	before := len(old.requests())

	got, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics,
		platform.ReplayFilter{MessageIDs: []string{"a2"}}, platform.ReplayOptions{URL: fixed.URL + "/new"})
	if err != nil || len(got) != 1 || got[0].MessageID != "a2" || got[0].Attempts != 1 || got[0].FirstAttemptAt.IsZero() {
		t.Fatalf("replay of a2 to the new URL: %+v (%v)", got, err)
	}
	reqs := fixed.waitRequests(t, 2, 10*time.Second) // a 503, then the retry from the tier
	time.Sleep(time.Second)
	if n := len(old.requests()); n != before {
		t.Errorf("the destination's own URLs got %d more requests, want none", n-before)
	}
	if n := len(fixed.requests()); n != 2 {
		t.Fatalf("the new URL got %d requests, want 2 (one retry)", n)
	}
	for _, r := range reqs {
		if r.path != "/new" || r.header.Get("X-Message-Id") != "a2" || r.header.Get("X-Team") != "growth" ||
			r.header.Get("X-Signature") != schemas.XSignature("s3cret", r.body) {
			t.Errorf("request to the new URL: path %s, headers %v", r.path, r.header)
		}
	}
	for _, r := range deliveries.waitFor(3, 5*time.Second)[2:] {
		if hdr(r, "url") != fixed.URL+"/new" || hdr(r, "message-id") != "a2" {
			t.Errorf("replayed record headers %v", r.Headers)
		}
	}
	// A url header that is not a webhook URL is dead-lettered as invalid_url.
	bad := deliveryRecords("a", "a3")
	bad[0].Headers = append(bad[0].Headers, kgo.RecordHeader{Key: schemas.HeaderURL, Value: []byte("ftp://x")})
	h.env.Produce(bad...)
	for _, r := range dlq.waitFor(3, 10*time.Second)[2:] {
		if hdr(r, "reason") != "invalid_url" || hdr(r, "message-id") != "a3" {
			t.Errorf("dead letter of a bad url header: %v", r.Headers)
		}
	}
}

// Replaying one message by id to a failing URL again and again, then to a good one, sends it
// once each time and delivers exactly one copy: each failed replay dead-letters the message
// anew, and the next replay takes that newest dead letter alone
// (docs/delivery.md#dead-letters-and-replay). Before, every replay took every dead letter of
// the id, and the copies doubled (1, 2, 4, then 8 delivered).
func TestReplayByMessageIDOnce(t *testing.T) {
	failing := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	good := newReceiver(t, nil)
	h := newHarness(t, "1s", destYAML(dest("a", []string{failing.URL}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	h.run(h.config())
	h.send("a", "amp-1")
	dlq.waitFor(1, 10*time.Second)

	byID := platform.ReplayFilter{DestinationID: "a", MessageIDs: []string{"amp-1"}, Again: true} // as the console replays listed ids
	var counts []int
	for i := range 3 {
		got, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, byID, platform.ReplayOptions{URL: failing.URL + "/again"})
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, len(got))
		dlq.waitFor(2+i, 10*time.Second) // refused (410) at once: dead-lettered anew
	}
	got, err := platform.ReplayDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, byID, platform.ReplayOptions{URL: good.URL + "/fixed"})
	if err != nil {
		t.Fatal(err)
	}
	counts = append(counts, len(got))
	if !slices.Equal(counts, []int{1, 1, 1, 1}) {
		t.Errorf("replayed %v, want 1 each time", counts)
	}
	good.waitRequests(t, 1, 10*time.Second)
	time.Sleep(time.Second)
	if n := len(good.requests()); n != 1 {
		t.Errorf("the good URL received %d copies, want 1", n)
	}
	if n := len(failing.requests()); n != 4 {
		t.Errorf("the failing URL received %d requests, want 4 (the first delivery and 3 replays)", n)
	}
	list, err := platform.ListDeadLetters(h.ctx, h.kafka, h.logger, platform.DefaultReplayTopics, platform.ReplayFilter{Again: true})
	if err != nil || len(list) != 1 || list[0].MessageID != "amp-1" || list[0].ReplayedAt.IsZero() {
		t.Errorf("list: %+v (%v), want amp-1 once, replayed", list, err)
	}
}
