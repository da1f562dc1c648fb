package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// attemptJSON is a webhooks.attempts value as the deliverer writes it.
func attemptJSON(dest, msg, url string, n, status int, latencyMs float64, class string, at time.Time) []byte {
	b := fmt.Sprintf(`{"destinationId":%q,"messageId":%q,"url":%q,"attempt":%d,"status":%d,"latencyMs":%g,"errorClass":%q`, dest, msg, url, n, status, latencyMs, class)
	if class != "ok" {
		b += `,"error":"HTTP 500"`
	}
	return []byte(b + `,"concurrencyLimit":8,"at":"` + schemas.FormatTimestamp(at) + `"}`)
}

// TestDeliveryLog: the attempts of webhooks.attempts, newest first, filtered and paged; one
// message's attempts; the per-minute stats; and the same answers from a restarted console.
func TestDeliveryLog(t *testing.T) {
	h := newHarness(t, func(c *console.Config) { c.AttemptsPerDestination = 50 })
	now := time.Now().UTC()
	var recs []*kgo.Record
	for i := range 60 { // 60 messages, the even ones fail once then succeed
		msg := fmt.Sprintf("m%02d", i)
		at := now.Add(time.Duration(i-60) * time.Second)
		if i%2 == 0 {
			recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: attemptJSON("file-hooks", msg, "http://127.0.0.1:9/file", 1, 500, 20, "status_5xx", at)})
			recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: attemptJSON("file-hooks", msg, "http://127.0.0.1:9/file", 2, 200, 10, "ok", at.Add(time.Millisecond))})
		} else {
			recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: attemptJSON("file-hooks", msg, "http://127.0.0.1:9/file", 1, 204, 5, "ok", at)})
		}
	}
	recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Value: []byte("not json")})
	h.env.Produce(recs...)
	var page map[string]any
	servicetest.Eventually(t, 5*time.Second, "attempts in the log", func() bool {
		page = h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts?limit=1000", nil).JSON(t)
		return len(page["data"].([]any)) == 50
	})
	first := page["data"].([]any)[0].(map[string]any)
	if first["messageId"] != "m59" || first["status"] != float64(204) {
		t.Fatalf("newest attempt: %v", first)
	}
	// Failures only, two per page, paged to the end.
	seen := 0
	cursor := ""
	for pages := 0; ; pages++ {
		r := h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts?status=failure&limit=2"+cursor, nil)
		expect(t, r, http.StatusOK)
		m := r.JSON(t)
		for _, a := range m["data"].([]any) {
			if a.(map[string]any)["errorClass"] != "status_5xx" {
				t.Fatalf("a failure page holds %v", a)
			}
			seen++
		}
		next, ok := m["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = "&cursor=" + next
		if pages > 100 {
			t.Fatal("paging does not end")
		}
	}
	// The last 50 attempts are 16 failures and 34 successes (of messages m32..m59).
	if seen != 16 {
		t.Fatalf("%d failures in the last 50 attempts, want 16", seen)
	}
	ma := h.do(http.MethodGet, "/v1/messages/m58/attempts", nil)
	expect(t, ma, http.StatusOK)
	if as := ma.JSON(t)["data"].([]any); len(as) != 2 || as[0].(map[string]any)["attempt"] != float64(1) || as[1].(map[string]any)["attempt"] != float64(2) {
		t.Fatalf("attempts of m58: %s", ma.Body)
	}
	expectError(t, h.do(http.MethodGet, "/v1/messages/nope/attempts", nil), http.StatusNotFound, "not_found", `no attempt of message "nope" in the log (it keeps the last 50 attempts per destination)`, "")
	expectError(t, h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts?status=meh", nil), http.StatusBadRequest, "invalid",
		"status: must be one of [success failure 2xx 3xx 4xx 5xx ok timeout connection status_5xx status_408 status_429 status_4xx tls blocked_address invalid_url invalid_request destination_unavailable suppressed deleted other], got \"meh\"", "status")
	expectError(t, h.do(http.MethodGet, "/v1/destinations/ghost/attempts", nil), http.StatusNotFound, "not_found", `no destination "ghost"`, "")

	st := h.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=1h", nil)
	expect(t, st, http.StatusOK)
	stats := st.Data(t)
	if stats["attempts"] != float64(90) || stats["successes"] != float64(60) || stats["failures"].(map[string]any)["status_5xx"] != float64(30) {
		t.Fatalf("stats: %s", st.Body)
	}
	lat := stats["latencyMs"].(map[string]any)
	if p50, p99 := lat["p50"].(float64), lat["p99"].(float64); p50 < 4 || p50 > 12.5 || p99 < 16 || p99 > 25 {
		t.Fatalf("latency p50 %v p99 %v, want about 5-10 and 20", p50, p99)
	}
	if n := len(stats["series"].([]any)); n != 60 {
		t.Fatalf("%d points in 1h, want 60", n)
	}
	day := h.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=24h", nil).Data(t)
	if day["attempts"] != float64(90) || len(day["series"].([]any)) < 144 {
		t.Fatalf("24h stats: attempts %v, %d points", day["attempts"], len(day["series"].([]any)))
	}
	expectError(t, h.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=2h", nil), http.StatusBadRequest, "invalid", `window: must be 1h or 24h, got "2h"`, "window")

	// A restarted console reads the same log back from Kafka.
	log := h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts?limit=1000", nil).JSON(t)["data"]
	h.stop()
	h2 := startConsole(t, h.env, func(c *console.Config) { c.AttemptsPerDestination = 50 })
	again := h2.do(http.MethodGet, "/v1/destinations/file-hooks/attempts?limit=1000", nil).JSON(t)["data"]
	if ids(log) != ids(again) {
		t.Fatalf("after a restart the log differs:\n%s\n%s", ids(log), ids(again))
	}
	if s2 := h2.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=1h", nil).Data(t); s2["attempts"] != stats["attempts"] || s2["successes"] != stats["successes"] {
		t.Fatalf("after a restart the stats differ: %v", s2)
	}
}

