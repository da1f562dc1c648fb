package deliverer_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestSealedDeliveries: a sealed delivery is opened for its POST (the receiver gets the body in
// clear), and goes to a retry tier or the DLQ sealed as it is (headers kept, nothing of the
// user in clear); once the user's key is shredded, the waiting retry is dropped unsent with an
// attempt-log line of errorClass "deleted", never dead-lettered.
func TestSealedDeliveries(t *testing.T) {
	rc := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	h := newHarness(t, "2s", destYAML(dest("retry", []string{rc.URL + "/fail"}, ""), dest("dead", []string{rc.URL + "/bad"}, "")))
	keys := h.env.Keyring()
	reg, _ := h.run(h.config())
	recs := produceSealed(t, h, "jane", append(deliveryRecords("retry", "m1"), deliveryRecords("dead", "m2")...))
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	got := rc.waitRequests(t, 2, 10*time.Second)
	for _, r := range got {
		if !bytes.Contains(r.body, []byte(`"email":"planted@example.com"`)) {
			t.Fatalf("the receiver got %q, want the opened body", r.body)
		}
	}
	tier := h.reader(schemas.RetryTopic(2*time.Second)).waitFor(1, 10*time.Second)
	dlq := h.reader(schemas.TopicDLQ).waitFor(1, 10*time.Second)
	for _, r := range append(tier, dlq...) {
		if bytes.Contains(r.Value, []byte("planted")) || !bytes.Equal(shred.KeyOf(r), shred.KeyOf(recs[0])) {
			t.Fatalf("%s record not sealed as it was: %v %q", r.Topic, r.Headers, r.Value)
		}
	}
	// The attempt records of a sealed delivery that hold the endpoint's answer (here a 503's
	// and a 400's headers) are sealed with its key.
	for _, r := range h.reader(schemas.TopicAttempts).waitFor(2, 10*time.Second) {
		if !bytes.Equal(shred.KeyOf(r), shred.KeyOf(recs[0])) || bytes.Contains(r.Value, []byte("u-m")) {
			t.Fatalf("attempt record not sealed: %v %q", r.Headers, r.Value)
		}
		plain, err := keys.Open(r)
		if err != nil {
			t.Fatal(err)
		}
		a, err := schemas.DecodeAttemptRecord(plain)
		if err != nil || a.UserID != "u-"+a.MessageID || a.Status == 0 {
			t.Fatalf("opened attempt record %s: %v", plain, err)
		}
	}
	if n, err := keys.Shred(ctx, "jane"); err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v", n, err)
	}
	attempts := h.reader(schemas.TopicAttempts)
	var deleted []byte
	deadline := time.Now().Add(15 * time.Second)
	for deleted == nil && time.Now().Before(deadline) {
		attempts.Poll()
		for _, r := range attempts.Got {
			if bytes.Contains(r.Value, []byte(`"errorClass":"deleted"`)) {
				deleted = r.Value
			}
		}
	}
	if deleted == nil || !bytes.Contains(deleted, []byte(`"messageId":"m1"`)) {
		t.Fatalf("no attempt-log line for the dropped retry: %q", deleted)
	}
	if n := len(rc.requests()); n != 2 {
		t.Fatalf("%d requests, want 2: the deleted user's retry was sent", n)
	}
	if n := counter(t, reg, "tributary_deliverer_dropped_total", "destination", "retry", "reason", "deleted"); n != 1 {
		t.Fatalf("deleted counter %v, want 1", n)
	}
	if n := len(h.reader(schemas.TopicDLQ).waitFor(1, 2*time.Second)); n != 1 {
		t.Fatalf("%d dead letters, want 1: the dropped retry was dead-lettered", n)
	}
}

// TestDeletedWhileWaiting: a delivery read while its user's key was live, which then waits for
// its destination's rate limit while the key is shredded, is not sent: the key is looked up
// right before the POST, and the delivery dropped as deleted.
func TestDeletedWhileWaiting(t *testing.T) {
	rc := newReceiver(t, func(int, *http.Request, http.ResponseWriter) {})
	h := newHarness(t, "2s", destYAML(dest("slow", []string{rc.URL}, ", maxRequestsPerSecond: 0.5")))
	keys := h.env.Keyring()
	reg, _ := h.run(h.config())
	recs := deliveryRecords("slow", "m1", "m2")
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	if err := keys.SealRecords(ctx, recs, func(*kgo.Record) []byte { return []byte("jane") }); err != nil {
		t.Fatal(err)
	}
	h.env.Produce(recs...)
	// One of the two is sent at once; the other waits about 2 s for the rate limit. Which one
	// goes first is not fixed: a destination without ordering sends a partition's deliveries
	// side by side, and they race for the limiter's token.
	first := rc.waitRequests(t, 1, 10*time.Second)[0]
	if n, err := keys.Shred(ctx, "jane"); err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v", n, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, reg, "tributary_deliverer_dropped_total", "destination", "slow", "reason", "deleted") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiting delivery of the deleted user was not dropped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := rc.requests(); len(got) != 1 || !bytes.Equal(got[0].body, first.body) {
		t.Fatalf("%d requests, want only the first one's", len(got))
	}
	if !bytes.Contains(first.body, []byte(`"messageId":"m1"`)) && !bytes.Contains(first.body, []byte(`"messageId":"m2"`)) {
		t.Fatalf("the first request was not opened: %q", first.body)
	}
}

// TestSealedDeliveryEmptyAnswer: the attempt record of a sealed delivery whose endpoint answered
// an empty 2xx holds no answer, and nothing of the body: it is plain (its ids, type and event
// name are what the record keys and headers carry in clear) and names the user's key in the
// tributary-user-key header, for readers to drop once the user is deleted.
func TestSealedDeliveryEmptyAnswer(t *testing.T) {
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) })
	h := newHarness(t, "2s", destYAML(dest("ok", []string{rc.URL + "/in"}, "")))
	h.run(h.config())
	recs := produceSealed(t, h, "jane", deliveryRecords("ok", "m1"))
	rc.waitRequests(t, 1, 10*time.Second)
	got := h.reader(schemas.TopicAttempts).waitFor(1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("%d attempt records, want 1", len(got))
	}
	r := got[0]
	if shred.KeyOf(r) != nil || bytes.Contains(r.Value, []byte("planted")) {
		t.Fatalf("the record of an empty 2xx: %v %q, want plain and without the body", r.Headers, r.Value)
	}
	var userKey []byte
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderUserKey {
			userKey = h.Value
		}
	}
	if !bytes.Equal(userKey, shred.KeyOf(recs[0])) {
		t.Fatalf("header %s = %q, want the delivery's key %q", schemas.HeaderUserKey, userKey, shred.KeyOf(recs[0]))
	}
	a, err := schemas.DecodeAttemptRecord(r.Value)
	if err != nil || a.UserID != "u-m1" || a.Status != http.StatusNoContent || a.ResponseBody != "" || a.ResponseHeaders != nil {
		t.Fatalf("attempt record %s: %v", r.Value, err)
	}
}

// produceSealed plants an email in the delivery records, seals them with user's key and
// produces them; it returns them sealed.
func produceSealed(t *testing.T, h *harness, user string, recs []*kgo.Record) []*kgo.Record {
	t.Helper()
	for _, r := range recs {
		r.Value = bytes.ReplaceAll(r.Value, []byte(`"total":`), []byte(`"email":"planted@example.com","total":`))
	}
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	if err := h.env.Keyring().SealRecords(ctx, recs, func(*kgo.Record) []byte { return []byte(user) }); err != nil {
		t.Fatal(err)
	}
	h.env.Produce(recs...)
	return recs
}
