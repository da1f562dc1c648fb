package devstack_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// The console (admin API) on the whole stack of `make run`: the embedded broker, ingest, the
// real router and deliverer, and webhook receivers on loopback. Every object is made through
// the API, nothing through a config file (docs/console.md).

// consoleTestToken is the CONSOLE_TOKEN of these tests.
const consoleTestToken = "ct_devstack-console-test-0123456789"

// consoleStack is a running stack and what a test needs to talk to it.
type consoleStack struct {
	st      *devstack.Stack
	dataDir string
	env     map[string]string
	api     string // http://CONSOLE_ADDR
	ingest  string // http://INGEST_ADDR
	stop    func()
}

// startConsoleStack runs the whole stack on dataDir (a new one when empty) with the settings
// of make run read from env as its variables (devstack.ConfigFromEnviron): free loopback
// ports, CONSOLE_TOKEN, WEBHOOK_ALLOW_PRIVATE, a short RETRY_SCHEDULE; extra overrides them.
// It returns once the console's views have caught up (its /readyz).
func startConsoleStack(t *testing.T, dataDir string, extra map[string]string) *consoleStack {
	t.Helper()
	return startConsoleStackLogged(t, dataDir, extra, nil)
}

// startConsoleStackLogged is startConsoleStack whose logs, at info level and above, also go
// to logs (when not nil).
func startConsoleStackLogged(t *testing.T, dataDir string, extra map[string]string, logs io.Writer) *consoleStack {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	env := map[string]string{
		"DATA_DIR":              dataDir,
		"EMBEDDED_KAFKA_PORT":   "0",
		"KAFKA_BROKERS":         "",
		"INGEST_ADDR":           servicetest.FreeAddr(t),
		"CONSOLE_ADDR":          servicetest.FreeAddr(t),
		"AUDIENCES_ADDR":        "127.0.0.1:0", // a port picked now could be the embedded broker's by the time audiences listens
		"CONSOLE_TOKEN":         consoleTestToken,
		"WEBHOOK_ALLOW_PRIVATE": "true",
		"RETRY_SCHEDULE":        "1s",
		"SHUTDOWN_TIMEOUT":      "5s",
	}
	for k, v := range extra {
		env[k] = v
	}
	cfg, err := devstack.ConfigFromEnviron(env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if logs != nil {
		logger = zerolog.New(zerolog.MultiLevelWriter(logs, zerolog.NewTestWriter(t))).Level(zerolog.InfoLevel)
	}
	st, err := devstack.New(ctx, cfg, logger)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if tok, generated := st.ConsoleToken(); tok != consoleTestToken || generated {
		t.Fatalf("console token %q (generated %v), want CONSOLE_TOKEN", tok, generated)
	}
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stack: %v", err)
		}
		st.Close()
	}
	t.Cleanup(stop)
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cs := &consoleStack{st: st, dataDir: dataDir, env: env, api: "http://" + st.ConsoleAddr(), ingest: "http://" + st.IngestAddr(), stop: stop}
	if st.ConsoleAddr() != env["CONSOLE_ADDR"] || st.IngestAddr() != env["INGEST_ADDR"] {
		t.Fatalf("console on %s, ingest on %s: want CONSOLE_ADDR %s and INGEST_ADDR %s", st.ConsoleAddr(), st.IngestAddr(), env["CONSOLE_ADDR"], env["INGEST_ADDR"])
	}
	servicetest.WaitReady(t, cs.api+"/readyz", 20*time.Second)
	return cs
}

// call sends a request to the console's API with the bearer token; header is pairs of names
// and values.
func (cs *consoleStack) call(t *testing.T, method, path, body string, header ...string) servicetest.Answer {
	t.Helper()
	return servicetest.Call(t, method, cs.api+path, body, append([]string{"Authorization", servicetest.Bearer(consoleTestToken)}, header...)...)
}

// must is call that fails the test unless the answer has status want; it decodes the body
// into out (when not nil).
func (cs *consoleStack) must(t *testing.T, want int, out any, method, path, body string, header ...string) servicetest.Answer {
	t.Helper()
	a := cs.call(t, method, path, body, header...)
	if a.Status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, a.Status, a.Body, want)
	}
	if out != nil {
		if err := json.Unmarshal(a.Body, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, a.Body)
		}
	}
	return a
}

// send posts a Segment call to ingest with writeKey and returns the status.
func (cs *consoleStack) send(t *testing.T, writeKey, path, body string) int {
	t.Helper()
	a := servicetest.Call(t, http.MethodPost, cs.ingest+path, body, "Authorization", servicetest.Basic(writeKey))
	if a.Status == http.StatusOK && !bytes.Contains(a.Body, []byte(`"success":true`)) {
		t.Fatalf("%s: 200 %s", path, a.Body)
	}
	return a.Status
}

// mustSend is send that fails the test unless ingest accepted the call.
func (cs *consoleStack) mustSend(t *testing.T, writeKey, path, body string) {
	t.Helper()
	if st := cs.send(t, writeKey, path, body); st != http.StatusOK {
		t.Fatalf("ingest %s: %d, want 200", path, st)
	}
}

// createSource creates a source through the API and returns its write key (shown once).
func (cs *consoleStack) createSource(t *testing.T, id string) string {
	t.Helper()
	var out struct {
		Data map[string]any `json:"data"`
	}
	cs.must(t, http.StatusCreated, &out, http.MethodPost, "/v1/sources", `{"id":"`+id+`","name":"Source `+id+`"}`)
	key, _ := out.Data["writeKey"].(string)
	if !strings.HasPrefix(key, "wk_") || out.Data["id"] != id || out.Data["origin"] != "console" {
		t.Fatalf("POST /v1/sources: %v: want the source with a generated writeKey, origin console", out.Data)
	}
	return key
}