// ids lists the message ids and attempt numbers of a page of attempts.
func ids(page any) string {
	var b strings.Builder
	for _, a := range page.([]any) {
		m := a.(map[string]any)
		fmt.Fprintf(&b, "%s/%v ", m["messageId"], m["attempt"])
	}
	return b.String()
}

// TestSourceEvents: accepted events of tracking.events and rejected ones of tracking.rejected
// show in the source's recent events and live stream; other sources' do not.
func TestSourceEvents(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/v1/sources/web/events/live", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	readEvent := func() (string, map[string]any) {
		t.Helper()
		var name string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimSpace(strings.TrimPrefix(line, "event: "))
			case strings.HasPrefix(line, "data: "):
				var m map[string]any
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
					t.Fatal(err)
				}
				return name, m
			}
		}
	}
	sent := time.Now()
	h.env.Produce(
		&kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u1"), Value: []byte(`{"type":"track","event":"Other","userId":"u1"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("other")}}},
		&kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u1"), Value: []byte(`{"type":"track","event":"Signed Up","userId":"u1","messageId":"m1"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderMessageID, Value: []byte("m1")}, {Key: schemas.HeaderType, Value: []byte("track")}}},
	)
	name, ev := readEvent()
	if name != "accepted" || ev["messageId"] != "m1" || ev["message"].(map[string]any)["event"] != "Signed Up" {
		t.Fatalf("live event %s: %v", name, ev)
	}
	if took := time.Since(sent); took > time.Second {
		t.Fatalf("the live event took %s", took)
	}
	h.env.Produce(&kgo.Record{Topic: schemas.TopicRejected, Key: []byte("u2"), Value: []byte(`{"type":"track","userId":"u2"`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderReason, Value: []byte("malformed JSON")}, {Key: schemas.HeaderSourceID, Value: []byte("web")}}})
	name, ev = readEvent()
	if name != "rejected" || ev["reason"] != "malformed JSON" || ev["message"] != `{"type":"track","userId":"u2"` {
		t.Fatalf("live rejected %s: %v", name, ev)
	}
	recent := h.do(http.MethodGet, "/v1/sources/web/events/recent", nil)
	expect(t, recent, http.StatusOK)
	if evs := recent.JSON(t)["data"].([]any); len(evs) != 2 || evs[0].(map[string]any)["status"] != "rejected" || evs[1].(map[string]any)["status"] != "accepted" {
		t.Fatalf("recent: %s", recent.Body)
	}
	expectError(t, h.do(http.MethodGet, "/v1/sources/ghost/events/recent", nil), http.StatusNotFound, "not_found", `no source "ghost"`, "")

	// A message refused for its size (ingest keeps up to ~500 KB on tracking.rejected) is kept
	// as its first 32 KB, as text.
	big := `{"type":"track","event":"Big","properties":{"blob":"` + strings.Repeat("x", 40<<10) + `"}}`
	h.env.Produce(&kgo.Record{Topic: schemas.TopicRejected, Key: []byte("u3"), Value: []byte(big),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderReason, Value: []byte("message is larger than 32 KB")}, {Key: schemas.HeaderSourceID, Value: []byte("web")}}})
	name, ev = readEvent()
	msg, _ := ev["message"].(string)
	if name != "rejected" || ev["truncated"] != true || len(msg) != 32<<10 || !strings.HasPrefix(big, msg) {
		t.Fatalf("a 40 KB message: truncated %v, %d bytes kept", ev["truncated"], len(msg))
	}
}

