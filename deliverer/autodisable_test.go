package deliverer_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// syncBuffer is a log sink the deliverer writes from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// runLogged runs a deliverer of h whose log goes to the returned buffer.
func (h *harness) runLogged(cfg deliverer.Config) *syncBuffer {
	h.t.Helper()
	logs := &syncBuffer{}
	svc, err := deliverer.New(cfg, deliverer.Deps{
		Deps: platform.Deps{Kafka: h.kafka, KafkaOpts: h.env.KafkaOpts, Logger: zerolog.New(logs).Level(zerolog.InfoLevel),
			Registerer: prometheus.NewRegistry()},
		Config: func() deliverer.Destinations { return h.store.Snapshot() }, ConfigReady: h.store.Ready(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.env.Start("deliverer", svc.Run)
	return logs
}

// noticesOf reads the notices of tributary.notices.
func noticesOf(t *testing.T, recs []*kgo.Record) []schemas.Notice {
	t.Helper()
	var out []schemas.Notice
	for _, r := range recs {
		n, err := schemas.ParseNotice(r.Value)
		if err != nil {
			t.Fatalf("tributary.notices record %q: %v", r.Value, err)
		}
		out = append(out, n)
	}
	return out
}

// TestAutoDisableNoticesParksAndRecovers (docs/delivery.md#auto-disable): a destination with
// autoDisable {after: 3s} whose endpoint fails every attempt gets a notice at 50 %, 90 % and
// 100 % of the budget — a log line, a tributary.notices record and a POST to the operator
// webhook signed with OPERATOR_WEBHOOK_SECRET — and is disabled at 100 % (enabled: false and
// autoDisabled in tributary.config). Its messages, those failing then and those routed while
// it is disabled, are parked on webhooks.parked, none dead-lettered; enabled again by the config
// file, they are all delivered in order, then the new ones.
func TestAutoDisableNoticesParksAndRecovers(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	var delivered []string
	hook := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		delivered = append(delivered, r.Header.Get("X-Message-Id"))
		mu.Unlock()
	})
	op := newReceiver(t, nil)
	yaml := func(extra string) string {
		return destYAML(dest("crm", []string{hook.URL + "/hook"}, ", autoDisable: {after: 3s}"+extra))
	}
	h := newHarness(t, "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s", yaml(""))
	cfg := h.config()
	cfg.RetryWindow = time.Hour
	cfg.MaxPerHost = 1 // one POST at a time: the order they are sent in is the order they arrive in
	cfg.AutoDisable.OperatorWebhookURL = op.URL + "/ops"
	cfg.AutoDisable.OperatorWebhookSecret = "ops-secret"
	logs := h.runLogged(cfg)

	start := time.Now()
	h.env.Produce(userRecords("crm", "u1", messageIDs(0, 5)...)...)

	notices := noticesOf(t, h.reader(schemas.TopicNotices).waitFor(3, 15*time.Second))
	for i, want := range []struct {
		typ     string
		percent int
	}{{schemas.NoticeDestinationFailing, 50}, {schemas.NoticeDestinationFailing, 90}, {schemas.NoticeDestinationDisabled, 100}} {
		n := notices[i]
		if n.Type != want.typ || n.Percent != want.percent || n.DestinationID != "crm" || n.After != "3s" {
			t.Fatalf("notice %d = %+v, want %s at %d %% of 3s for crm", i, n, want.typ, want.percent)
		}
	}
	since, _ := schemas.ParseTimestamp(notices[0].FailingSince)
	for i, pct := range []int{50, 90, 100} {
		at, _ := schemas.ParseTimestamp(notices[i].At)
		if due := since.Add(3 * time.Second * time.Duration(pct) / 100); at.Before(due) || at.After(due.Add(time.Second)) {
			t.Errorf("notice at %d %% made at %s, want within a second after %s", pct, at, due)
		}
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("disabled %s after the first failure, before the budget of 3s", took)
	}
	// The operator webhook got the same three notices, signed.
	posts := op.waitRequests(t, 3, 10*time.Second)
	for i, p := range posts[:3] {
		if got, want := p.header.Get(schemas.HeaderXSignature), schemas.XSignature("ops-secret", p.body); got != want {
			t.Errorf("operator POST %d: X-Signature %q, want %q", i, got, want)
		}
		n, err := schemas.ParseNotice(p.body)
		if err != nil || n.ID != notices[i].ID {
			t.Errorf("operator POST %d: %s (%v), want notice %s", i, p.body, err, notices[i].ID)
		}
	}
	for _, want := range []string{`"percent":50`, `"percent":90`, `"percent":100`, "destination auto-disabled"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log has no %q:\n%s", want, logs.String())
		}
	}
	// Disabled in tributary.config, by auto-disable.
	snap, err := h.store.WaitFor(h.ctx, func(s *platform.Snapshot) bool {
		d, ok := s.DestinationByID("crm")
		return ok && d.IsAutoDisabled()
	})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := snap.DestinationByID("crm")
	if d.AutoDisabled.FailingSince != notices[0].FailingSince || time.Duration(d.AutoDisabled.After) != 3*time.Second {
		t.Errorf("autoDisabled = %+v, want failingSince %s, after 3s", d.AutoDisabled, notices[0].FailingSince)
	}

	// The failing messages are parked once they come due (or their endpoint's breaker would
	// let them through), then those routed while it is disabled.
	parkedReader := h.reader(schemas.TopicParked)
	parkedReader.waitFor(5, 15*time.Second)
	h.env.Produce(userRecords("crm", "u1", messageIDs(5, 10)...)...)
	parked := parkedReader.waitFor(10, 15*time.Second)
	if len(parked) != 10 {
		t.Fatalf("%d parked, want 10", len(parked))
	}
	for _, r := range parked {
		if hdr(r, schemas.HeaderReason) != "destination_auto_disabled" {
			t.Errorf("parked %s with reason %q", hdr(r, schemas.HeaderMessageID), hdr(r, schemas.HeaderReason))
		}
	}

	// Enabled again by the config file: the parked messages in order, then new ones.
	failing.Store(false)
	h.apply(yaml(""))
	waitUntil(t, 15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(delivered) >= 10 })
	h.env.Produce(userRecords("crm", "u1", messageIDs(10, 12)...)...)
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		n := len(delivered)
		mu.Unlock()
		if n >= 12 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	got := append([]string(nil), delivered...)
	mu.Unlock()
	// In the order they were parked: the messages failing at the disable in the order they
	// came due from their tier (a retry may reorder them, docs/delivery.md#auto-disable), then
	// those routed meanwhile; then the new ones.
	var want []string
	for _, r := range parked {
		want = append(want, hdr(r, schemas.HeaderMessageID))
	}
	want = append(want, messageIDs(10, 12)...)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("delivered %v, want %v: the parked messages in order, then the new ones", got, want)
	}
	if strings.Join(want[5:10], ",") != strings.Join(messageIDs(5, 10), ",") {
		t.Errorf("parked %v, want m5…m9 in the order they were routed after m0…m4", want[:10])
	}
	if n := h.reader(schemas.TopicDLQ).Poll(); n != 0 {
		t.Errorf("%d dead-lettered, want none", n)
	}
	if snap := h.store.Snapshot(); true {
		d, _ := snap.DestinationByID("crm")
		if !d.IsEnabled() || d.AutoDisabled != nil {
			t.Errorf("crm after re-enabling: enabled %v, autoDisabled %+v", d.IsEnabled(), d.AutoDisabled)
		}
	}
}