// createDestination creates an enabled webhooks destination of sources, posting to urls,
// signed with secret; it returns its ETag.
func (cs *consoleStack) createDestination(t *testing.T, id, secret string, sources []string, urls ...string) string {
	t.Helper()
	hooks := make([]map[string]any, len(urls))
	for i, u := range urls {
		hooks[i] = map[string]any{"url": u, "headers": map[string]string{"X-Team": "console-test"}}
	}
	body, _ := json.Marshal(map[string]any{"id": id, "type": "webhooks", "name": "Hooks " + id, "sources": sources,
		"settings": map[string]any{"webhooks": hooks, "sharedSecret": secret}})
	var out struct {
		Data map[string]any `json:"data"`
	}
	a := cs.must(t, http.StatusCreated, &out, http.MethodPost, "/v1/destinations", string(body))
	st, _ := out.Data["settings"].(map[string]any)
	if out.Data["enabled"] != true || st["hasSharedSecret"] != true || st["sharedSecret"] != nil || bytes.Contains(a.Body, []byte(secret)) {
		t.Fatalf("POST /v1/destinations: %s: want it enabled, hasSharedSecret and no secret", a.Body)
	}
	if a.Header.Get("ETag") == "" {
		t.Fatal("POST /v1/destinations: no ETag")
	}
	return a.Header.Get("ETag")
}

// xSignature is the X-Signature of body under secret: hex HMAC-SHA1 (docs/receivers.md).
func xSignature(secret string, body []byte) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// messageIDs are the X-Message-Id of reqs.
func messageIDs(reqs []servicetest.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Header.Get("X-Message-Id")
	}
	return out
}

