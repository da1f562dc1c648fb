package console_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/console/internal/oidctest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The export's JSON lines are a string to the API description's checks (TestOpenAPI).
func init() { openapi3filter.RegisterBodyDecoder("application/jsonl", openapi3filter.FileBodyDecoder) }

// auditRecords reads tributary.audit until it holds n records and returns them, decoded, with
// every record's bytes (for scans for secrets).
func auditRecords(t *testing.T, h *harness, n int) ([]schemas.AuditRecord, []byte) {
	t.Helper()
	rd := h.env.Reader(schemas.TopicAudit)
	rd.WaitFor(n, 15*time.Second)
	var out []schemas.AuditRecord
	var all []byte
	for _, r := range rd.Got {
		a, err := schemas.DecodeAuditRecord(r.Value)
		if err != nil {
			t.Fatalf("an audit record does not decode: %v: %s", err, r.Value)
		}
		out = append(out, a)
		all = append(append(all, r.Key...), r.Value...)
	}
	return out, all
}

// TestAuditTrailRecordsEveryChange: every kind of change — create, update and delete of each
// config kind, a key rotation, an import, a re-encryption, a regulation, a replay and its
// cancellation, a DLQ replay, a retry now — and every sign-in, refused sign-in, sign-out and
// unauthorized API call is one record of tributary.audit with its actor, action, object and
// before → after (docs/console.md#audit-trail); no secret (a write key, a shared secret, a
// header value, a regulation's user id) is in the topic's bytes.
func TestAuditTrailRecordsEveryChange(t *testing.T) {
	h := newHarnessWith(t, servicetest.Options{ConfigEncryptionKey: testEncryptionKey}, nil)
	const (
		sharedSecret = "audit-shared-secret-0123456789"
		headerValue  = "Bearer audit-header-token-0123456789"
		plainSecret  = "audit-plain-secret-0123456789"
		subject      = "audit-subject-user-42"
	)
	var secrets []string
	do := func(status int, method, path string, body any, headers ...string) response {
		t.Helper()
		r := h.do(method, path, body, headers...)
		expect(t, r, status)
		return r
	}
	writeKey := func(r response) {
		t.Helper()
		k, _ := r.Data(t)["writeKey"].(string)
		if !strings.HasPrefix(k, "wk_") {
			t.Fatalf("no write key in %s", r.Body)
		}
		secrets = append(secrets, k)
	}

	// Sessions and refusals.
	b := h.signIn(t)
	refused := h.newBrowser(t, false).post("/signin", url.Values{"token": {"not-the-token-0123456789"}})
	if refused.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong token's sign-in: %d", refused.Status)
	}
	expect(t, h.doAs("wrong-token-0123456789", http.MethodGet, "/v1/sources", nil), http.StatusUnauthorized)

	// Each config kind: create, update, delete.
	writeKey(do(http.StatusCreated, http.MethodPost, "/v1/sources", map[string]any{"id": "app", "name": "App"}))
	do(http.StatusOK, http.MethodPatch, "/v1/sources/app", map[string]any{"name": "App 2"})
	writeKey(do(http.StatusOK, http.MethodPost, "/v1/sources/app/rotate-key", map[string]any{"overlap": "1h"}))
	do(http.StatusCreated, http.MethodPost, "/v1/destinations", map[string]any{"id": "hooks", "type": "webhooks", "sources": []string{"app"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": "https://h.example.com/in", "headers": map[string]string{"Authorization": headerValue}}},
			"sharedSecret": sharedSecret}})
	do(http.StatusOK, http.MethodPatch, "/v1/destinations/hooks", map[string]any{"name": "Hooks 2"})
	do(http.StatusCreated, http.MethodPost, "/v1/audiences", map[string]any{"id": "buyers", "name": "Buyers", "source": "web", "rule": map[string]any{"event": "Order Completed"}})
	do(http.StatusOK, http.MethodPatch, "/v1/audiences/buyers", map[string]any{"name": "Big buyers"})
	do(http.StatusCreated, http.MethodPost, "/v1/computed-traits", map[string]any{"id": "orders", "name": "Orders", "source": "web", "count": map[string]any{"event": "Order Completed", "within": "720h"}})
	do(http.StatusOK, http.MethodPatch, "/v1/computed-traits/orders", map[string]any{"name": "Orders 2"})
	do(http.StatusCreated, http.MethodPost, "/v1/tracking-plans", map[string]any{"id": "shop", "name": "Shop", "rules": map[string]any{"events": []any{
		map[string]any{"name": "Order Completed", "properties": map[string]any{"type": "object"}}}}})
	do(http.StatusOK, http.MethodPatch, "/v1/tracking-plans/shop", map[string]any{"name": "Shop 2"})
	do(http.StatusNoContent, http.MethodDelete, "/v1/tracking-plans/shop", nil)
	do(http.StatusNoContent, http.MethodDelete, "/v1/computed-traits/orders", nil)
	do(http.StatusNoContent, http.MethodDelete, "/v1/audiences/buyers", nil)
	do(http.StatusNoContent, http.MethodDelete, "/v1/destinations/hooks", nil)
	do(http.StatusNoContent, http.MethodDelete, "/v1/sources/app", nil)

	// An import (a console object of the file's), a re-encryption (a record written in clear).
	do(http.StatusOK, http.MethodPut, "/v1/config", "sources:\n  - id: imported\n    name: Imported\n    writeKeyHash: "+schemas.HashWriteKey("wk_imported_0123456789")+"\n", "Content-Type", "application/yaml")
	plain := &schemas.Destination{ID: "plain", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"}, Origin: schemas.OriginConsole,
		Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "https://p.example.com/"}}, SharedSecret: plainSecret}}
	rec, err := plain.Record()
	if err != nil {
		t.Fatal(err)
	}
	h.env.Produce(&kgo.Record{Topic: schemas.TopicConfig, Key: []byte(rec.Key), Value: rec.Value})
	if _, err := h.env.Store.WaitFor(h.env.Ctx, func(s *platform.Snapshot) bool { _, ok := s.DestinationByID("plain"); return ok }); err != nil {
		t.Fatal(err)
	}
	do(http.StatusOK, http.MethodPost, "/v1/config/reencrypt", nil)

	// A regulation, a replay and its cancellation, a DLQ replay, a retry now.
	reg := do(http.StatusOK, http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "SUPPRESS_ONLY", "subjectType": "USER_ID", "subjectIds": []string{subject}})
	regulationID := reg.Data(t)["regulateId"].(string)
	const replayUser = "audit-replay-user-7"
	rp := do(http.StatusCreated, http.MethodPost, "/v1/replays", map[string]any{"destinationId": "file-hooks", "from": schemas.FormatTimestamp(time.Now().Add(-time.Hour)),
		"filter": map[string]any{"userId": replayUser}})
	replayID := rp.Data(t)["replayId"].(string)
	do(http.StatusOK, http.MethodPost, "/v1/replays/"+replayID+"/cancel", nil)
	h.env.Produce(&kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("file-hooks:u1"), Value: []byte(`{"type":"track","event":"E","userId":"u1"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte("dead-1")},
			{Key: schemas.HeaderReason, Value: []byte("status_4xx")}}})
	servicetest.Eventually(t, 10*time.Second, "the dead letter listed", func() bool {
		return strings.Contains(string(h.do(http.MethodGet, "/v1/destinations/file-hooks/dlq", nil).Body), "dead-1")
	})
	do(http.StatusOK, http.MethodPost, "/v1/destinations/file-hooks/dlq/replay", map[string]any{"messageIds": []string{"dead-1"}})
	now := time.Now()
	h.env.Produce(&kgo.Record{Topic: schemas.RetryTopic(time.Second), Key: []byte("file-hooks:u2"), Value: []byte(`{"version":1,"type":"track","messageId":"wait-1","userId":"u2"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte("wait-1")},
			{Key: schemas.HeaderType, Value: []byte("track")}, {Key: schemas.HeaderAttempt, Value: []byte("2")},
			{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now.Add(-time.Minute)))},
			{Key: schemas.HeaderDueAt, Value: []byte(schemas.FormatTimestamp(now.Add(10 * time.Minute)))}}})
	servicetest.Eventually(t, 10*time.Second, "the waiting message listed", func() bool {
		return strings.Contains(string(h.do(http.MethodGet, "/v1/destinations/file-hooks/pending", nil).Body), "wait-1")
	})
	do(http.StatusAccepted, http.MethodPost, "/v1/destinations/file-hooks/retry", map[string]any{"messageIds": []string{"wait-1"}})

	// Sign-out, last.
	if p := b.post("/signout", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", p.Status, p.Body)
	}

	type want struct {
		action, kind, id, actorKind string
		before, after               bool
		status                      string
	}
	ok, refusedStatus := schemas.AuditOK, schemas.AuditRefused
	token := schemas.ActorConsoleToken
	wants := []want{
		// The harness's config file, applied as tributary-init applies it.
		{"source.create", "source", "web", schemas.ActorTributaryInit, false, true, ok},
		{"destination.create", "destination", "file-hooks", schemas.ActorTributaryInit, false, true, ok},
		{"session.sign-in", "session", "*", token, false, false, ok},
		{"session.sign-in-refused", "session", "", token, false, false, refusedStatus},
		{"api.unauthorized", "request", "GET /v1/sources", schemas.ActorAPIToken, false, false, refusedStatus},
		{"source.create", "source", "app", token, false, true, ok},
		{"source.update", "source", "app", token, true, true, ok},
		{"source.rotate-key", "source", "app", token, true, true, ok},
		{"destination.create", "destination", "hooks", token, false, true, ok},
		{"destination.update", "destination", "hooks", token, true, true, ok},
		{"audience.create", "audience", "buyers", token, false, true, ok},
		{"audience.update", "audience", "buyers", token, true, true, ok},
		{"computed-trait.create", "computed-trait", "orders", token, false, true, ok},
		{"computed-trait.update", "computed-trait", "orders", token, true, true, ok},
		{"tracking-plan.create", "tracking-plan", "shop", token, false, true, ok},
		{"tracking-plan.update", "tracking-plan", "shop", token, true, true, ok},
		{"tracking-plan.delete", "tracking-plan", "shop", token, true, false, ok},
		{"computed-trait.delete", "computed-trait", "orders", token, true, false, ok},
		{"audience.delete", "audience", "buyers", token, true, false, ok},
		{"destination.delete", "destination", "hooks", token, true, false, ok},
		{"source.delete", "source", "app", token, true, false, ok},
		{"config.import", "source", "imported", token, false, true, ok},
		{"config.reencrypt", "destination", "plain", token, true, true, ok},
		{"regulation.create", "regulation", regulationID, token, false, true, ok},
		{"replay.create", "replay", replayID, token, false, true, ok},
		{"replay.cancel", "replay", replayID, token, false, true, ok},
		{"dlq.replay", "destination", "file-hooks", token, false, true, ok},
		{"pending.retry", "destination", "file-hooks", token, false, true, ok},
		{"session.sign-out", "session", "*", token, false, false, ok},
	}
	got, raw := auditRecords(t, h, len(wants))
	if len(got) != len(wants) {
		for _, g := range got {
			t.Logf("%s %s/%s", g.Action, g.Object.Kind, g.Object.ID)
		}
		t.Fatalf("%d audit records, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		g := got[i]
		t.Run(w.action, func(t *testing.T) {
			if g.Action != w.action || g.Object.Kind != w.kind || (w.id != "*" && g.Object.ID != w.id) || w.id == "*" && g.Object.ID == "" ||
				g.Actor.Kind != w.actorKind || (len(g.Before) > 0) != w.before || (len(g.After) > 0) != w.after || g.Result.Status != w.status {
				t.Errorf("record %d: %+v\nbefore %s\nafter %s\nwant %+v", i, g, g.Before, g.After, w)
			}
			if g.V != schemas.AuditVersion || g.ID == "" || g.From.IP == "" && w.actorKind != schemas.ActorTributaryInit {
				t.Errorf("record %d: v %d, id %q, from %+v", i, g.V, g.ID, g.From)
			}
			if w.actorKind == token && w.status == ok && (g.Actor.Name != "console-token" || g.Actor.Role != "admin") {
				t.Errorf("record %d: actor %+v, want console-token, admin", i, g.Actor)
			}
		})
	}
	// The session signed in is the one signed out.
	if got[2].Object.ID != got[len(got)-1].Object.ID {
		t.Errorf("signed in session %q, signed out %q", got[2].Object.ID, got[len(got)-1].Object.ID)
	}
	// A diff: the update's name before and after; secrets hashed, their hashes there.
	if !strings.Contains(string(got[6].Before), `"name":"App"`) || !strings.Contains(string(got[6].After), `"name":"App 2"`) {
		t.Errorf("source.update: before %s, after %s", got[6].Before, got[6].After)
	}
	if dest := string(got[8].After); !strings.Contains(dest, `"sharedSecret":"`+schemas.HashSecret(sharedSecret)+`"`) ||
		!strings.Contains(dest, `"Authorization":"`+schemas.HashSecret(headerValue)+`"`) {
		t.Errorf("destination.create: %s, want the secret and the header hashed", dest)
	}
	secrets = append(secrets, sharedSecret, headerValue, "audit-header-token-0123456789", plainSecret, subject, replayUser, testToken)
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the audit topic holds the secret %q", s)
		}
	}
}

