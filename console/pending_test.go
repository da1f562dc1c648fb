package console_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestPendingRetries (docs/console.md#pending-retries): the messages waiting in a retry tier are
// listed soonest first with their next attempt and last error, on the API and the destination
// page; retry now copies only the messages named (API and UI) to webhooks.deliveries with the
// header retry-now naming their tier record; a message leaves the list when the deliverer's
// group committed past its tier record, or when its retry-now delivered it.
func TestPendingRetries(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	tier := schemas.RetryTopic(time.Second)
	now := time.Now()
	waiting := func(id string, dueIn time.Duration) *kgo.Record {
		return &kgo.Record{Topic: tier, Key: []byte("file-hooks:u1"), Value: []byte(`{"version":1,"type":"track","messageId":"` + id + `","userId":"u1"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderType, Value: []byte("track")}, {Key: schemas.HeaderAttempt, Value: []byte("3")},
				{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now.Add(-time.Minute)))},
				{Key: schemas.HeaderDueAt, Value: []byte(schemas.FormatTimestamp(now.Add(dueIn)))},
				{Key: schemas.HeaderLastError, Value: []byte("status_5xx: HTTP 503 from 127.0.0.1:9 (" + id + ")")},
				{Key: schemas.HeaderLastStatus, Value: []byte("503")}}}
	}
	// One user: one partition, offsets in this order.
	recs := []*kgo.Record{waiting("m1", 10*time.Minute), waiting("m2", 20*time.Minute), waiting("m3", 5*time.Minute)}
	if err := h.env.Client.ProduceSync(h.env.Ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	type item struct {
		MessageID     string `json:"messageId"`
		Type          string `json:"type"`
		Attempt       int    `json:"attempt"`
		Tier          string `json:"tier"`
		NextAttemptAt string `json:"nextAttemptAt"`
		LastError     string `json:"lastError"`
		LastStatus    int    `json:"lastStatus"`
		RetryNow      string `json:"retryNow"`
	}
	list := func() []item {
		t.Helper()
		r := h.do(http.MethodGet, "/v1/destinations/file-hooks/pending", nil)
		expect(t, r, http.StatusOK)
		var p struct {
			Data  []item `json:"data"`
			Total int    `json:"total"`
		}
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Total != len(p.Data) {
			t.Fatalf("total %d for %d waiting messages", p.Total, len(p.Data))
		}
		return p.Data
	}
	ids := func(items []item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.MessageID)
		}
		return out
	}
	var got []item
	servicetest.Eventually(t, 10*time.Second, "three waiting messages", func() bool { got = list(); return len(got) == 3 })
	if want := []string{"m3", "m1", "m2"}; !slices.Equal(ids(got), want) {
		t.Errorf("listed %v, want %v (soonest next attempt first)", ids(got), want)
	}
	m3 := got[0]
	if m3.NextAttemptAt != schemas.FormatTimestamp(now.Add(5*time.Minute)) || m3.LastError != "status_5xx: HTTP 503 from 127.0.0.1:9 (m3)" ||
		m3.LastStatus != 503 || m3.Attempt != 3 || m3.Tier != tier || m3.Type != "track" {
		t.Errorf("m3: %+v", m3)
	}
	b.get("/destinations/file-hooks").contains(t, http.StatusOK, `Pending <span class="badge warn">3</span>`)
	b.get("/destinations/file-hooks?tab=pending").contains(t, http.StatusOK, "Pending retries", "<code>m3</code>", "HTTP 503 from 127.0.0.1:9 (m1)", "attempt 3 in 5 min", "Retry all now")

	// Retry now: only the messages named; an id that is not waiting is said so.
	deliveries := h.env.Reader(schemas.TopicDeliveries)
	r := h.do(http.MethodPost, "/v1/destinations/file-hooks/retry", `{"messageIds":["m2","nope"]}`)
	expect(t, r, http.StatusAccepted)
	if d := r.Data(t); d["sent"] != float64(1) || !slices.Equal(anyStrings(d["messageIds"]), []string{"m2"}) || !slices.Equal(anyStrings(d["notPending"]), []string{"nope"}) {
		t.Errorf("retry now answered %s", r.Body)
	}
	copies := deliveries.WaitFor(1, 5*time.Second)
	wantCopy := func(c *kgo.Record, of *kgo.Record) {
		t.Helper()
		key := schemas.RetryNowKey(of.Topic, of.Partition, of.Offset)
		if servicetest.Header(c, schemas.HeaderRetryNow) != key || !bytes.Equal(c.Value, of.Value) || !bytes.Equal(c.Key, of.Key) ||
			servicetest.Header(c, schemas.HeaderDueAt) != servicetest.Header(of, schemas.HeaderDueAt) ||
			servicetest.Header(c, schemas.HeaderAttempt) != "3" {
			t.Errorf("retry-now copy %s %s %v, want a copy of %s with retry-now %s", c.Key, c.Value, c.Headers, of.Value, key)
		}
	}
	wantCopy(copies[0], recs[1])
	// The UI: "Retry now" on one row, then back to the page (post/redirect/get).
	p := b.post("/destinations/file-hooks/retry", url.Values{"one": {"m1"}})
	p.contains(t, http.StatusOK, "Sent 1 message now", "retrying now")
	copies = deliveries.WaitFor(2, 5*time.Second)
	wantCopy(copies[1], recs[0])
	// Retried now already (no deliverer marked them yet): not sent twice.
	r = h.do(http.MethodPost, "/v1/destinations/file-hooks/retry", `{"messageIds":["m1","m2"]}`)
	expect(t, r, http.StatusAccepted)
	if d := r.Data(t); d["sent"] != float64(0) {
		t.Errorf("a second retry now of m1 and m2 answered %s, want nothing sent", r.Body)
	}
	b.post("/destinations/file-hooks/retry", url.Values{}).contains(t, http.StatusBadRequest, "Select the messages to retry first")
	if n := deliveries.Poll(); n != 0 {
		t.Errorf("%d more copies, want none", n)
	}

	// The deliverer marked m2's retry-now delivered: m2 leaves the list.
	h.env.Produce(&kgo.Record{Topic: schemas.TopicRetriedNow, Key: []byte(schemas.RetryNowKey(recs[1].Topic, recs[1].Partition, recs[1].Offset)),
		Value: schemas.RetryNowMark{State: schemas.RetryNowDelivered, DestinationID: "file-hooks", MessageID: "m2", At: schemas.FormatTimestamp(time.Now())}.Record()})
	servicetest.Eventually(t, 10*time.Second, "m2 gone once its retry-now delivered it", func() bool { return !slices.Contains(ids(list()), "m2") })
	// The deliverer's group committed past m1's tier record: m1 leaves the list.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: tier, Partition: recs[0].Partition, At: recs[0].Offset + 1, LeaderEpoch: -1})
	if _, err := kadm.NewClient(h.env.Client).CommitOffsets(h.env.Ctx, "tributary-deliverer", offs); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 10*time.Second, "m1 gone once the deliverer consumed it", func() bool { return slices.Equal(ids(list()), []string{"m3"}) })
	b.get("/destinations/file-hooks").contains(t, http.StatusOK, `Pending <span class="badge warn">1</span>`)
	// The UI's "Retry selected now" (the checked rows), then "Retry all now": m3 is retried now
	// already, so nothing more is sent.
	b.post("/destinations/file-hooks/retry", url.Values{"retry": {"selected"}, "pendingIds": {"m3"}}).contains(t, http.StatusOK, "Sent 1 message now")
	copies = deliveries.WaitFor(3, 5*time.Second)
	wantCopy(copies[2], recs[2])
	b.post("/destinations/file-hooks/retry", url.Values{"retry": {"all"}}).contains(t, http.StatusOK, "Nothing sent now")
	if n := deliveries.Poll(); n != 0 {
		t.Errorf("%d more copies after retry all, want none", n)
	}

	// Bad input: a clear 4xx.
	expect(t, h.do(http.MethodPost, "/v1/destinations/file-hooks/retry", `{"messageIds":[""]}`), http.StatusBadRequest)
	expect(t, h.do(http.MethodPost, "/v1/destinations/file-hooks/retry", `{"ids":["m3"]}`), http.StatusBadRequest)
	expect(t, h.do(http.MethodPost, "/v1/destinations/nope/retry", nil), http.StatusNotFound)
	expect(t, h.do(http.MethodGet, "/v1/destinations/file-hooks/pending?cursor=-"+strconv.Itoa(1), nil), http.StatusBadRequest)
}

// anyStrings converts a JSON array of strings.
func anyStrings(v any) []string {
	var out []string
	a, _ := v.([]any)
	for _, x := range a {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestPendingForgetsDeletedUsers (docs/console.md#what-the-console-forgets): a deletion drops
// the user's waiting messages from the pending list, and leaves the others'.
func TestPendingForgetsDeletedUsers(t *testing.T) {
	h := destHarness(t)
	tier := schemas.RetryTopic(time.Second)
	first := schemas.FormatTimestamp(time.Now().Add(-time.Minute))
	due := schemas.FormatTimestamp(time.Now().Add(time.Hour))
	waiting := func(id, user string) *kgo.Record {
		return &kgo.Record{Topic: tier, Key: []byte("file-hooks:" + user), Value: []byte(`{"version":1,"type":"track","messageId":"` + id + `","userId":"` + user + `"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderAttempt, Value: []byte("2")}, {Key: schemas.HeaderFirstAttemptAt, Value: []byte(first)}, {Key: schemas.HeaderDueAt, Value: []byte(due)}}}
	}
	h.env.Produce(waiting("m-del-1", "u-del"), waiting("m-keep-1", "u-keep"), waiting("m-del-2", "u-del"))
	listed := func() string { return string(h.do(http.MethodGet, "/v1/destinations/file-hooks/pending", nil).Body) }
	servicetest.Eventually(t, 10*time.Second, "three waiting messages", func() bool {
		l := listed()
		return bytes.Contains([]byte(l), []byte("m-del-1")) && bytes.Contains([]byte(l), []byte("m-del-2")) && bytes.Contains([]byte(l), []byte("m-keep-1"))
	})
	expect(t, h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u-del"}}), http.StatusOK)
	servicetest.Eventually(t, 10*time.Second, "the deleted user's waiting messages forgotten", func() bool {
		l := listed()
		return !bytes.Contains([]byte(l), []byte("m-del-")) && bytes.Contains([]byte(l), []byte("m-keep-1"))
	})
}