// TestConsoleDestinationLifecycle: a destination created through the API receives the next
// event within 1 s, signed with the secret given to the API; disabled (PATCH with If-Match)
// it receives nothing more; a rotated write key is accepted beside the old one during the
// overlap, and the old one is refused at once after a rotation with overlap 0s.
func TestConsoleDestinationLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := servicetest.NewReceiver(t, nil)
	cs := startConsoleStack(t, "", nil)

	key := cs.createSource(t, "web")
	const secret = "console-lifecycle-secret"
	tag := cs.createDestination(t, "hooks", secret, []string{"web"}, rc.URL+"/segment")

	sent := time.Now()
	cs.mustSend(t, key, "/v1/track", `{"userId":"u1","event":"Signed Up","messageId":"lc-1"}`)
	reqs := rc.WaitRequests(t, 1, 10*time.Second)
	took := reqs[0].At.Sub(sent)
	t.Logf("event → receiver through the API-created destination: %v", took)
	if took > time.Second {
		t.Errorf("the first event reached the API-created destination %v after it was sent, want within 1s", took)
	}
	r := reqs[0]
	if r.Header.Get("X-Message-Id") != "lc-1" || r.Path != "/segment" || r.Header.Get("X-Team") != "console-test" {
		t.Errorf("webhook %s %v", r.Path, r.Header)
	}
	if got, want := r.Header.Get("X-Signature"), xSignature(secret, r.Body); got != want {
		t.Errorf("X-Signature %q, want hex HMAC-SHA1 %q of the body under the secret", got, want)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || body["event"] != "Signed Up" || body["userId"] != "u1" || body["type"] != "track" {
		t.Errorf("webhook body %s (%v)", r.Body, err)
	}

	// A stale version is refused; the current one (the ETag) disables the destination.
	a := cs.call(t, http.MethodPatch, "/v1/destinations/hooks", `{"enabled":false}`, "If-Match", `"1"`)
	if a.Status != http.StatusConflict || !bytes.Contains(a.Body, []byte(`"version_mismatch"`)) {
		t.Errorf("PATCH with a stale If-Match: %d %s, want 409 version_mismatch", a.Status, a.Body)
	}
	var got struct {
		Data map[string]any `json:"data"`
	}
	cs.must(t, http.StatusOK, nil, http.MethodGet, "/v1/destinations/hooks", "")
	a = cs.must(t, http.StatusOK, &got, http.MethodPatch, "/v1/destinations/hooks", `{"enabled":false}`, "If-Match", tag)
	if got.Data["enabled"] != false || a.Header.Get("ETag") == tag {
		t.Fatalf("PATCH enabled:false: %s (ETag %s, was %s)", a.Body, a.Header.Get("ETag"), tag)
	}
	disabledAt := time.Now()
	for i := range 3 {
		cs.mustSend(t, key, "/v1/track", fmt.Sprintf(`{"userId":"u1","event":"Ignored","messageId":"off-%d"}`, i))
	}

	// While the disabled destination is watched: rotations of the write key.
	// (Each answer is decoded into a new value: json.Unmarshal adds to a map it is given.)
	var rot struct {
		Data map[string]any `json:"data"`
	}
	cs.must(t, http.StatusOK, &rot, http.MethodPost, "/v1/sources/web/rotate-key", `{"overlap":"1h"}`)
	key2, _ := rot.Data["writeKey"].(string)
	if !strings.HasPrefix(key2, "wk_") || key2 == key || rot.Data["previousWriteKeyExpiresAt"] == nil {
		t.Fatalf("rotate-key with overlap 1h: %v", rot.Data)
	}
	if st := cs.send(t, key, "/v1/identify", `{"userId":"u1","messageId":"old-key"}`); st != http.StatusOK {
		t.Errorf("the old write key during the overlap: %d, want 200", st)
	}
	if st := cs.send(t, key2, "/v1/identify", `{"userId":"u1","messageId":"new-key"}`); st != http.StatusOK {
		t.Errorf("the new write key: %d, want 200", st)
	}
	var rot0 struct {
		Data map[string]any `json:"data"`
	}
	cs.must(t, http.StatusOK, &rot0, http.MethodPost, "/v1/sources/web/rotate-key", `{"overlap":"0s"}`)
	key3, _ := rot0.Data["writeKey"].(string)
	if !strings.HasPrefix(key3, "wk_") || key3 == key2 || rot0.Data["previousWriteKeyExpiresAt"] != nil {
		t.Fatalf("rotate-key with overlap 0s: %v", rot0.Data)
	}
	for _, old := range []string{key, key2} {
		if st := cs.send(t, old, "/v1/identify", `{"userId":"u1"}`); st != http.StatusUnauthorized {
			t.Errorf("a replaced write key after a rotation with overlap 0s: %d, want 401", st)
		}
	}
	if st := cs.send(t, key3, "/v1/identify", `{"userId":"u1","messageId":"newest-key"}`); st != http.StatusOK {
		t.Errorf("the newest write key: %d, want 200", st)
	}

	time.Sleep(time.Until(disabledAt.Add(2 * time.Second)))
	if got := rc.Requests(); len(got) != 1 {
		t.Fatalf("the disabled destination received %d more webhooks: %v", len(got)-1, messageIDs(got[1:]))
	}

	// Enabled again, it receives the next event (and none of those sent while disabled).
	cs.must(t, http.StatusOK, nil, http.MethodPatch, "/v1/destinations/hooks", `{"enabled":true}`)
	cs.mustSend(t, key3, "/v1/track", `{"userId":"u1","event":"Back","messageId":"lc-back"}`)
	rc.WaitRequests(t, 2, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if ids := messageIDs(rc.Requests()); !slices.Equal(ids, []string{"lc-1", "lc-back"}) {
		t.Errorf("webhooks %v, want lc-1 then lc-back only", ids)
	}
}

// regulationView is GET /v1/regulations/{id}'s data.
type regulationView struct {
	ID                string   `json:"id"`
	RegulationType    string   `json:"regulationType"`
	SubjectIDs        []string `json:"subjectIds"`
	OverallStatus     string   `json:"overallStatus"`
	FinishedAt        string   `json:"finishedAt"`
	SubjectsTotal     int      `json:"subjectsTotal"`
	SubjectsProcessed int      `json:"subjectsProcessed"`
	NoticesSent       int      `json:"noticesSent"`
	Stores            map[string]struct {
		Expected         bool             `json:"expected"`
		SubjectsReported int              `json:"subjectsReported"`
		Counts           map[string]int64 `json:"counts"`
	} `json:"stores"`
}

// TestConsoleRegulation: a DELETE_ONLY regulation of user u1 makes the router send one signed
// `delete` notice per source to the destination both sources share, and the regulation
// becomes FINISHED, once the router and audiences reported, with noticesSent 2; 5001 subject ids are refused naming subjectIds.
func TestConsoleRegulation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := servicetest.NewReceiver(t, nil)
	cs := startConsoleStack(t, "", nil)
	cs.createSource(t, "web")
	cs.createSource(t, "ios")
	const secret = "console-regulation-secret"
	cs.createDestination(t, "hooks", secret, []string{"web", "ios"}, rc.URL+"/segment")

	var created struct {
		Data struct {
			RegulateID string `json:"regulateId"`
		} `json:"data"`
	}
	start := time.Now()
	cs.must(t, http.StatusOK, &created, http.MethodPost, "/v1/regulations", `{"regulationType":"DELETE_ONLY","subjectType":"USER_ID","subjectIds":["u1"]}`)
	id := created.Data.RegulateID
	if id == "" {
		t.Fatal("POST /v1/regulations: no regulateId")
	}
	var reg struct {
		Data regulationView `json:"data"`
	}
	servicetest.Eventually(t, 10*time.Second, "the regulation FINISHED", func() bool {
		reg.Data = regulationView{}
		cs.must(t, http.StatusOK, &reg, http.MethodGet, "/v1/regulations/"+id, "")
		return reg.Data.OverallStatus == "FINISHED"
	})
	t.Logf("regulation FINISHED %v after it was created", time.Since(start))
	if v := reg.Data; v.ID != id || v.RegulationType != "DELETE_ONLY" || !slices.Equal(v.SubjectIDs, []string{"u1"}) ||
		v.SubjectsTotal != 1 || v.SubjectsProcessed != 1 || v.NoticesSent != 2 || v.FinishedAt == "" {
		t.Errorf("regulation %+v: want 1 subject processed, 2 notices sent, finishedAt", v)
	}
	// FINISHED once the router and audiences (the default CONSOLE_REGULATION_STORES) reported.
	if r, a := reg.Data.Stores["router"], reg.Data.Stores["audiences"]; !r.Expected || r.SubjectsReported != 1 || r.Counts["notices"] != 2 ||
		!a.Expected || a.SubjectsReported != 1 {
		t.Errorf("stores %+v: want the router's and audiences' reports", reg.Data.Stores)
	}
	rc.WaitRequests(t, 2, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // nothing more comes
	reqs := rc.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d delete notices %v, want 2 (one per source)", len(reqs), messageIDs(reqs))
	}
	ids := messageIDs(reqs)
	slices.Sort(ids)
	if want := []string{"delete-" + id + "-ios", "delete-" + id + "-web"}; !slices.Equal(ids, want) {
		t.Errorf("delete notices %v, want %v", ids, want)
	}
	for _, r := range reqs {
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil || m["type"] != "delete" || m["userId"] != "u1" {
			t.Errorf("delete notice body %s (%v)", r.Body, err)
		}
		if r.Header.Get("X-Signature") != xSignature(secret, r.Body) {
			t.Errorf("delete notice not signed with the secret: %v", r.Header)
		}
	}
	var list struct {
		Data []regulationView `json:"data"`
	}
	cs.must(t, http.StatusOK, &list, http.MethodGet, "/v1/regulations", "")
	if len(list.Data) != 1 || list.Data[0].ID != id || list.Data[0].OverallStatus != "FINISHED" {
		t.Errorf("GET /v1/regulations: %+v", list.Data)
	}

	subjects := make([]string, 5001)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("user-%d", i)
	}
	b, _ := json.Marshal(map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": subjects})
	var bad struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	}
	cs.must(t, http.StatusBadRequest, &bad, http.MethodPost, "/v1/regulations", string(b))
	if bad.Code != "invalid" || bad.Field != "subjectIds" {
		t.Errorf("5001 subject ids: %+v, want invalid, field subjectIds", bad)
	}
}