// TestAutoDisableBudgetRestartsAfterADelivery (docs/delivery.md#auto-disable): a message
// delivered in between ends the run of failures: the budget starts again at the next failure,
// so the destination is not disabled 3 s after its first failure.
func TestAutoDisableBudgetRestartsAfterADelivery(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	hook := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if failing.Load() && r.Header.Get("X-Message-Id") != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	h := newHarness(t, "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s", destYAML(dest("crm", []string{hook.URL + "/hook"}, ", autoDisable: {after: 3s}")))
	cfg := h.config()
	cfg.RetryWindow = time.Hour
	cfg.BreakerFailures = 1000
	h.runLogged(cfg)
	h.env.Produce(userRecords("crm", "u1", "m0")...)
	notices := h.reader(schemas.TopicNotices)
	first := noticesOf(t, notices.waitFor(1, 10*time.Second))[0]
	firstSince, _ := schemas.ParseTimestamp(first.FailingSince)
	// A delivery at about 60 % of the budget.
	h.env.Produce(userRecords("crm", "u2", "ok")...)
	waitUntil(t, 5*time.Second, func() bool {
		for _, r := range hook.requests() {
			if r.header.Get("X-Message-Id") == "ok" {
				return true
			}
		}
		return false
	})
	okAt := time.Now()
	time.Sleep(time.Until(firstSince.Add(3500 * time.Millisecond))) // past the first run's 100 %
	notices.Poll()
	for _, n := range noticesOf(t, notices.Got) {
		since, _ := schemas.ParseTimestamp(n.FailingSince)
		if n.FailingSince == first.FailingSince && n.Percent == 100 {
			t.Fatalf("disabled at the first run's budget, though a message was delivered at %s: %+v", okAt, n)
		}
		if n.FailingSince != first.FailingSince && since.Before(okAt.Add(-time.Second)) {
			t.Errorf("a new run of failures starts at %s, before the delivery at %s", n.FailingSince, okAt)
		}
	}
	if d, _ := h.store.Snapshot().DestinationByID("crm"); !d.IsEnabled() {
		t.Fatalf("crm disabled 3s after its first failure, though a message was delivered meanwhile")
	}
}

