package deliverer_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// docs/delivery.md#deleted-and-suppressed-users. These tests run in virtual time (testing/synctest,
// kfake's virtual network); the regulations are written as the router writes them: the
// suppression-list record first, then the delete notices (one per destination) and the
// tracking.deletions.status record.

// userDeliveries are webhooks.deliveries records of user's messages ids, as the router writes
// them, accepted (receivedAt) and routed (first-attempt-at) at accepted.
func userDeliveries(destID, user string, accepted time.Time, ids ...string) []*kgo.Record {
	var recs []*kgo.Record
	at := schemas.FormatTimestamp(accepted)
	for _, id := range ids {
		recs = append(recs, &kgo.Record{Topic: schemas.TopicDeliveries, Key: []byte(destID + ":" + user),
			Value: []byte(`{"type":"track","messageId":"` + id + `","userId":"` + user + `","event":"Order Completed",` +
				`"properties":{"email":"someone@example.com"},"receivedAt":"` + at + `"}`),
			Headers: []kgo.RecordHeader{
				{Key: schemas.HeaderDestinationID, Value: []byte(destID)},
				{Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderAttempt, Value: []byte("1")},
				{Key: schemas.HeaderFirstAttemptAt, Value: []byte(at)},
				{Key: schemas.HeaderType, Value: []byte("track")},
				{Key: schemas.HeaderSourceID, Value: []byte("web")},
			}})
	}
	return recs
}

// regulate writes what the router writes for a request of kind about user, processed now:
// the suppression-list change, a delete notice to each of destIDs, the status record.
func (h *harness) regulate(kind, user, requestID string, destIDs ...string) {
	h.t.Helper()
	now := time.Now()
	req := schemas.DeletionRequest{UserID: user, Kind: kind, RequestID: requestID}
	switch {
	case req.Suppresses():
		h.env.Produce(&kgo.Record{Topic: schemas.TopicSuppressions, Key: []byte(user),
			Value: schemas.Suppression{UserID: user, RequestID: requestID, SuppressedAt: schemas.FormatTimestamp(now)}.Record()})
	case kind == schemas.KindUnsuppress:
		h.env.Produce(&kgo.Record{Topic: schemas.TopicSuppressions, Key: []byte(user)})
	}
	var recs []*kgo.Record
	if req.Deletes() {
		for _, d := range destIDs {
			recs = append(recs, &kgo.Record{Topic: schemas.TopicDeliveries, Key: []byte(d + ":" + user),
				Value: schemas.AppendDeleteBody(nil, user, now),
				Headers: []kgo.RecordHeader{
					{Key: schemas.HeaderDestinationID, Value: []byte(d)},
					{Key: schemas.HeaderMessageID, Value: []byte("delete-" + requestID + "-web")},
					{Key: schemas.HeaderAttempt, Value: []byte("1")},
					{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now))},
					{Key: schemas.HeaderType, Value: []byte(schemas.TypeDelete)},
					{Key: schemas.HeaderSourceID, Value: []byte("web")},
				}})
		}
	}
	notices := len(recs)
	recs = append(recs, &kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(requestID),
		Value: schemas.DeletionStatus{RequestID: requestID, UserID: user, Kind: kind, Notices: notices, ProcessedAt: schemas.FormatTimestamp(now)}.Record()})
	h.env.Produce(recs...)
}

// messageIDsOf are the X-Message-Id of requests, in order.
func messageIDsOf(reqs []received) []string {
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.header.Get("X-Message-Id")
	}
	return ids
}

// dropLines returns the attempt-log lines of recs with errorClass class, by messageId.
func dropLines(t *testing.T, recs []*kgo.Record, class string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, r := range recs {
		var line map[string]any
		if err := json.Unmarshal(r.Value, &line); err != nil {
			t.Fatalf("attempt record %s: %v", r.Value, err)
		}
		if line["errorClass"] == class {
			out[line["messageId"].(string)] = line
		}
	}
	return out
}