// attemptView is one attempt of the delivery log.
type attemptView struct {
	ID            string  `json:"id"`
	At            string  `json:"at"`
	DestinationID string  `json:"destinationId"`
	MessageID     string  `json:"messageId"`
	URL           string  `json:"url"`
	Attempt       int     `json:"attempt"`
	Status        int     `json:"status"`
	LatencyMs     float64 `json:"latencyMs"`
	ErrorClass    string  `json:"errorClass"`
	Test          bool    `json:"test"`
}

// statsView is GET /v1/destinations/{id}/stats's data.
type statsView struct {
	Attempts    uint64            `json:"attempts"`
	Successes   uint64            `json:"successes"`
	Failures    map[string]uint64 `json:"failures"`
	SuccessRate *float64          `json:"successRate"`
	LatencyMs   struct {
		P50 *float64 `json:"p50"`
		P99 *float64 `json:"p99"`
	} `json:"latencyMs"`
	Series []struct {
		At        string `json:"at"`
		Attempts  uint64 `json:"attempts"`
		Successes uint64 `json:"successes"`
		Failures  uint64 `json:"failures"`
	} `json:"series"`
}

// latency is the p50 and p99 latencies as text ("<nil>" when there is none).
func (s statsView) latency() string {
	f := func(p *float64) string {
		if p == nil {
			return "<nil>"
		}
		return fmt.Sprint(*p)
	}
	return f(s.LatencyMs.P50) + "/" + f(s.LatencyMs.P99)
}

// deadLetterView is one dead letter of GET /v1/destinations/{id}/dlq.
type deadLetterView struct {
	MessageID  string `json:"messageId"`
	Reason     string `json:"reason"`
	LastStatus string `json:"lastStatus"`
	Attempts   int    `json:"attempts"`
	ReplayedAt string `json:"replayedAt"`
}

type dlqPage struct {
	Data  []deadLetterView `json:"data"`
	Total int              `json:"total"`
}

// dlq is GET /v1/destinations/{id}/dlq (with query).
func (cs *consoleStack) dlq(t *testing.T, id, query string) dlqPage {
	t.Helper()
	var page dlqPage
	cs.must(t, http.StatusOK, &page, http.MethodGet, "/v1/destinations/"+id+"/dlq"+query, "")
	return page
}

// attempts is every attempt of destination id in the log (at most 1000), newest first.
func (cs *consoleStack) attempts(t *testing.T, id, query string) []attemptView {
	t.Helper()
	var page struct {
		Data []attemptView `json:"data"`
	}
	cs.must(t, http.StatusOK, &page, http.MethodGet, "/v1/destinations/"+id+"/attempts?limit=1000"+query, "")
	return page.Data
}

func (cs *consoleStack) stats(t *testing.T, id string) statsView {
	t.Helper()
	var out struct {
		Data statsView `json:"data"`
	}
	cs.must(t, http.StatusOK, &out, http.MethodGet, "/v1/destinations/"+id+"/stats?window=1h", "")
	return out.Data
}