// waitUntil polls cond until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after %s", timeout)
		}
	}
}

// TestAutoDisableTwoDeliverers (docs/delivery.md#auto-disable): two deliverers share a failing
// destination's partitions; one notice per threshold and one disable are made (the owner of
// partition 0 first, the other only for what it has not seen), every message is parked by
// whichever deliverer holds it, none is dead-lettered, and all are delivered once it is enabled
// again.
func TestAutoDisableTwoDeliverers(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	delivered := map[string]int{}
	hook := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		delivered[r.Header.Get("X-Message-Id")]++
		mu.Unlock()
	})
	yaml := destYAML(dest("crm", []string{hook.URL + "/hook"}, ", autoDisable: {after: 3s}"))
	h := newHarness(t, "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s", yaml)
	cfg := h.config()
	cfg.RetryWindow = time.Hour
	cfg.BreakerFailures = 1000
	h.runLogged(cfg)
	h.runLogged(cfg)
	ids := messageIDs(0, 40) // one user each: spread over every partition, so over both deliverers
	h.send("crm", ids...)

	h.store.WaitFor(h.ctx, func(s *platform.Snapshot) bool { d, ok := s.DestinationByID("crm"); return ok && d.IsAutoDisabled() })
	time.Sleep(2 * time.Second) // time for a second notice or disable, if one were made
	notices := h.reader(schemas.TopicNotices)
	notices.Poll()
	var pcts []int
	for _, n := range noticesOf(t, notices.Got) {
		pcts = append(pcts, n.Percent)
	}
	if got := strings.Join(strings.Fields(fmtInts(pcts)), ","); got != "50,90,100" {
		t.Errorf("notices at %v %%, want one at each of 50, 90, 100", pcts)
	}
	writes := 0
	cr := h.reader(schemas.TopicConfig)
	cr.Poll()
	for _, r := range cr.Got {
		if string(r.Key) == schemas.ConfigKeyDestination+"crm" && strings.Contains(string(r.Value), `"autoDisabled"`) {
			writes++
		}
	}
	if writes != 1 {
		t.Errorf("crm written auto-disabled %d times, want once", writes)
	}
	h.reader(schemas.TopicParked).waitFor(len(ids), 15*time.Second)

	failing.Store(false)
	h.apply(yaml)
	waitUntil(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(delivered) == len(ids) })
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if delivered[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, delivered[id])
		}
	}
	if n := h.reader(schemas.TopicDLQ).Poll(); n != 0 {
		t.Errorf("%d dead-lettered, want none", n)
	}
}

func fmtInts(v []int) string {
	var b strings.Builder
	for _, n := range v {
		b.WriteString(strconv.Itoa(n) + " ")
	}
	return b.String()
}

// TestAutoDisableKeepsAConcurrentEdit (docs/console.md#more-than-one-console): a deliverer whose
// config is behind (it has not seen an edit of the destination made while it was failing)
// disables the destination as the last committed write left it: the edit is kept, not
// replaced by the deliverer's older copy.
func TestAutoDisableKeepsAConcurrentEdit(t *testing.T) {
	hook := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	yaml := destYAML(dest("crm", []string{hook.URL + "/hook"}, ", autoDisable: {after: 3s}"))
	h := newHarness(t, "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s", yaml)
	cfg := h.config()
	cfg.RetryWindow = time.Hour
	cfg.BreakerFailures = 1000
	stale := h.store.Snapshot() // the deliverer never sees the edit below
	svc, err := deliverer.New(cfg, deliverer.Deps{
		Deps:   platform.Deps{Kafka: h.kafka, KafkaOpts: h.env.KafkaOpts, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry()},
		Config: func() deliverer.Destinations { return stale }, ConfigReady: h.store.Ready(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.env.Start("deliverer", svc.Run)
	h.env.Produce(userRecords("crm", "u1", "m0")...)
	h.reader(schemas.TopicNotices).waitFor(1, 10*time.Second) // failing: the first notice
	h.apply(strings.Replace(yaml, "X-Team: growth", "X-Team: edited", 1))

	snap, err := h.store.WaitFor(h.ctx, func(s *platform.Snapshot) bool { d, ok := s.DestinationByID("crm"); return ok && d.IsAutoDisabled() })
	if err != nil {
		t.Fatal("crm was never auto-disabled")
	}
	d, _ := snap.DestinationByID("crm")
	if got := d.Settings.Webhooks[0].Headers["X-Team"]; got != "edited" || d.IsEnabled() {
		t.Errorf("crm after the auto-disable: X-Team %q, enabled %v; want the edit kept (edited), disabled", got, d.IsEnabled())
	}
}