// TestAuditAPIAndExport: GET /v1/audit answers the view's window newest first, filtered and
// paged; GET /v1/audit/export streams every record of a range as JSON lines, from the topic,
// those older than the window included; bad filters are 400.
func TestAuditAPIAndExport(t *testing.T) {
	h := newHarness(t, func(c *console.Config) { c.AuditWindow = 3 })
	start := time.Now().Truncate(time.Millisecond) // after the harness's config file's records
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		expect(t, h.do(http.MethodPost, "/v1/sources", map[string]any{"id": id, "name": id}), http.StatusCreated)
	}
	expect(t, h.do(http.MethodPatch, "/v1/sources/a1", map[string]any{"name": "A one"}), http.StatusOK)
	type page struct {
		Data []schemas.AuditRecord `json:"data"`
		Next string                `json:"nextCursor"`
	}
	list := func(query string) page {
		t.Helper()
		r := h.do(http.MethodGet, "/v1/audit"+query, nil)
		expect(t, r, http.StatusOK)
		var p page
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ids := func(recs []schemas.AuditRecord) string {
		var s []string
		for _, r := range recs {
			s = append(s, r.Action+":"+r.Object.ID)
		}
		return strings.Join(s, " ")
	}
	var p page
	servicetest.Eventually(t, 10*time.Second, "the update in the view", func() bool {
		p = list("")
		return len(p.Data) > 0 && p.Data[0].Action == "source.update"
	})
	if got, want := ids(p.Data), "source.update:a1 source.create:a5 source.create:a4"; got != want || p.Next != "" {
		t.Errorf("the window: %s (next %q), want %s", got, p.Next, want)
	}
	if got := ids(list("?action=source.create").Data); got != "source.create:a5 source.create:a4" {
		t.Errorf("action=source.create: %s", got)
	}
	if got := ids(list("?action=source.&kind=source&id=a1").Data); got != "source.update:a1" {
		t.Errorf("action=source.&id=a1: %s", got)
	}
	first := list("?limit=2")
	if ids(first.Data) != "source.update:a1 source.create:a5" || first.Next == "" {
		t.Fatalf("limit=2: %s next %q", ids(first.Data), first.Next)
	}
	if got := ids(list("?limit=2&cursor=" + first.Next).Data); got != "source.create:a4" {
		t.Errorf("the second page: %s", got)
	}
	if got := list("?actor=someone@example.com").Data; len(got) != 0 {
		t.Errorf("actor=someone: %s", ids(got))
	}
	if got := list("?until=" + url.QueryEscape(schemas.FormatTimestamp(start))).Data; len(got) != 0 {
		t.Errorf("until start: %s, want none (older than the window)", ids(got))
	}
	expectError(t, h.do(http.MethodGet, "/v1/audit?since=yesterday", nil), http.StatusBadRequest, "invalid",
		`since: not an RFC 3339 time (2026-01-02T15:04:05Z) nor a date (2026-01-02): "yesterday"`, "since")
	expectError(t, h.do(http.MethodGet, "/v1/audit?cursor=x", nil), http.StatusBadRequest, "invalid", `cursor: not a cursor of this API: "x"`, "cursor")

	// The export: all six, oldest first, from the topic.
	r := h.do(http.MethodGet, "/v1/audit/export?since="+url.QueryEscape(schemas.FormatTimestamp(start)), nil)
	expect(t, r, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/jsonl") {
		t.Errorf("Content-Type %q", ct)
	}
	var lines []schemas.AuditRecord
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		a, err := schemas.DecodeAuditRecord(sc.Bytes())
		if err != nil {
			t.Fatalf("an export line: %v: %s", err, sc.Bytes())
		}
		lines = append(lines, a)
	}
	if got, want := ids(lines), "source.create:a1 source.create:a2 source.create:a3 source.create:a4 source.create:a5 source.update:a1"; got != want {
		t.Errorf("export: %s, want %s", got, want)
	}
	r = h.do(http.MethodGet, "/v1/audit/export?action=source.update", nil)
	if expect(t, r, http.StatusOK); strings.Count(string(r.Body), "\n") != 1 {
		t.Errorf("export action=source.update: %s", r.Body)
	}
	// Before start: the harness's config file, applied by tributary-init.
	r = h.do(http.MethodGet, "/v1/audit/export?until="+url.QueryEscape(schemas.FormatTimestamp(start)), nil)
	if expect(t, r, http.StatusOK); strings.Count(string(r.Body), "\n") != 2 || strings.Count(string(r.Body), `"kind":"tributary-init"`) != 2 {
		t.Errorf("export until start: %s, want the config file's two records", r.Body)
	}
	r = h.do(http.MethodGet, "/v1/audit/export?until=2000-01-01", nil)
	if expect(t, r, http.StatusOK); len(r.Body) != 0 {
		t.Errorf("export until before every record: %s", r.Body)
	}
	expectError(t, h.do(http.MethodGet, "/v1/audit/export?since=2026-01-02&until=2026-01-01", nil), http.StatusBadRequest, "invalid", "until: must be after since", "until")
}