// checkStats fails unless s counts attempts, successes and failures (by class) as log does,
// and its series adds up to its totals.
func checkStats(t *testing.T, s statsView, log []attemptView) {
	t.Helper()
	var ok uint64
	fails := map[string]uint64{}
	for _, a := range log {
		if a.ErrorClass == "ok" {
			ok++
		} else {
			fails[a.ErrorClass]++
		}
	}
	var sa, ss, sf, tf uint64
	for _, p := range s.Series {
		sa, ss, sf = sa+p.Attempts, ss+p.Successes, sf+p.Failures
	}
	for _, n := range s.Failures {
		tf += n
	}
	switch {
	case s.Attempts != uint64(len(log)) || s.Successes != ok || !mapsEqual(s.Failures, fails):
		t.Errorf("stats: %d attempts, %d successes, failures %v; the log: %d, %d, %v", s.Attempts, s.Successes, s.Failures, len(log), ok, fails)
	case sa != s.Attempts || ss != s.Successes || sf != tf || s.Successes+tf != s.Attempts:
		t.Errorf("stats: the series (%d attempts, %d successes, %d failures) does not add up to the totals %+v", sa, ss, sf, s)
	case s.Attempts > 0 && (s.SuccessRate == nil || *s.SuccessRate != float64(int(float64(ok)/float64(len(log))*10000+0.5))/10000):
		t.Errorf("stats: success rate %v for %d of %d", s.SuccessRate, ok, len(log))
	case s.Attempts > 0 && (s.LatencyMs.P50 == nil || s.LatencyMs.P99 == nil || *s.LatencyMs.P50 > *s.LatencyMs.P99):
		t.Errorf("stats: latency %+v", s.LatencyMs)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestConsoleDeliveryLogDLQAndReplay: a failing endpoint's attempts show in the delivery log
// (per destination and per message, attempt numbers increasing), its messages in the DLQ
// once RETRY_WINDOW has passed; a replay delivers them once the endpoint recovered, the log
// then shows the successes and the stats count all consistently; a dead letter replayed
// again to another URL arrives there, signed.
func TestConsoleDeliveryLogDLQAndReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	var failing atomic.Bool
	failing.Store(true)
	rc := servicetest.NewReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	other := servicetest.NewReceiver(t, nil)
	// Attempts at 0, 1 s and 2 s; the next would start past the window: dead-lettered.
	cs := startConsoleStack(t, "", map[string]string{"RETRY_SCHEDULE": "1s,1s,1s,1s", "RETRY_WINDOW": "3s"})
	key := cs.createSource(t, "web")
	const secret = "console-dlq-secret"
	cs.createDestination(t, "hooks", secret, []string{"web"}, rc.URL+"/segment")

	ids := []string{"dlq-1", "dlq-2", "dlq-3"}
	start := time.Now()
	cs.mustSend(t, key, "/v1/batch", `{"batch":[`+
		`{"type":"track","userId":"u1","event":"A","messageId":"dlq-1"},`+
		`{"type":"track","userId":"u2","event":"B","messageId":"dlq-2"},`+
		`{"type":"track","userId":"u3","event":"C","messageId":"dlq-3"}]}`)

	var log []attemptView
	servicetest.Eventually(t, 10*time.Second, "failed attempts of the 3 messages in the log", func() bool {
		log = cs.attempts(t, "hooks", "&status=failure")
		seen := map[string]bool{}
		for _, a := range log {
			seen[a.MessageID] = true
		}
		return len(seen) == 3
	})
	for _, a := range log {
		if a.Status != 500 || a.ErrorClass != "status_5xx" || a.DestinationID != "hooks" || !slices.Contains(ids, a.MessageID) || a.URL != rc.URL+"/segment" {
			t.Errorf("failed attempt %+v", a)
		}
	}

	var page dlqPage
	servicetest.Eventually(t, 15*time.Second, "the 3 messages in the DLQ", func() bool {
		page = cs.dlq(t, "hooks", "")
		return page.Total == 3
	})
	t.Logf("the 3 messages were in the DLQ %v after they were sent", time.Since(start))
	failures := 0
	for _, d := range page.Data {
		var per struct {
			Data []attemptView `json:"data"`
		}
		// The dead letter may be read before the log has read its last attempt.
		servicetest.Eventually(t, 5*time.Second, "every attempt of "+d.MessageID+" in the log", func() bool {
			per.Data = nil
			cs.must(t, http.StatusOK, &per, http.MethodGet, "/v1/messages/"+d.MessageID+"/attempts", "")
			return len(per.Data) >= d.Attempts
		})
		if len(per.Data) < 2 || len(per.Data) != d.Attempts {
			t.Errorf("message %s: %d attempts in the log, %d in its dead letter, want the same, at least 2", d.MessageID, len(per.Data), d.Attempts)
		}
		for i, a := range per.Data {
			if a.Attempt != i+1 || a.Status != 500 || a.MessageID != d.MessageID {
				t.Errorf("message %s: attempt %d: %+v, want attempt number %d, status 500", d.MessageID, i, a, i+1)
			}
		}
		failures += len(per.Data)
		if d.Reason != "retry_window_expired" || d.LastStatus != "500" || d.ReplayedAt != "" {
			t.Errorf("dead letter %+v: want reason retry_window_expired, last status 500", d)
		}
	}
	if got := messageIDsOf(page.Data); !slices.Equal(got, ids) {
		t.Errorf("dead letters %v, want %v", got, ids)
	}
	if n := len(rc.Requests()); n != failures {
		t.Errorf("the receiver got %d requests, the log shows %d attempts", n, failures)
	}

	// The endpoint recovers: the replay delivers the 3.
	failing.Store(false)
	var replay struct {
		Data struct {
			Replayed   int      `json:"replayed"`
			MessageIDs []string `json:"messageIds"`
		} `json:"data"`
	}
	cs.must(t, http.StatusOK, &replay, http.MethodPost, "/v1/destinations/hooks/dlq/replay", `{}`)
	if got := slices.Sorted(slices.Values(replay.Data.MessageIDs)); replay.Data.Replayed != 3 || !slices.Equal(got, ids) {
		t.Fatalf("replay: %+v, want the 3 replayed", replay.Data)
	}
	reqs := rc.WaitRequests(t, failures+3, 10*time.Second)
	replayed := messageIDs(reqs[failures:])
	slices.Sort(replayed)
	if !slices.Equal(replayed, ids) {
		t.Errorf("after the replay the receiver got %v, want %v", replayed, ids)
	}
	for _, r := range reqs[failures:] {
		if r.Header.Get("X-Signature") != xSignature(secret, r.Body) {
			t.Errorf("replayed webhook not signed with the secret: %v", r.Header)
		}
	}
	servicetest.Eventually(t, 10*time.Second, "the 3 successful attempts in the log", func() bool {
		return len(cs.attempts(t, "hooks", "&status=success")) == 3
	})
	for _, a := range cs.attempts(t, "hooks", "&status=success") {
		if a.Status != 200 || a.ErrorClass != "ok" || a.Attempt != 1 || !slices.Contains(ids, a.MessageID) {
			t.Errorf("successful attempt %+v", a)
		}
	}
	if page := cs.dlq(t, "hooks", ""); page.Total != 0 {
		t.Errorf("DLQ after the replay: %+v, want nothing left to replay", page)
	}
	if page := cs.dlq(t, "hooks", "?replayed=true"); page.Total != 3 || len(page.Data) != 3 || page.Data[0].ReplayedAt == "" || page.Data[2].ReplayedAt == "" {
		t.Errorf("DLQ with replayed=true: %+v, want the 3 with replayedAt", page)
	}

	// A dead letter replayed again, to another URL.
	var again struct {
		Data struct {
			Replayed   int      `json:"replayed"`
			MessageIDs []string `json:"messageIds"`
		} `json:"data"`
	}
	cs.must(t, http.StatusOK, &again, http.MethodPost, "/v1/destinations/hooks/dlq/replay", `{"messageIds":["dlq-2"],"url":"`+other.URL+`/elsewhere"}`)
	if again.Data.Replayed != 1 || !slices.Equal(again.Data.MessageIDs, []string{"dlq-2"}) {
		t.Fatalf("replay to another URL: %+v", again.Data)
	}
	o := other.WaitRequests(t, 1, 10*time.Second)[0]
	if o.Path != "/elsewhere" || o.Header.Get("X-Message-Id") != "dlq-2" || o.Header.Get("X-Signature") != xSignature(secret, o.Body) {
		t.Errorf("replay to another URL: %s %v", o.Path, o.Header)
	}
	servicetest.Eventually(t, 10*time.Second, "the attempt at the other URL in the log", func() bool {
		return len(cs.attempts(t, "hooks", "")) == failures+4
	})
	if a := cs.attempts(t, "hooks", "")[0]; a.URL != other.URL+"/elsewhere" || a.MessageID != "dlq-2" || a.Status != 200 {
		t.Errorf("newest attempt %+v, want dlq-2's at the other URL", a)
	}
	if n := len(rc.Requests()); n != failures+3 {
		t.Errorf("the destination's own URL got %d requests, want %d", n, failures+3)
	}

	all := cs.attempts(t, "hooks", "")
	s := cs.stats(t, "hooks")
	checkStats(t, s, all)
	if s.Attempts != uint64(failures+4) || s.Successes != 4 || s.Failures["status_5xx"] != uint64(failures) {
		t.Errorf("stats %+v: want %d attempts, 4 successes, %d status_5xx", s, failures+4, failures)
	}
}

func messageIDsOf(dls []deadLetterView) []string {
	out := make([]string, len(dls))
	for i, d := range dls {
		out[i] = d.MessageID
	}
	slices.Sort(out)
	return out
}

// sseEvent is one event of a Server-Sent Events stream.
type sseEvent struct {
	name string
	data []byte
	at   time.Time
}

// openLive opens the source's live stream and returns its events as they come; it returns
// once the console sent the stream's first comment (the watcher is registered).
func (cs *consoleStack) openLive(t *testing.T, source string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cs.api+"/v1/sources/"+source+"/events/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("live events: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	ch := make(chan sseEvent, 64)
	first := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		once := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if !once {
					once = true
					close(first)
				}
				if ev.name != "" {
					ev.at = time.Now()
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = append(ev.data, strings.TrimPrefix(line, "data: ")...)
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-stopped })
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("the live stream sent nothing within 5s")
	}
	return ch
}