// TestRegulations: validation, the records written to tracking.deletions, and the status from
// tracking.deletions.status: RUNNING until every expected store (by default the router and
// audiences) reported on every subject, then FINISHED, with what each store did.
func TestRegulations(t *testing.T) {
	h := newHarness(t, nil)
	for _, tt := range []struct {
		body           any
		message, field string
	}{
		{map[string]any{"subjectType": "USER_ID", "subjectIds": []string{"u"}}, "regulationType: required: one of [DELETE_ONLY SUPPRESS_WITH_DELETE SUPPRESS_ONLY UNSUPPRESS]", "regulationType"},
		{map[string]any{"regulationType": "DELETE", "subjectType": "USER_ID", "subjectIds": []string{"u"}}, `regulationType: must be one of [DELETE_ONLY SUPPRESS_WITH_DELETE SUPPRESS_ONLY UNSUPPRESS], got "DELETE"`, "regulationType"},
		{map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "EMAIL", "subjectIds": []string{"u"}}, `subjectType: must be USER_ID, got "EMAIL"`, "subjectType"},
		{map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{}}, "subjectIds: at least one user id is required", "subjectIds"},
		{map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": make([]string, 5001)}, "subjectIds: at most 5000 subject ids per regulation, got 5001", "subjectIds"},
		{map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u", ""}}, "subjectIds[1]: must not be empty", "subjectIds[1]"},
		{map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u"}, "sourceIds": []string{"ghost"}}, `sourceIds[0]: no source "ghost"`, "sourceIds[0]"},
		{map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u"}, "extra": 1}, `the body is not valid: unknown field "extra"`, "extra"},
	} {
		expectError(t, h.do(http.MethodPost, "/v1/regulations", tt.body), http.StatusBadRequest, "invalid", tt.message, tt.field)
	}
	deletions := h.env.Reader(schemas.TopicDeletions)
	r := h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "SUPPRESS_WITH_DELETE", "subjectType": "USER_ID", "subjectIds": []string{"u1", "u2", "u1"}, "sourceIds": []string{"web"}})
	expect(t, r, http.StatusOK)
	id, _ := r.Data(t)["regulateId"].(string)
	recs := deletions.WaitFor(2, 5*time.Second)
	for _, rec := range recs {
		req, _, err := schemas.DecodeDeletionRequest(rec.Value)
		if err != nil || req.RequestID != id || req.Kind != schemas.KindSuppressWithDelete || string(rec.Key) != req.UserID || len(req.SourceIDs) != 1 {
			t.Fatalf("deletion record %s: %v", rec.Value, err)
		}
	}
	get := func() map[string]any { return h.do(http.MethodGet, "/v1/regulations/"+id, nil).Data(t) }
	if g := get(); g["overallStatus"] != "RUNNING" || g["subjectsTotal"] != float64(2) || g["subjectsProcessed"] != float64(0) {
		t.Fatalf("new regulation: %v", g)
	}
	// The router's status records: one per subject (u1 twice: counted once).
	status := func(user string, notices int) *kgo.Record {
		return &kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(id), Value: schemas.DeletionStatus{RequestID: id, UserID: user, Kind: schemas.KindSuppressWithDelete, Notices: notices, ProcessedAt: schemas.FormatTimestamp(time.Now())}.Record()}
	}
	h.env.Produce(status("u1", 1), status("u1", 1))
	servicetest.Eventually(t, 5*time.Second, "one subject processed", func() bool { return get()["subjectsProcessed"] == float64(1) })
	if g := get(); g["overallStatus"] != "RUNNING" {
		t.Fatalf("half done: %v", g)
	}
	h.env.Produce(status("u2", 1))
	servicetest.Eventually(t, 5*time.Second, "every subject processed", func() bool { return get()["subjectsProcessed"] == float64(2) })
	// The router has processed every subject; audiences (expected by default) has not reported.
	if g := get(); g["overallStatus"] != "RUNNING" || g["finishedAt"] != nil || storeOf(g, "audiences")["expected"] != true ||
		storeOf(g, "audiences")["subjectsReported"] != float64(0) || storeOf(g, "router")["subjectsReported"] != float64(2) {
		t.Fatalf("processed by the router only: %v", g)
	}
	h.env.Produce(audiencesReport(id, "u1"), audiencesReport(id, "u1"))
	servicetest.Eventually(t, 5*time.Second, "audiences reported on u1", func() bool { return storeOf(get(), "audiences")["subjectsReported"] == float64(1) })
	if g := get(); g["overallStatus"] != "RUNNING" {
		t.Fatalf("audiences reported on one subject of two: %v", g)
	}
	h.env.Produce(audiencesReport(id, "u2"))
	servicetest.Eventually(t, 5*time.Second, "FINISHED", func() bool { return get()["overallStatus"] == "FINISHED" })
	g := get()
	if g["noticesSent"] != float64(2) || g["finishedAt"] == nil || g["finishedAfterMs"] == nil {
		t.Fatalf("finished: %v", g)
	}
	if c := storeOf(g, "router")["counts"].(map[string]any); c["notices"] != float64(2) {
		t.Errorf("router's counts %v, want 2 notices", c)
	}
	if c := storeOf(g, "audiences")["counts"].(map[string]any); c["profiles"] != float64(2) || c["tombstones"] != float64(4) {
		t.Errorf("audiences' counts %v, want 2 profiles and 4 tombstones (u1's report read twice counts once)", c)
	}
	list := h.do(http.MethodGet, "/v1/regulations", nil).JSON(t)["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != id {
		t.Fatalf("list: %v", list)
	}
	expectError(t, h.do(http.MethodGet, "/v1/regulations/nope", nil), http.StatusNotFound, "not_found", `no regulation "nope"`, "")
	// A restarted console rebuilds the list from both topics.
	h.stop()
	h2 := startConsole(t, h.env, nil)
	if g := h2.do(http.MethodGet, "/v1/regulations/"+id, nil).Data(t); g["overallStatus"] != "FINISHED" || g["subjectsTotal"] != float64(2) || g["noticesSent"] != float64(2) {
		t.Fatalf("after a restart: %v", g)
	}
}