// TestUIAuditPage: the audit page lists the records with their filters, the diff of an update
// and the export link; the filters narrow it.
func TestUIAuditPage(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	expect(t, h.do(http.MethodPost, "/v1/sources", map[string]any{"id": "app", "name": "App"}), http.StatusCreated)
	expect(t, h.do(http.MethodPatch, "/v1/sources/app", map[string]any{"name": "App renamed"}), http.StatusOK)
	servicetest.Eventually(t, 10*time.Second, "the update on the page", func() bool {
		return strings.Contains(b.get("/audit").Body, "<code>source.update</code>")
	})
	p := b.get("/audit")
	p.contains(t, http.StatusOK, "Audit trail", "session.sign-in", "source.create", "console-token", `name="action"`,
		`href="/audit/export`, "App renamed", `href="/audit"`)
	p = b.get("/audit?action=source.create")
	p.contains(t, http.StatusOK, "source.create")
	if strings.Contains(p.Body, "<code>source.update</code>") || strings.Contains(p.Body, "<code>session.sign-in</code>") {
		t.Errorf("action=source.create still lists other actions")
	}
	b.get("/audit?since=nope").contains(t, http.StatusBadRequest, "since: not an RFC 3339 time")
}

// TestAuditWriteFailureIsLoggedAndCounted: when Kafka does not take an audit record, the change
// it records stays made and answered, and the record is not lost silently: it is logged in full
// (its secrets hashed) and counted in tributary_console_audit_write_failures_total.
func TestAuditWriteFailureIsLoggedAndCounted(t *testing.T) {
	// The audit topic deleted under the console: every audit write fails.
	h := newHarness(t, nil)
	if _, err := kadm.NewClient(h.env.Client).DeleteTopics(h.env.Ctx, schemas.TopicAudit); err != nil {
		t.Fatal(err)
	}
	const secret = "failed-audit-secret-0123456789"
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "hooks", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": "https://h.example.com/"}}, "sharedSecret": secret}}), http.StatusCreated)
	if _, ok := h.env.Store.Snapshot().DestinationByID("hooks"); !ok {
		t.Fatal("the change was not made")
	}
	if n := counterValue(t, h, "tributary_console_audit_write_failures_total", ""); n != 1 {
		t.Errorf("tributary_console_audit_write_failures_total = %v, want 1", n)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, `"audit record not written"`) || !strings.Contains(logs, `"action":"destination.create"`) ||
		!strings.Contains(logs, schemas.HashSecret(secret)) {
		t.Errorf("the failed record is not in the log:\n%s", logs)
	}
	h.secretsNowhere(t, []string{secret})
}