// liveEventView is the data of a live event and an entry of the recent events.
type liveEventView struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Type      string          `json:"type"`
	MessageID string          `json:"messageId"`
	Reason    string          `json:"reason"`
	Message   json.RawMessage `json:"message"`
}

// nextLive waits for the stream's next event of name whose message id is id.
func nextLive(t *testing.T, ch <-chan sseEvent, name, id string) (liveEventView, time.Time) {
	t.Helper()
	return nextLiveFunc(t, ch, name, id, func(v liveEventView) bool { return v.MessageID == id })
}

// nextLiveFunc waits for the stream's next event of name (any: "") that match accepts; what
// names it in messages. The SSE event name must be the data's status.
func nextLiveFunc(t *testing.T, ch <-chan sseEvent, name, what string, match func(liveEventView) bool) (liveEventView, time.Time) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the live stream ended before the %s event of %s", name, what)
			}
			var v liveEventView
			if err := json.Unmarshal(ev.data, &v); err != nil {
				t.Fatalf("live event data %s: %v", ev.data, err)
			}
			if (name == "" || ev.name == name) && ev.name == v.Status && match(v) {
				return v, ev.at
			}
			t.Logf("live event %s %s", ev.name, ev.data)
		case <-timeout:
			t.Fatalf("no live %s event of %s within 10s", name, what)
		}
	}
}

