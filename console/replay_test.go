package console_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// replayEvent is a tracking.events record of source, as ingest writes it, received at at.
func replayEvent(source, msg, typ, event, user string, at time.Time, extra string) *kgo.Record {
	ev := ""
	if event != "" {
		ev = `"event":"` + event + `",`
	}
	ts := schemas.FormatTimestamp(at)
	return &kgo.Record{Topic: schemas.TopicEvents, Key: []byte(user), Timestamp: at,
		Value:   []byte(`{"type":"` + typ + `","messageId":"` + msg + `","userId":"` + user + `",` + ev + `"timestamp":"` + ts + `","receivedAt":"` + ts + `","properties":{"n":1}` + extra + `}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte(source)}, {Key: schemas.HeaderMessageID, Value: []byte(msg)}, {Key: schemas.HeaderType, Value: []byte(typ)}}}
}

// replayHarness is a console with a second source (app) and a destination rd of web and app.
func replayHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, nil)
	expect(t, h.do(http.MethodPost, "/v1/sources", map[string]any{"id": "app", "name": "App"}), http.StatusCreated)
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "rd", "type": "webhooks", "sources": []string{"web", "app"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": "http://127.0.0.1:9/rd"}}}}), http.StatusCreated)
	return h
}

// dryRun answers the dry-run count of body (with dryRun set).
func dryRun(t *testing.T, h *harness, body map[string]any) int {
	t.Helper()
	b := maps.Clone(body)
	b["dryRun"] = true
	r := h.do(http.MethodPost, "/v1/replays", b)
	expect(t, r, http.StatusOK)
	return int(r.Data(t)["matched"].(float64))
}

// A dry run counts the messages of the range each filter selects, and what the router would
// deliver to the destination only: not those before from or after to, not those whose
// integrations switch webhooks off, not those of a source the destination does not take.
func TestReplayDryRunFilters(t *testing.T) {
	h := replayHarness(t)
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	recs := []*kgo.Record{replayEvent("web", "old", "track", "Order Completed", "u1", base.Add(-time.Hour), "")}
	add := func(source, typ, event, user string, n int, extra string) {
		for range n {
			recs = append(recs, replayEvent(source, fmt.Sprintf("m-%d", len(recs)), typ, event, user, base.Add(time.Duration(len(recs))*time.Millisecond), extra))
		}
	}
	add("web", "track", "Order Completed", "u1", 3, "")
	add("web", "track", "Signed Up", "u2", 2, "")
	add("web", "identify", "", "u1", 1, "")
	add("app", "track", "Order Completed", "u3", 2, "")
	add("web", "track", "Order Completed", "u1", 1, `,"integrations":{"Webhooks":false}`)
	add("other", "track", "Order Completed", "u1", 1, "") // a source rd does not take
	h.env.Produce(recs...)
	from := schemas.FormatTimestamp(base.Add(-time.Minute))
	for _, c := range []struct {
		filter map[string]any
		want   int
	}{
		{map[string]any{}, 8},
		{map[string]any{"type": "track"}, 7},
		{map[string]any{"type": "identify"}, 1},
		{map[string]any{"event": "Order Completed"}, 5},
		{map[string]any{"userId": "u1"}, 4},
		{map[string]any{"userId": "u1", "type": "identify"}, 1},
		{map[string]any{"sourceId": "app"}, 2},
		{map[string]any{"sourceId": "web", "event": "Signed Up"}, 2},
		{map[string]any{"userId": "nobody"}, 0},
	} {
		if got := dryRun(t, h, map[string]any{"destinationId": "rd", "from": from, "filter": c.filter}); got != c.want {
			t.Errorf("filter %v: matched %d, want %d", c.filter, got, c.want)
		}
	}
	// from and to bound the range.
	if got := dryRun(t, h, map[string]any{"destinationId": "rd", "from": schemas.FormatTimestamp(base.Add(-2 * time.Hour))}); got != 9 {
		t.Errorf("from two hours back: matched %d, want 9 (the old one too)", got)
	}
	if got := dryRun(t, h, map[string]any{"destinationId": "rd", "from": from, "to": schemas.FormatTimestamp(base.Add(3 * time.Millisecond))}); got != 3 {
		t.Errorf("to after the first three: matched %d, want 3", got)
	}
	// The destination of web only counts web's.
	if got := dryRun(t, h, map[string]any{"destinationId": "file-hooks", "from": from}); got != 6 {
		t.Errorf("file-hooks (web only): matched %d, want 6", got)
	}
}

// Bad requests are 400s with a message naming the field.
func TestReplayBadInput(t *testing.T) {
	h := replayHarness(t)
	from := schemas.FormatTimestamp(time.Now().Add(-time.Hour))
	for _, c := range []struct {
		body         map[string]any
		field, inMsg string
	}{
		{map[string]any{"destinationId": "rd", "from": schemas.FormatTimestamp(time.Now()), "to": from}, "from", "is after to"},
		{map[string]any{"destinationId": "nope", "from": from}, "destinationId", `no destination "nope"`},
		{map[string]any{"from": from}, "destinationId", "required"},
		{map[string]any{"destinationId": "rd"}, "from", "required"},
		{map[string]any{"destinationId": "rd", "from": "yesterday"}, "from", "RFC 3339"},
		{map[string]any{"destinationId": "rd", "from": from, "url": "ftp://x.example"}, "url", "absolute http or https URL"},
		{map[string]any{"destinationId": "rd", "from": from, "filter": map[string]any{"color": "red"}}, "color", "unknown field"},
		{map[string]any{"destinationId": "rd", "from": from, "filter": map[string]any{"type": "click"}}, "filter.type", "must be one of"},
		{map[string]any{"destinationId": "rd", "from": from, "filter": map[string]any{"sourceId": "nope"}}, "filter.sourceId", "not connected"},
		{map[string]any{"destinationId": "rd", "from": from, "maxPerSecond": 1_000_000}, "maxPerSecond", "between 1 and"},
	} {
		r := h.do(http.MethodPost, "/v1/replays", c.body)
		if r.Status != http.StatusBadRequest {
			t.Errorf("%v: status %d, want 400 (%s)", c.body, r.Status, r.Body)
			continue
		}
		e := r.JSON(t)
		if e["field"] != c.field || !strings.Contains(e["message"].(string), c.inMsg) {
			t.Errorf("%v: %s, want field %q and a message with %q", c.body, r.Body, c.field, c.inMsg)
		}
	}
	expectError(t, h.do(http.MethodGet, "/v1/replays/rp_nope", nil), http.StatusNotFound, "not_found", `no replay "rp_nope" (the console keeps its last 100 replays, until it restarts)`, "")
}

// A replay writes one webhooks.deliveries record per matching message, as the router does
// (key, headers, body) with the header replay and, to another URL, the header url, at its cap
// (the produced rate within ±5 %); its progress counts the attempt records that carry its id.
func TestReplayRateAndProgress(t *testing.T) {
	h := replayHarness(t)
	base := time.Now().Add(-5 * time.Minute).Truncate(time.Millisecond)
	const n, rate = 100, 50
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, replayEvent("web", fmt.Sprintf("m-%d", i), "track", "Order Completed", fmt.Sprintf("u%d", i%7), base.Add(time.Duration(i)*time.Millisecond), ""))
	}
	recs = append(recs, replayEvent("web", "skip", "page", "", "u1", base.Add(time.Second), ""))
	h.env.Produce(recs...)
	deliveries := h.env.Reader(schemas.TopicDeliveries)
	r := h.do(http.MethodPost, "/v1/replays", map[string]any{"destinationId": "rd", "from": schemas.FormatTimestamp(base), "filter": map[string]any{"type": "track"},
		"maxPerSecond": rate, "url": "https://user:pw@replay.example/in"})
	expect(t, r, http.StatusCreated)
	d := r.Data(t)
	id, _ := d["replayId"].(string)
	if !strings.HasPrefix(id, "rp_") || d["matched"] != float64(n) {
		t.Fatalf("started %v", d)
	}
	got := deliveries.WaitFor(n, 10*time.Second)
	first, last := got[0].Timestamp, got[n-1].Timestamp
	for _, rec := range got {
		first, last = minTime(first, rec.Timestamp), maxTime(last, rec.Timestamp)
	}
	measured := float64(n-1) / last.Sub(first).Seconds()
	if measured < rate*0.95 || measured > rate*1.05 {
		t.Errorf("produced at %.1f/s, want %d/s ±5%%", measured, rate)
	}
	t.Logf("produced %d at %.2f/s (cap %d/s)", n, measured, rate)
	seen := map[string]bool{}
	for _, rec := range got {
		msg := servicetest.Header(rec, schemas.HeaderMessageID)
		seen[msg] = true
		if servicetest.Header(rec, schemas.HeaderReplay) != id || servicetest.Header(rec, schemas.HeaderURL) != "https://user:pw@replay.example/in" ||
			servicetest.Header(rec, schemas.HeaderDestinationID) != "rd" || servicetest.Header(rec, schemas.HeaderAttempt) != "1" ||
			servicetest.Header(rec, schemas.HeaderSourceID) != "web" || servicetest.Header(rec, schemas.HeaderType) != "track" ||
			!strings.HasPrefix(string(rec.Key), "rd:u") || !strings.Contains(string(rec.Value), `"messageId":"`+msg+`"`) ||
			!strings.HasPrefix(string(rec.Value), `{"version":1`) {
			t.Fatalf("delivery record %s %s %v", rec.Key, rec.Value, rec.Headers)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct messages, want %d", len(seen), n)
	}
	// The deliverer's attempt records of the replay: 90 delivered (one after a failed try), 5
	// dead-lettered; attempts of another replay and without one are not counted.
	var attempts []*kgo.Record
	now := time.Now()
	for i := range 90 {
		attempts = append(attempts, replayAttempt(fmt.Sprintf("m-%d", i), id, "ok", ""))
	}
	attempts = append(attempts, replayAttempt("m-0", id, "ok", ""), replayAttempt("m-90", id, "status_5xx", ""))
	for i := 90; i < 95; i++ {
		attempts = append(attempts, replayAttempt(fmt.Sprintf("m-%d", i), id, "status_4xx", "status_4xx"))
	}
	attempts = append(attempts, replayAttempt("m-99", "rp_other", "ok", ""),
		&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("rd"), Value: attemptJSON("rd", "m-98", "https://replay.example/in", 1, 200, 5, "ok", now)})
	h.env.Produce(attempts...)
	var v map[string]any
	servicetest.Eventually(t, 10*time.Second, "the progress", func() string {
		v = h.do(http.MethodGet, "/v1/replays/"+id, nil).Data(t)
		if v["delivered"] == float64(90) && v["failed"] == float64(5) && v["state"] == "done" && v["sent"] == float64(n) {
			return ""
		}
		return fmt.Sprint(v)
	})
	if v["url"] != schemas.RedactURL("https://user:pw@replay.example/in") || v["maxPerSecond"] != float64(rate) || v["matched"] != float64(n) {
		t.Errorf("replay %v: the URL without its credentials, the cap, the count", v)
	}
	list := h.do(http.MethodGet, "/v1/replays?destinationId=rd", nil)
	expect(t, list, http.StatusOK)
	if !strings.Contains(string(list.Body), id) || strings.Contains(string(h.do(http.MethodGet, "/v1/replays?destinationId=file-hooks", nil).Body), id) {
		t.Errorf("list: %s", list.Body)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// replayAttempt is a webhooks.attempts record of rd for message msg of replay id.
func replayAttempt(msg, id, class, deadLettered string) *kgo.Record {
	v := attemptJSON("rd", msg, "https://replay.example/in", 1, 200, 5, class, time.Now())
	extra := `,"replayId":"` + id + `"`
	if deadLettered != "" {
		extra += `,"deadLettered":"` + deadLettered + `"`
	}
	v = append(v[:len(v)-1], extra+"}"...)
	return &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("rd"), Value: v}
}

// Cancelling a running replay stops its deliveries at once; cancelling again changes nothing.
func TestReplayCancel(t *testing.T) {
	h := replayHarness(t)
	base := time.Now().Add(-5 * time.Minute)
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, replayEvent("web", fmt.Sprintf("m-%d", i), "track", "E", "u1", base.Add(time.Duration(i)*time.Millisecond), ""))
	}
	h.env.Produce(recs...)
	r := h.do(http.MethodPost, "/v1/replays", map[string]any{"destinationId": "rd", "from": schemas.FormatTimestamp(base.Add(-time.Second)), "maxPerSecond": 20})
	expect(t, r, http.StatusCreated)
	id := r.Data(t)["replayId"].(string)
	deliveries := h.env.Reader(schemas.TopicDeliveries)
	deliveries.WaitFor(5, 5*time.Second)
	c := h.do(http.MethodDelete, "/v1/replays/"+id, nil)
	expect(t, c, http.StatusOK)
	if c.Data(t)["state"] != "cancelled" {
		t.Fatalf("after cancel: %s", c.Body)
	}
	// A record in flight when the cancel answered may still land: wait until the count has not
	// changed for 300 ms.
	last, changed := -1, time.Now()
	servicetest.Eventually(t, 5*time.Second, "the deliveries to settle after the cancel", func() bool {
		deliveries.Poll()
		if n := len(deliveries.Got); n != last {
			last, changed = n, time.Now()
		}
		return time.Since(changed) >= 300*time.Millisecond
	})
	before := len(deliveries.Got)
	servicetest.Consistently(t, time.Second, "no more deliveries", func() bool { deliveries.Poll(); return len(deliveries.Got) == before })
	v := h.do(http.MethodGet, "/v1/replays/"+id, nil).Data(t)
	if v["state"] != "cancelled" || v["sent"].(float64) >= 200 || int(v["sent"].(float64)) != before {
		t.Errorf("cancelled replay %v, %d deliveries written", v, before)
	}
	expect(t, h.do(http.MethodPost, "/v1/replays/"+id+"/cancel", nil), http.StatusOK)
	expectError(t, h.do(http.MethodDelete, "/v1/replays/rp_nope", nil), http.StatusNotFound, "not_found", `no replay "rp_nope"`, "")
}

// A suppressed user's messages are never replayed, those before the suppression included;
// a deleted user's (SUPPRESS_WITH_DELETE) neither.
func TestReplaySuppressedAndDeletedUsers(t *testing.T) {
	h := replayHarness(t)
	base := time.Now().Add(-5 * time.Minute)
	var recs []*kgo.Record
	for i, u := range []string{"u-keep", "u-sup", "u-del", "u-keep", "u-sup", "u-del"} {
		recs = append(recs, replayEvent("web", fmt.Sprintf("m-%d", i), "track", "E", u, base.Add(time.Duration(i)*time.Millisecond), ""))
	}
	h.env.Produce(recs...)
	q := map[string]any{"destinationId": "rd", "from": schemas.FormatTimestamp(base.Add(-time.Second))}
	if got := dryRun(t, h, q); got != 6 {
		t.Fatalf("before the regulations: matched %d, want 6", got)
	}
	expect(t, h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "SUPPRESS_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u-sup"}}), http.StatusOK)
	expect(t, h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "SUPPRESS_WITH_DELETE", "subjectType": "USER_ID", "subjectIds": []string{"u-del"}}), http.StatusOK)
	servicetest.Eventually(t, 10*time.Second, "the regulations applied", func() bool { return dryRun(t, h, q) == 2 })
	r := h.do(http.MethodPost, "/v1/replays", q)
	expect(t, r, http.StatusCreated)
	deliveries := h.env.Reader(schemas.TopicDeliveries)
	deliveries.Settle = 500 * time.Millisecond
	for _, rec := range deliveries.WaitFor(2, 10*time.Second) {
		if string(rec.Key) != "rd:u-keep" {
			t.Errorf("replayed %s", rec.Key)
		}
	}
	if len(deliveries.Got) != 2 {
		t.Errorf("%d deliveries, want u-keep's 2", len(deliveries.Got))
	}
}

// The destination page's Replay tab: the form counts first (a dry run: the count, then the
// Start button), starts the replay, lists it with its progress and cancels it; bad input shows
// the error on the form; a form without the CSRF token is refused.
func TestUIReplay(t *testing.T) {
	h := replayHarness(t)
	base := time.Now().Add(-5 * time.Minute)
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, replayEvent("web", fmt.Sprintf("m-%d", i), "track", "E", "u1", base.Add(time.Duration(i)*time.Millisecond), ""))
	}
	h.env.Produce(recs...)
	b := h.signInFollowing(t)
	p := b.get("/destinations/rd?tab=replay")
	p.contains(t, http.StatusOK, "Replay by time range and filter", "Count the messages", "No replay of this destination")
	if strings.Contains(p.Body, "Start the replay") {
		t.Fatal("the Start button shows before a count")
	}
	p = b.post("/destinations/rd/replays", url.Values{"from": {"1h"}, "type": {"track"}, "maxPerSecond": {"5"}, "action": {"count"}})
	p.contains(t, http.StatusOK, "30 messages match", "Start the replay", `value="track" selected`)
	p = b.post("/destinations/rd/replays", url.Values{"from": {"1h"}, "type": {"track"}, "maxPerSecond": {"5"}, "action": {"start"}})
	p.contains(t, http.StatusOK, "started: 30 messages, at most 5 a second", "running", "Cancel")
	m := regexp.MustCompile(`Replay (rp_[0-9a-f]+) started`).FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no replay id: %s", p.Body)
	}
	p = b.post("/destinations/rd/replays/"+m[1]+"/cancel", nil)
	p.contains(t, http.StatusOK, "Replay "+m[1]+" cancelled", "cancelled")
	p = b.post("/destinations/rd/replays", url.Values{"from": {"1h"}, "to": {"2h"}, "action": {"count"}})
	p.contains(t, http.StatusBadRequest, "is after to")
	p = b.post("/destinations/rd/replays", url.Values{"from": {"1h"}, "url": {"ftp://x"}, "action": {"count"}})
	p.contains(t, http.StatusBadRequest, "absolute http or https URL", `value="ftp://x"`)
	if p := b.post("/destinations/rd/replays", url.Values{"_csrf": {"forged"}, "from": {"1h"}, "action": {"start"}}); p.Status != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d", p.Status)
	}
}

// Sealed events (docs/security.md#crypto-shredding) are opened to be filtered, and replayed
// with their body sealed again with the same key (the header tributary-key), as the router
// writes them; an event whose key was shredded (its user deleted) is neither counted nor sent.
func TestReplaySealedEvents(t *testing.T) {
	h := replayHarness(t)
	keys := h.env.Keyring()
	base := time.Now().Add(-5 * time.Minute)
	jane := replayEvent("web", "m-jane", "track", "Signed Up", "jane", base, "")
	bob := replayEvent("web", "m-bob", "track", "Signed Up", "bob", base.Add(time.Millisecond), "")
	h.env.Seal(keys, jane, bob)
	if n, err := keys.Shred(h.env.Ctx, "jane"); err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v", n, err)
	}
	h.env.Produce(jane, bob)
	q := map[string]any{"destinationId": "rd", "from": schemas.FormatTimestamp(base.Add(-time.Second)), "filter": map[string]any{"event": "Signed Up"}}
	if got := dryRun(t, h, q); got != 1 {
		t.Fatalf("matched %d, want bob's 1", got)
	}
	expect(t, h.do(http.MethodPost, "/v1/replays", q), http.StatusCreated)
	deliveries := h.env.Reader(schemas.TopicDeliveries)
	deliveries.Settle = 300 * time.Millisecond
	got := deliveries.WaitFor(1, 10*time.Second)
	if len(got) != 1 || string(got[0].Key) != "rd:bob" || servicetest.Header(got[0], schemas.HeaderDataKey) == "" {
		t.Fatalf("deliveries %v", got)
	}
	key, err := keys.Key([]byte(servicetest.Header(got[0], schemas.HeaderDataKey)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := key.Open(nil, got[0].Value)
	if err != nil || !strings.HasPrefix(string(body), `{"version":1,"type":"track","messageId":"m-bob"`) {
		t.Fatalf("the replayed body, opened: %s (%v)", body, err)
	}
}