// TestAuditLargeObject: the update of an object near the record limit, whose before and after
// do not fit one record together, is recorded with their sizes and digests instead.
func TestAuditLargeObject(t *testing.T) {
	h := newHarness(t, nil)
	big := strings.Repeat("a", 600_000)
	plan := func(desc string) map[string]any {
		return map[string]any{"id": "big", "name": "Big", "rules": map[string]any{"events": []any{
			map[string]any{"name": "Order Completed", "properties": map[string]any{"type": "object", "description": desc}}}}}
	}
	expect(t, h.do(http.MethodPost, "/v1/tracking-plans", plan(big)), http.StatusCreated)
	expect(t, h.do(http.MethodPatch, "/v1/tracking-plans/big", map[string]any{"name": "Bigger"}), http.StatusOK)
	got, _ := auditRecords(t, h, 4) // the config file's two, the create, the update
	if len(got) != 4 || got[3].Action != "tracking-plan.update" {
		t.Fatalf("%d records: %+v", len(got), got)
	}
	if u := got[3]; !strings.Contains(string(u.Before), `"omitted":"too large for an audit record"`) || !strings.Contains(string(u.After), `"sha256":"sha256:`) {
		t.Errorf("the update: before %.200s, after %.200s", u.Before, u.After)
	}
	if c := got[2]; !strings.Contains(string(c.After), big) {
		t.Errorf("the create (it fits): after %.200s", c.After)
	}
}