// TestConsoleLiveEvents: the source debugger's live stream shows an accepted event within 1 s
// of the call, and a message ingest rejected with its reason; the recent events list both.
func TestConsoleLiveEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	cs := startConsoleStack(t, "", nil)
	key := cs.createSource(t, "web")
	live := cs.openLive(t, "web")

	sent := time.Now()
	cs.mustSend(t, key, "/v1/track", `{"userId":"u1","event":"Watched","messageId":"live-1"}`)
	v, at := nextLive(t, live, "accepted", "live-1")
	took := at.Sub(sent)
	t.Logf("call → live stream: %v", took)
	if took > time.Second {
		t.Errorf("the accepted event showed on the live stream %v after the call, want within 1s", took)
	}
	var m map[string]any
	if err := json.Unmarshal(v.Message, &m); err != nil || v.Status != "accepted" || v.Type != "track" || m["event"] != "Watched" || m["userId"] != "u1" {
		t.Errorf("live accepted event %+v (%s)", v, v.Message)
	}

	// A batch with one message that has no event name: ingest takes the rest and writes that
	// one to tracking.rejected, with the reason.
	cs.mustSend(t, key, "/v1/batch", `{"batch":[{"type":"track","userId":"u1","event":"Fine","messageId":"live-2"},{"type":"track","userId":"u1","messageId":"live-bad"}]}`)
	// The two topics are read apart: either may come first.
	var bad liveEventView
	var sawGood bool
	for !sawGood || bad.Status == "" {
		v, _ := nextLiveFunc(t, live, "", "live-2 and live-bad", func(v liveEventView) bool {
			return v.Status == "accepted" && v.MessageID == "live-2" || v.Status == "rejected" && bytes.Contains(v.Message, []byte(`"live-bad"`))
		})
		if v.Status == "accepted" {
			sawGood = true
		} else {
			bad = v
		}
	}
	if bad.Status != "rejected" || bad.Reason == "" || !bytes.Contains(bad.Message, []byte(`"live-bad"`)) || bytes.Contains(bad.Message, []byte(key)) {
		t.Errorf("live rejected event %+v (%s): want the reason and the message as sent", bad, bad.Message)
	}
	t.Logf("rejection reason: %q", bad.Reason)

	// Newest first: live-1 last; the other two were read from two topics, in either order.
	if got, want := cs.recent(t, "web"), []string{"accepted:live-2", "rejected:live-bad:" + bad.Reason}; len(got) != 3 || got[2] != "accepted:live-1" || !sameSet(got[:2], want) {
		t.Errorf("recent events %v, want %v, then accepted:live-1", got, want)
	}
	if a := cs.call(t, http.MethodGet, "/v1/sources/nope/events/recent", ""); a.Status != http.StatusNotFound {
		t.Errorf("recent events of an unknown source: %d %s", a.Status, a.Body)
	}
}

// recent is the source's recent events, newest first, each as status:messageId (and :reason
// when it has one). A rejected record carries no message-id header: its id is read from the
// message.
func (cs *consoleStack) recent(t *testing.T, source string) []string {
	t.Helper()
	var out struct {
		Data []liveEventView `json:"data"`
	}
	cs.must(t, http.StatusOK, &out, http.MethodGet, "/v1/sources/"+source+"/events/recent", "")
	var got []string
	for _, e := range out.Data {
		id := e.MessageID
		if id == "" {
			var m struct {
				MessageID string `json:"messageId"`
			}
			_ = json.Unmarshal(e.Message, &m)
			id = m.MessageID
		}
		s := e.Status + ":" + id
		if e.Reason != "" {
			s += ":" + e.Reason
		}
		got = append(got, s)
	}
	return got
}

// attemptKey is an attempt without its id (the log numbers attempts as it reads them).
func attemptKey(a attemptView) string {
	return fmt.Sprintf("%s %s %s #%d %d %s %.3f %v", a.At, a.MessageID, a.URL, a.Attempt, a.Status, a.ErrorClass, a.LatencyMs, a.Test)
}