// TestViewsDropDeletedObjects: a deleted destination's log leaves the console's memory.
func TestViewsDropDeletedObjects(t *testing.T) {
	h := newHarness(t, nil)
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "gone", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": "https://a.example.com/x"}}}}), http.StatusCreated)
	h.env.Produce(&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("gone"), Value: attemptJSON("gone", "m-gone", "https://a.example.com/x", 1, 200, 5, "ok", time.Now())})
	servicetest.Eventually(t, 5*time.Second, "the attempt in the log", func() bool {
		return h.do(http.MethodGet, "/v1/messages/m-gone/attempts", nil).Status == http.StatusOK
	})
	h.svc.Prune()
	expect(t, h.do(http.MethodGet, "/v1/messages/m-gone/attempts", nil), http.StatusOK) // still configured: kept
	expect(t, h.do(http.MethodDelete, "/v1/destinations/gone", nil), http.StatusNoContent)
	h.svc.Prune()
	expect(t, h.do(http.MethodGet, "/v1/messages/m-gone/attempts", nil), http.StatusNotFound)
}

// audiencesReport is the audiences service's report on one subject of regulation id.
func audiencesReport(id, user string) *kgo.Record {
	rep := schemas.DeletionReport{RequestID: id, UserID: user, Store: schemas.StoreAudiences, Kind: schemas.KindSuppressWithDelete,
		Counts: map[string]int64{schemas.CountProfiles: 1, schemas.CountTombstones: 2}, DoneAt: schemas.FormatTimestamp(time.Now())}
	return &kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(schemas.DeletionReportKey(id, schemas.StoreAudiences)), Value: rep.Record()}
}

