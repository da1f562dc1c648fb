package console_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// attemptRecord is a webhooks.attempts record of destination dest.
func healthAttemptRecord(dest, msg, url string, n, status int, class string, at time.Time) *kgo.Record {
	return &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(dest), Value: attemptJSON(dest, msg, url, n, status, 12, class, at)}
}

// filteredRecord is the router's record of a message it dropped for dest.
func filteredRecord(dest, msg string, reason schemas.FilterReason, at time.Time) *kgo.Record {
	return &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(dest),
		Value: schemas.AppendFilteredRecord(nil, dest, msg, reason, []byte(schemas.FormatTimestamp(at)))}
}

// deadLetterRecord is a webhooks.dlq record of msg for dest.
func dlqRecord(dest, msg, reason string) *kgo.Record {
	return &kgo.Record{Topic: schemas.TopicDLQ, Key: []byte(dest + ":u1"), Value: []byte(`{"type":"track","event":"Order Completed","userId":"u1"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte(dest)}, {Key: schemas.HeaderMessageID, Value: []byte(msg)},
			{Key: schemas.HeaderReason, Value: []byte(reason)}, {Key: schemas.HeaderLastStatus, Value: []byte("500")},
			{Key: schemas.HeaderAttempt, Value: []byte("2")}}}
}

// TestHealthTwoURLsOneRefusing: a destination with two URLs, the first answering 200 and the
// second refusing connections. Every message is delivered (a message is done when one URL
// answers 2xx): the stats keep counting attempts (half of them failed) but say 20 messages
// delivered, a delivery rate of 1, nothing retrying, and URL 2's failures by class with its last
// error; the overview does not call the destination failing but shows URL 2's problem as a
// link to the destination's URLs, and so does the destination's page.
func TestHealthTwoURLsOneRefusing(t *testing.T) {
	h := newHarness(t, nil)
	one, two := "http://127.0.0.1:9/one", "http://127.0.0.1:9/two"
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "flaky", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": one}, {"url": two}}}}), http.StatusCreated)
	now := time.Now().UTC()
	var recs []*kgo.Record
	for i := range 20 {
		msg := fmt.Sprintf("m-%d", i)
		recs = append(recs, healthAttemptRecord("flaky", msg, two, 1, 0, "connection", now), healthAttemptRecord("flaky", msg, one, 1, 200, "ok", now))
	}
	h.env.Produce(recs...)
	var data map[string]any
	servicetest.Eventually(t, 10*time.Second, "every attempt in the stats", func() bool {
		r := h.do(http.MethodGet, "/v1/destinations/flaky/stats", nil)
		expect(t, r, http.StatusOK)
		data = r.Data(t)
		return data["attempts"] == float64(40)
	})
	messages := data["messages"].(map[string]any)
	if data["successes"] != float64(20) || messages["delivered"] != float64(20) || messages["retrying"] != float64(0) ||
		messages["deadLettered"] != float64(0) || data["deliveryRate"] != float64(1) {
		t.Fatalf("stats: successes %v, messages %v, delivery rate %v: want 20 of 40 attempts, 20 messages delivered, rate 1", data["successes"], messages, data["deliveryRate"])
	}
	urls := data["urls"].([]any)
	if len(urls) != 2 {
		t.Fatalf("urls %v", urls)
	}
	u1, u2 := urls[0].(map[string]any), urls[1].(map[string]any)
	if u1["url"] != one || u1["successes"] != float64(20) || len(u1["failures"].(map[string]any)) != 0 {
		t.Errorf("URL 1: %v", u1)
	}
	if u2["url"] != two || u2["attempts"] != float64(20) || u2["successes"] != float64(0) || u2["failures"].(map[string]any)["connection"] != float64(20) ||
		u2["lastError"] != "HTTP 500" || u2["lastErrorAt"] == nil {
		t.Errorf("URL 2: %v", u2)
	}

	b := h.signIn(t)
	p := b.get("/")
	p.contains(t, http.StatusOK, `<a href="/destinations/flaky#urls">URL 2 of flaky refuses connections: 20 of its 20 attempts failed in the last hour; its messages were delivered by another URL.</a>`)
	if strings.Contains(p.Body, "flaky is failing") {
		t.Errorf("the overview calls flaky failing")
	}
	b.get("/destinations/flaky").contains(t, http.StatusOK, "URL 2 of flaky refuses connections", `id="urls"`, "Where its messages went")
}

// TestFunnelCounts: the funnel of GET /v1/destinations/{id}/overview against a scripted mix —
// filtered by the integrations switches (2) and the suppression list (1), delivered on the
// first attempt (2), after a retry (1), retrying (1), dead-lettered after retries and at once
// (2) — each message counted once, with its reason and sample ids; the destination page draws
// it; a bad window is a 400, an unknown destination a 404.
func TestFunnelCounts(t *testing.T) {
	h := newHarness(t, nil)
	now := time.Now().UTC()
	at := func(s int) time.Time { return now.Add(time.Duration(s-60) * time.Second) }
	u := "http://127.0.0.1:9/file"
	h.env.Produce(
		filteredRecord("file-hooks", "off-1", schemas.FilterIntegrationsOff, at(1)),
		filteredRecord("file-hooks", "off-2", schemas.FilterIntegrationsOff, at(2)),
		filteredRecord("file-hooks", "sup-1", schemas.FilterSuppressed, at(3)),
		healthAttemptRecord("file-hooks", "ok-1", u, 1, 200, "ok", at(4)),
		healthAttemptRecord("file-hooks", "ok-2", u, 1, 204, "ok", at(5)),
		healthAttemptRecord("file-hooks", "re-1", u, 1, 503, "status_5xx", at(6)),
		healthAttemptRecord("file-hooks", "re-1", u, 2, 200, "ok", at(20)),
		healthAttemptRecord("file-hooks", "wait-1", u, 1, 0, "timeout", at(7)),
		healthAttemptRecord("file-hooks", "dead-1", u, 1, 503, "status_5xx", at(8)),
		healthAttemptRecord("file-hooks", "dead-1", u, 2, 503, "status_5xx", at(21)),
		healthAttemptRecord("file-hooks", "dead-2", u, 1, 410, "status_4xx", at(9)),
	)
	h.env.Produce(dlqRecord("file-hooks", "dead-1", "retries_exhausted"), dlqRecord("file-hooks", "dead-2", "status_4xx"))
	var f map[string]any
	servicetest.Eventually(t, 10*time.Second, "the funnel", func() bool {
		r := h.do(http.MethodGet, "/v1/destinations/file-hooks/overview?window=1h", nil)
		expect(t, r, http.StatusOK)
		f = r.Data(t)
		return f["received"] == float64(9) && f["deadLettered"].(map[string]any)["count"] == float64(2)
	})
	count := func(stage string) any { return f[stage].(map[string]any)["count"] }
	got := fmt.Sprintf("%v %v %v %v %v %v", f["window"], count("dropped"), count("deliveredFirstAttempt"), count("deliveredAfterRetries"), count("retrying"), count("deadLettered"))
	if want := "1h 3 2 1 1 2"; got != want {
		t.Fatalf("window and stage counts %s, want %s: %v", got, want, f)
	}
	reasons := func(stage string) string {
		var out []string
		for _, r := range f[stage].(map[string]any)["reasons"].([]any) {
			r := r.(map[string]any)
			var ids []string
			for _, id := range r["sampleMessageIds"].([]any) {
				ids = append(ids, id.(string))
			}
			slices.Sort(ids)
			out = append(out, fmt.Sprintf("%s=%v%v", r["reason"], r["count"], ids))
		}
		return strings.Join(out, " ")
	}
	for stage, want := range map[string]string{
		"dropped":      "integrations_off=2[off-1 off-2] suppressed=1[sup-1]",
		"retrying":     "timeout=1[wait-1]",
		"deadLettered": "retries_exhausted=1[dead-1] status_4xx=1[dead-2]",
	} {
		if got := reasons(stage); got != want {
			t.Errorf("%s: %s, want %s", stage, got, want)
		}
	}
	st := h.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=24h", nil).Data(t)
	if m := st["messages"].(map[string]any); fmt.Sprint(m["delivered"], m["retrying"], m["deadLettered"], m["filtered"]) != "3 1 2 3" || st["deliveryRate"] != 0.6 {
		t.Errorf("stats messages %v, delivery rate %v: want 3 delivered, 1 retrying, 2 dead-lettered, 3 filtered, rate 0.6", m, st["deliveryRate"])
	}
	// The filtered records are no attempts: not in the delivery log nor its counters.
	if st["attempts"] != float64(8) {
		t.Errorf("attempts %v, want 8 (the filtered records are none)", st["attempts"])
	}
	for _, a := range h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts", nil).JSON(t)["data"].([]any) {
		if a.(map[string]any)["errorClass"] == "filtered" {
			t.Errorf("a filtered record in the delivery log: %v", a)
		}
	}
	expectError(t, h.do(http.MethodGet, "/v1/destinations/file-hooks/overview?window=7d", nil), http.StatusBadRequest, "invalid", `window: must be 1h or 24h, got "7d"`, "window")
	expect(t, h.do(http.MethodGet, "/v1/destinations/nope/overview", nil), http.StatusNotFound)

	b := h.signIn(t)
	b.get("/destinations/file-hooks").contains(t, http.StatusOK, "Where its messages went", `<svg class="chart" viewBox="0 0 520 156"`,
		"Dropped before it", "<strong>integrations_off</strong>: 2", "<code>off-1</code>", "<strong>retries_exhausted</strong>: 1",
		// 3 delivered of 5 finished: failing, and why.
		"This destination is failing: 60.0 % of its messages were delivered in the last hour (3 delivered, 2 dead-lettered).")
}

// filterDropRecord is the router's record of a message the destination filter named filter
// dropped for dest.
func filterDropRecord(dest, msg, filter string, at time.Time) *kgo.Record {
	return &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(dest),
		Value: schemas.AppendFilterDropRecord(nil, dest, msg, filter, []byte(schemas.FormatTimestamp(at)))}
}

// TestFunnelPerFilter: the funnel's dropped stage counts the messages each destination filter
// dropped apart — reason destination_filter with the filter's name, and its samples — while a
// record of an older router, which names no filter, still counts under destination_filter
// alone; the stats count them all as filtered, and the destination page shows
// "destination_filter: <name>".
func TestFunnelPerFilter(t *testing.T) {
	h := newHarness(t, nil)
	now := time.Now().UTC()
	at := func(s int) time.Time { return now.Add(time.Duration(s-60) * time.Second) }
	h.env.Produce(
		filterDropRecord("file-hooks", "small-1", "small orders", at(1)),
		filterDropRecord("file-hooks", "small-2", "small orders", at(2)),
		filterDropRecord("file-hooks", "page-1", "no pages", at(3)),
		filteredRecord("file-hooks", "old-1", schemas.FilterDestinationFilter, at(4)),
		filteredRecord("file-hooks", "off-1", schemas.FilterIntegrationsOff, at(5)),
	)
	var f map[string]any
	servicetest.Eventually(t, 10*time.Second, "the funnel", func() bool {
		r := h.do(http.MethodGet, "/v1/destinations/file-hooks/overview?window=1h", nil)
		expect(t, r, http.StatusOK)
		f = r.Data(t)
		return f["received"] == float64(5)
	})
	var got []string
	for _, r := range f["dropped"].(map[string]any)["reasons"].([]any) {
		r := r.(map[string]any)
		var ids []string
		for _, id := range r["sampleMessageIds"].([]any) {
			ids = append(ids, id.(string))
		}
		slices.Sort(ids)
		got = append(got, fmt.Sprintf("%s/%v=%v%v", r["reason"], r["filter"], r["count"], ids))
	}
	want := "destination_filter/small orders=2[small-1 small-2] destination_filter/<nil>=1[old-1] destination_filter/no pages=1[page-1] integrations_off/<nil>=1[off-1]"
	if strings.Join(got, " ") != want {
		t.Fatalf("dropped reasons:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if f["dropped"].(map[string]any)["count"] != float64(5) {
		t.Errorf("dropped %v, want 5", f["dropped"])
	}
	st := h.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=1h", nil).Data(t)
	if m := st["messages"].(map[string]any); m["filtered"] != float64(5) {
		t.Errorf("stats messages %v: want 5 filtered", m)
	}
	h.signIn(t).get("/destinations/file-hooks").contains(t, http.StatusOK, "<strong>destination_filter: small orders</strong>: 2",
		"<strong>destination_filter: no pages</strong>: 1", "<strong>destination_filter</strong>: 1", "<code>small-2</code>")
}