// TestConsoleRestartKeepsLogAndStats: a stack started again on the same DATA_DIR (the console
// reads webhooks.attempts of the stats window again) answers the same delivery log, stats,
// DLQ and recent events as before.
func TestConsoleRestartKeepsLogAndStats(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := servicetest.NewReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if r.Header.Get("X-Message-Id") == "rs-fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	// RETRY_WINDOW 1s: the failed message is dead-lettered after its first attempt.
	env := map[string]string{"RETRY_WINDOW": "1s"}
	cs := startConsoleStack(t, "", env)
	key := cs.createSource(t, "web")
	cs.createDestination(t, "hooks", "console-restart-secret", []string{"web"}, rc.URL+"/segment")
	cs.mustSend(t, key, "/v1/batch", `{"batch":[`+
		`{"type":"track","userId":"u1","event":"A","messageId":"rs-1"},`+
		`{"type":"identify","userId":"u2","messageId":"rs-2"},`+
		`{"type":"track","userId":"u3","event":"C","messageId":"rs-fail"}]}`)
	servicetest.Eventually(t, 10*time.Second, "3 attempts in the log and rs-fail in the DLQ", func() bool {
		return len(cs.attempts(t, "hooks", "")) == 3 && cs.dlq(t, "hooks", "").Total == 1
	})
	before := cs.attempts(t, "hooks", "")
	beforeStats := cs.stats(t, "hooks")
	checkStats(t, beforeStats, before)
	if beforeStats.Attempts != 3 || beforeStats.Successes != 2 || beforeStats.Failures["status_5xx"] != 1 {
		t.Fatalf("stats before the restart %+v", beforeStats)
	}
	var beforeMsg, afterMsg struct {
		Data []attemptView `json:"data"`
	}
	cs.must(t, http.StatusOK, &beforeMsg, http.MethodGet, "/v1/messages/rs-fail/attempts", "")
	recentBefore := cs.recent(t, "web")

	stopAt := time.Now()
	cs.stop()
	cs = startConsoleStack(t, cs.dataDir, env)
	t.Logf("stack stopped and started again (console ready) in %v", time.Since(stopAt))

	after := cs.attempts(t, "hooks", "")
	keys := func(as []attemptView) []string {
		out := make([]string, len(as))
		for i, a := range as {
			out[i] = attemptKey(a)
		}
		slices.Sort(out)
		return out
	}
	if b, a := keys(before), keys(after); !slices.Equal(b, a) {
		t.Errorf("the delivery log after the restart:\n%s\nbefore:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	afterStats := cs.stats(t, "hooks")
	checkStats(t, afterStats, after)
	if afterStats.Attempts != beforeStats.Attempts || afterStats.Successes != beforeStats.Successes || !mapsEqual(afterStats.Failures, beforeStats.Failures) ||
		afterStats.latency() != beforeStats.latency() {
		t.Errorf("stats after the restart %+v (latency %s), before %+v (latency %s)", afterStats, afterStats.latency(), beforeStats, beforeStats.latency())
	}
	cs.must(t, http.StatusOK, &afterMsg, http.MethodGet, "/v1/messages/rs-fail/attempts", "")
	if len(afterMsg.Data) != 1 || len(beforeMsg.Data) != 1 || attemptKey(afterMsg.Data[0]) != attemptKey(beforeMsg.Data[0]) {
		t.Errorf("rs-fail's attempts after the restart %+v, before %+v", afterMsg.Data, beforeMsg.Data)
	}
	if page := cs.dlq(t, "hooks", ""); page.Total != 1 || page.Data[0].MessageID != "rs-fail" || page.Data[0].LastStatus != "503" {
		t.Errorf("DLQ after the restart %+v", page)
	}
	if after := cs.recent(t, "web"); !sameSet(after, recentBefore) || len(recentBefore) != 3 {
		t.Errorf("recent events: %v after the restart, %v before, want the 3 sent", after, recentBefore)
	}
	// Nothing was delivered twice by the restart.
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.Requests()); n != 3 {
		t.Errorf("the receiver got %d requests, want 3", n)
	}
}

// TestConsoleDestinationTest: the event tester posts a sample track to every URL of the
// destination and answers what each said; the attempts show in the log with test:true, and
// nothing is retried nor dead-lettered.
func TestConsoleDestinationTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	good := servicetest.NewReceiver(t, nil)
	bad := servicetest.NewReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	cs := startConsoleStack(t, "", map[string]string{"RETRY_WINDOW": "2s"})
	cs.createSource(t, "web")
	const secret = "console-tester-secret"
	cs.createDestination(t, "hooks", secret, []string{"web"}, good.URL+"/ok", bad.URL+"/fail")

	var out struct {
		Data struct {
			MessageID string `json:"messageId"`
			Type      string `json:"type"`
			Results   []struct {
				URL        string `json:"url"`
				Status     int    `json:"status"`
				ErrorClass string `json:"errorClass"`
			} `json:"results"`
		} `json:"data"`
	}
	start := time.Now()
	cs.must(t, http.StatusOK, &out, http.MethodPost, "/v1/destinations/hooks/test", `{"type":"track"}`)
	t.Logf("destination test answered in %v", time.Since(start))
	d := out.Data
	if d.Type != "track" || d.MessageID == "" || len(d.Results) != 2 {
		t.Fatalf("test answer %+v", d)
	}
	if r := d.Results[0]; r.URL != good.URL+"/ok" || r.Status != 200 || r.ErrorClass != "ok" {
		t.Errorf("result of the good URL %+v", r)
	}
	if r := d.Results[1]; r.URL != bad.URL+"/fail" || r.Status != 500 || r.ErrorClass != "status_5xx" {
		t.Errorf("result of the failing URL %+v", r)
	}
	for _, rc := range []*servicetest.Receiver{good, bad} {
		r := rc.WaitRequests(t, 1, 5*time.Second)[0]
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil || m["type"] != "track" || r.Header.Get("X-Message-Id") != d.MessageID ||
			r.Header.Get("X-Signature") != xSignature(secret, r.Body) {
			t.Errorf("test webhook %v %s (%v)", r.Header, r.Body, err)
		}
	}
	log := cs.attempts(t, "hooks", "")
	if len(log) != 2 {
		t.Fatalf("log %+v, want the 2 test attempts", log)
	}
	for _, a := range log {
		if !a.Test || a.MessageID != d.MessageID || a.Attempt != 1 {
			t.Errorf("test attempt %+v: want test:true", a)
		}
	}

	// Past RETRY_WINDOW: the failed URL was neither retried nor dead-lettered.
	time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
	if page := cs.dlq(t, "hooks", ""); page.Total != 0 {
		t.Errorf("DLQ after a test %+v, want empty", page)
	}
	if n, m := len(good.Requests()), len(bad.Requests()); n != 1 || m != 1 {
		t.Errorf("receivers got %d and %d requests, want 1 each (no retry)", n, m)
	}
	if n := len(cs.attempts(t, "hooks", "")); n != 2 {
		t.Errorf("%d attempts in the log, want 2", n)
	}
}