// The retry-tier finding: a user's messages waiting in a retry tier when a SUPPRESS_WITH_DELETE
// is filed are not delivered when they come due (dropped, class "deleted" in the attempt log);
// the delete notice is delivered, and so is another user's message waiting in the same tier.
func TestDeletedUsersTierRecordsAreDropped(t *testing.T) {
	synctest.Test(t, testDeletedUsersTierRecordsAreDropped)
}

func testDeletedUsersTierRecordsAreDropped(t *testing.T) {
	h := newVirtualHarness(t, "5s", destYAML(dest("d1", []string{"http://localhost:9201/hook"}, "")))
	var failing atomic.Bool
	failing.Store(true)
	rc := &receiver{h.env.VirtualReceiver(9201, func(_ int, _ *http.Request, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	attempts := h.reader(schemas.TopicAttempts)
	reg, _ := h.run(h.config())
	accepted := time.Now()
	h.env.Produce(append(userDeliveries("d1", "u-gone", accepted, "g1", "g2", "g3"), userDeliveries("d1", "u-kept", accepted, "k1")...)...)
	rc.waitRequests(t, 4, 10*time.Second) // every first attempt failed: all four wait in the tier
	failing.Store(false)
	time.Sleep(time.Second)
	h.regulate(schemas.KindSuppressWithDelete, "u-gone", "r1", "d1")
	time.Sleep(10 * time.Second) // the tier's records came due long ago

	ids := messageIDsOf(rc.requests())
	if len(ids) != 6 || !slices.Contains(ids[4:], "delete-r1-web") || !slices.Contains(ids[4:], "k1") {
		t.Fatalf("requests %v: want the four failed first attempts, then the delete notice and k1's retry only", ids)
	}
	drops := dropLines(t, attempts.waitFor(7, 10*time.Second), "deleted")
	for _, id := range []string{"g1", "g2", "g3"} {
		line := drops[id]
		if line == nil || line["destinationId"] != "d1" || line["status"] != 0.0 || line["error"] == "" {
			t.Errorf("attempt log of the dropped %s: %v; want errorClass deleted, status 0 and the reason", id, line)
		}
	}
	if got := counter(t, reg, "tributary_deliverer_dropped_total", "destination", "d1", "reason", "deleted"); got != 3 {
		t.Errorf("dropped_total{reason=deleted} %v, want 3", got)
	}
	if got := counter(t, reg, "tributary_deliverer_dlq_total"); got != 0 {
		t.Errorf("dlq_total %v: a dropped record must not be dead-lettered", got)
	}
}

// DELETE_ONLY: a message routed before the deletion and retried after it is dropped; a message
// of the same user accepted after the deletion is delivered (a deletion suppresses nothing).
func TestDeleteOnlyDropsWhatWasAcceptedBefore(t *testing.T) {
	synctest.Test(t, testDeleteOnlyDropsWhatWasAcceptedBefore)
}

func testDeleteOnlyDropsWhatWasAcceptedBefore(t *testing.T) {
	h := newVirtualHarness(t, "5s", destYAML(dest("d1", []string{"http://localhost:9202/hook"}, "")))
	rc := &receiver{h.env.VirtualReceiver(9202, func(n int, _ *http.Request, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	attempts := h.reader(schemas.TopicAttempts)
	reg, _ := h.run(h.config())
	h.env.Produce(userDeliveries("d1", "u-del", time.Now(), "before")...)
	rc.waitRequests(t, 1, 10*time.Second) // failed: waits in the 5 s tier
	time.Sleep(time.Second)
	h.regulate(schemas.KindDeleteOnly, "u-del", "r2", "d1")
	time.Sleep(time.Second)
	h.env.Produce(userDeliveries("d1", "u-del", time.Now(), "after")...)
	time.Sleep(10 * time.Second)

	ids := messageIDsOf(rc.requests())
	if !slices.Equal(ids, []string{"before", "delete-r2-web", "after"}) {
		t.Fatalf("requests %v: want before (failed), the notice, after; before's retry dropped", ids)
	}
	drops := dropLines(t, attempts.waitFor(4, 10*time.Second), "deleted")
	if drops["before"] == nil || len(drops) != 1 {
		t.Errorf("attempt-log drops %v: want before's only, class deleted", drops)
	}
	if got := counter(t, reg, "tributary_deliverer_dropped_total", "reason", "deleted"); got != 1 {
		t.Errorf("dropped_total{reason=deleted} %v, want 1", got)
	}
}

// SUPPRESS_ONLY drops the user's messages (class "suppressed"), sending no notice; UNSUPPRESS
// lifts it: the user's later messages are delivered again.
func TestUnsuppressLetsMessagesThroughAgain(t *testing.T) {
	synctest.Test(t, testUnsuppressLetsMessagesThroughAgain)
}

func testUnsuppressLetsMessagesThroughAgain(t *testing.T) {
	h := newVirtualHarness(t, "5s", destYAML(dest("d1", []string{"http://localhost:9203/hook"}, "")))
	rc := &receiver{h.env.VirtualReceiver(9203, ok200)}
	attempts := h.reader(schemas.TopicAttempts)
	reg, _ := h.run(h.config())
	h.regulate(schemas.KindSuppressOnly, "u-s", "r3")
	time.Sleep(time.Second)
	h.env.Produce(userDeliveries("d1", "u-s", time.Now(), "while-suppressed")...)
	h.env.Produce(userDeliveries("d1", "u-other", time.Now(), "other")...)
	time.Sleep(2 * time.Second)
	h.regulate(schemas.KindUnsuppress, "u-s", "r4")
	time.Sleep(time.Second)
	h.env.Produce(userDeliveries("d1", "u-s", time.Now(), "after-unsuppress")...)
	time.Sleep(2 * time.Second)

	ids := messageIDsOf(rc.requests())
	if !slices.Equal(ids, []string{"other", "after-unsuppress"}) {
		t.Fatalf("requests %v: want other and after-unsuppress only", ids)
	}
	drops := dropLines(t, attempts.waitFor(3, 10*time.Second), "suppressed")
	if drops["while-suppressed"] == nil || len(drops) != 1 {
		t.Errorf("attempt-log drops %v: want while-suppressed's, class suppressed", drops)
	}
	if got := counter(t, reg, "tributary_deliverer_dropped_total", "destination", "d1", "reason", "suppressed"); got != 1 {
		t.Errorf("dropped_total{reason=suppressed} %v, want 1", got)
	}
}

// A user's records waiting in their host's queue when the user is suppressed are dropped right
// before their POST would start, not sent.
func TestQueuedRecordsOfASuppressedUserAreDropped(t *testing.T) {
	synctest.Test(t, testQueuedRecordsOfASuppressedUserAreDropped)
}

func testQueuedRecordsOfASuppressedUserAreDropped(t *testing.T) {
	h := newVirtualHarness(t, "5s", destYAML(dest("d1", []string{"http://localhost:9204/hook"}, ", maxConcurrency: 1")))
	rc := &receiver{h.env.VirtualReceiver(9204, func(n int, _ *http.Request, w http.ResponseWriter) {
		if n == 1 {
			time.Sleep(3 * time.Second) // holds the destination's one slot
		}
		w.WriteHeader(http.StatusOK)
	})}
	attempts := h.reader(schemas.TopicAttempts)
	reg, _ := h.run(h.config())
	h.env.Produce(userDeliveries("d1", "u-other", time.Now(), "slow")...)
	rc.waitRequests(t, 1, 10*time.Second)
	h.env.Produce(userDeliveries("d1", "u-q", time.Now(), "q1", "q2")...)
	time.Sleep(500 * time.Millisecond) // q1 and q2 wait in the host's queue
	if got := counter(t, reg, "tributary_deliverer_queued_total", "destination", "d1"); got != 2 {
		t.Fatalf("queued_total %v, want 2: the test needs q1 and q2 in the host's queue", got)
	}
	h.regulate(schemas.KindSuppressOnly, "u-q", "r5")
	time.Sleep(5 * time.Second)

	if ids := messageIDsOf(rc.requests()); !slices.Equal(ids, []string{"slow"}) {
		t.Fatalf("requests %v: want slow only; q1 and q2 dropped before their POST", ids)
	}
	drops := dropLines(t, attempts.waitFor(3, 10*time.Second), "suppressed")
	if drops["q1"] == nil || drops["q2"] == nil {
		t.Errorf("attempt-log drops %v: want q1 and q2, class suppressed", drops)
	}
}

// A DLQ replay of a deleted user's message (first-attempt-at reset to the replay's time) is
// dropped: the message was accepted (receivedAt) before the deletion.
func TestReplayedRecordOfADeletedUserIsDropped(t *testing.T) {
	synctest.Test(t, testReplayedRecordOfADeletedUserIsDropped)
}

func testReplayedRecordOfADeletedUserIsDropped(t *testing.T) {
	h := newVirtualHarness(t, "5s", destYAML(dest("d1", []string{"http://localhost:9205/hook"}, "")))
	rc := &receiver{h.env.VirtualReceiver(9205, ok200)}
	attempts := h.reader(schemas.TopicAttempts)
	h.run(h.config())
	accepted := time.Now()
	time.Sleep(time.Minute)
	h.regulate(schemas.KindDeleteOnly, "u-r", "r6", "d1")
	time.Sleep(time.Second)
	replayed := userDeliveries("d1", "u-r", accepted, "old")[0]
	for i, hd := range replayed.Headers {
		if hd.Key == schemas.HeaderFirstAttemptAt {
			replayed.Headers[i].Value = []byte(schemas.FormatTimestamp(time.Now())) // as a replay writes it
		}
	}
	h.env.Produce(replayed)
	time.Sleep(2 * time.Second)
	if ids := messageIDsOf(rc.requests()); !slices.Equal(ids, []string{"delete-r6-web"}) {
		t.Fatalf("requests %v: want the delete notice only", ids)
	}
	if drops := dropLines(t, attempts.waitFor(2, 10*time.Second), "deleted"); drops["old"] == nil {
		t.Errorf("attempt-log drops %v: want old's, class deleted", drops)
	}
}

// A user's retry-tier records parked behind an open breaker are dropped at the next sweep once
// the user is suppressed, instead of waiting in memory for the breaker.
func TestParkedRecordsOfASuppressedUserAreDropped(t *testing.T) {
	synctest.Test(t, testParkedRecordsOfASuppressedUserAreDropped)
}

func testParkedRecordsOfASuppressedUserAreDropped(t *testing.T) {
	h := newVirtualHarness(t, "1s", destYAML(dest("d1", []string{"http://localhost:9206/hook"}, "")))
	h.env.VirtualReceiver(9206, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	attempts := h.reader(schemas.TopicAttempts)
	cfg := h.config()
	cfg.BreakerFailures = 2
	cfg.BreakerCooldown = time.Hour
	reg, _ := h.run(cfg)
	h.env.Produce(userDeliveries("d1", "u-p", time.Now(), "p1", "p2", "p3")...)
	time.Sleep(3 * time.Second) // failed, breaker open, due in the tier: parked
	if got := counter(t, reg, "tributary_deliverer_parked"); got != 3 {
		t.Fatalf("parked %v, want 3: the test needs them parked", got)
	}
	h.regulate(schemas.KindSuppressOnly, "u-p", "r7")
	time.Sleep(time.Second)
	if got := counter(t, reg, "tributary_deliverer_parked"); got != 0 {
		t.Errorf("parked %v after the suppression, want 0", got)
	}
	if got := counter(t, reg, "tributary_deliverer_dropped_total", "destination", "d1", "reason", "suppressed"); got != 3 {
		t.Errorf("dropped_total{reason=suppressed} %v, want 3", got)
	}
	if drops := dropLines(t, attempts.waitFor(6, 10*time.Second), "suppressed"); len(drops) != 3 {
		t.Errorf("attempt-log drops %v: want p1, p2, p3", drops)
	}
}