// TestAuditPeopleAndTokens: a single sign-on and its refusal, a user added, changed and removed,
// an API token created and revoked, and a change made with that token are recorded with their
// actors: a person (user), the token (api-token); the token's secret and its hash are not in
// the topic.
func TestAuditPeopleAndTokens(t *testing.T) {
	h, p := newOIDCHarness(t, nil)
	if _, page := oidcSignIn(t, h, "/"); page.Status != http.StatusOK {
		t.Fatalf("single sign-on: %d %s", page.Status, page.Body)
	}
	p.SetUser(oidctest.User{Subject: "u2", Email: "eve@example.com", EmailVerified: &verified, Groups: []string{"strangers"}})
	if _, page := oidcSignIn(t, h, "/"); page.Status != http.StatusForbidden {
		t.Fatalf("a stranger's sign-on: %d", page.Status)
	}
	expect(t, h.do(http.MethodPut, "/v1/users/bob@example.com", map[string]any{"role": "editor"}), http.StatusCreated)
	expect(t, h.do(http.MethodPut, "/v1/users/bob@example.com", map[string]any{"role": "viewer"}), http.StatusOK)
	expect(t, h.do(http.MethodDelete, "/v1/users/bob@example.com", nil), http.StatusNoContent)
	id, secret := newToken(t, h, "ci", "editor", false)
	expect(t, h.doAs(secret, http.MethodPost, "/v1/sources", map[string]any{"id": "by-ci", "name": "By CI"}), http.StatusCreated)
	expect(t, h.doAs(secret, http.MethodGet, "/v1/audit", nil), http.StatusForbidden)
	expect(t, h.do(http.MethodDelete, "/v1/tokens/"+id, nil), http.StatusNoContent)

	got, raw := auditRecords(t, h, 11)
	var rows []string
	for _, g := range got[2:] { // after the config file's two
		rows = append(rows, g.Action+" "+g.Object.Kind+"/"+g.Object.ID+" by "+g.Actor.Name+" ("+g.Actor.Kind+", "+g.Actor.Role+") "+g.Result.Status)
	}
	want := []string{
		"session.sign-in session/" + got[2].Object.ID + " by ada@example.com (user, editor) ok",
		"session.sign-in-refused session/ by unknown (user, ) refused",
		"user.create user/bob@example.com by console-token (console-token, admin) ok",
		"user.update user/bob@example.com by console-token (console-token, admin) ok",
		"user.delete user/bob@example.com by console-token (console-token, admin) ok",
		"token.create token/" + id + " by console-token (console-token, admin) ok",
		"source.create source/by-ci by ci (api-token, editor) ok",
		"access.forbidden request/GET /v1/audit by ci (api-token, editor) refused",
		"token.revoke token/" + id + " by console-token (console-token, admin) ok",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(got[3].Result.Reason, "eve@example.com is not a user of this console") {
		t.Errorf("the refusal's reason: %q", got[3].Result.Reason)
	}
	if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte(schemas.HashAPITokenSecret(secret))) {
		t.Error("the audit topic holds the token's secret or its hash")
	}
}