// storeOf is what regulation g says of one store.
func storeOf(g map[string]any, store string) map[string]any {
	stores, _ := g["stores"].(map[string]any)
	st, _ := stores[store].(map[string]any)
	return st
}

// TestRegulationStores: the stores a regulation waits for are CONSOLE_REGULATION_STORES. A
// deployment without audiences (router only) is FINISHED once the router processed every
// subject; one that lists the deliverer and the console waits for their reports too (the
// console writes its own once its views forgot the subject, right after the router's status),
// and shows a report of a store it does not wait for without waiting for it.
func TestRegulationStores(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stores []string
	}{
		{"without audiences", []string{"router"}},
		{"every store", []string{"router", "audiences", "deliverer", "console"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *console.Config) { c.RegulationStores = tt.stores })
			r := h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u1"}})
			expect(t, r, http.StatusOK)
			id, _ := r.Data(t)["regulateId"].(string)
			get := func() map[string]any { return h.do(http.MethodGet, "/v1/regulations/"+id, nil).Data(t) }
			h.env.Produce(&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(id), Value: schemas.DeletionStatus{RequestID: id, UserID: "u1",
				Kind: schemas.KindDeleteOnly, Notices: 1, ProcessedAt: schemas.FormatTimestamp(time.Now())}.Record()})
			if len(tt.stores) == 1 {
				servicetest.Eventually(t, 5*time.Second, "FINISHED", func() bool { return get()["overallStatus"] == "FINISHED" })
				// The router is waited for; any other store that reported (the console's own) is
				// shown, not waited for.
				g := get()
				for name, st := range g["stores"].(map[string]any) {
					if expected := st.(map[string]any)["expected"]; expected != (name == "router") {
						t.Fatalf("finished: store %s expected %v: %v", name, expected, g)
					}
				}
				return
			}
			servicetest.Eventually(t, 5*time.Second, "the console's own report", func() bool { return storeOf(get(), "console")["subjectsReported"] == float64(1) })
			steps := []struct {
				store string
				send  func()
			}{
				{"audiences", func() { h.env.Produce(audiencesReport(id, "u1")) }},
				{"deliverer", func() {
					rep := schemas.DeletionReport{RequestID: id, UserID: "u1", Store: schemas.StoreDeliverer, Kind: schemas.KindDeleteOnly,
						Counts: map[string]int64{schemas.CountDropped: 3}, DoneAt: schemas.FormatTimestamp(time.Now())}
					h.env.Produce(&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(schemas.DeletionReportKey(id, schemas.StoreDeliverer)), Value: rep.Record()})
				}},
			}
			for _, st := range steps {
				servicetest.Eventually(t, 5*time.Second, "the store before "+st.store+" read", func() bool { return get()["subjectsProcessed"] == float64(1) })
				if g := get(); g["overallStatus"] != "RUNNING" {
					t.Fatalf("before %s reported: %v", st.store, g)
				}
				st.send()
				servicetest.Eventually(t, 5*time.Second, st.store+" reported", func() bool { return storeOf(get(), st.store)["subjectsReported"] == float64(1) })
			}
			servicetest.Eventually(t, 5*time.Second, "FINISHED", func() bool { return get()["overallStatus"] == "FINISHED" })
			g := get()
			if c := storeOf(g, "deliverer")["counts"].(map[string]any); c["dropped"] != float64(3) {
				t.Errorf("deliverer's counts %v", c)
			}
			if c := storeOf(g, "console")["counts"].(map[string]any); c["purged"] != float64(0) { // its views held nothing of u1
				t.Errorf("console's counts %v", c)
			}
			// A store the console does not wait for is shown, not waited for.
			rep := schemas.DeletionReport{RequestID: id, UserID: "u1", Store: "warehouse", DoneAt: schemas.FormatTimestamp(time.Now())}
			h.env.Produce(&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(schemas.DeletionReportKey(id, "warehouse")), Value: rep.Record()})
			servicetest.Eventually(t, 5*time.Second, "the other store shown", func() bool { return storeOf(get(), "warehouse")["expected"] == false })
			if g := get(); g["overallStatus"] != "FINISHED" {
				t.Fatalf("after another store's report: %v", g)
			}
		})
	}
}
