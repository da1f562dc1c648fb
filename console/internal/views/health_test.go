package views

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"testing"
	"time"
)

const (
	url1 = "https://one.example.com/hook"
	url2 = "https://two.example.com/hook"
)

// post is an attempt record's event: one POST of message msg, attempt n, to url.
func post(msg, url string, n int, class string, at time.Time) HealthEvent {
	e := HealthEvent{DestinationID: "d", MessageID: msg, URL: url, Attempt: n, Class: class, At: at}
	if class != SuccessClass {
		e.Error = class + ": failed"
	}
	return e
}

func filtered(msg, reason string, at time.Time) HealthEvent {
	return HealthEvent{DestinationID: "d", MessageID: msg, Class: FilteredClass, Reason: reason, At: at}
}

func deadLetterEvent(msg, reason string, at time.Time) HealthEvent {
	return HealthEvent{DestinationID: "d", MessageID: msg, DeadLettered: true, Reason: reason, At: at}
}

// TestHealthTwoURLsOneDead: URL 1 answers 200, URL 2 refuses connections, for every message:
// each message is delivered once (on its first attempt), the delivery rate is 1 and nothing is
// retrying, while URL 2's attempts all failed with its last error — the records of one attempt
// arriving in either order.
func TestHealthTwoURLsOneDead(t *testing.T) {
	h := NewHealth(24*time.Hour, 1000)
	var batch []HealthEvent
	for i := range 20 {
		at := t0.Add(time.Duration(i) * time.Second)
		ok, refused := post(fmt.Sprint("m", i), url1, 1, SuccessClass, at), post(fmt.Sprint("m", i), url2, 1, "connection", at)
		if i%2 == 0 {
			batch = append(batch, ok, refused)
		} else {
			batch = append(batch, refused, ok)
		}
	}
	h.Add(batch, nil)
	st := h.Stats("d", t0.Add(time.Minute), time.Hour)
	if st.Messages != (MessageCounts{Delivered: 20}) || st.DeliveryRate == nil || *st.DeliveryRate != 1 || st.DeliveredFirstAttempt != 20 {
		t.Fatalf("messages %+v, rate %v, first attempt %d: want 20 delivered on their first attempt, rate 1", st.Messages, st.DeliveryRate, st.DeliveredFirstAttempt)
	}
	if len(st.URLs) != 2 {
		t.Fatalf("urls %+v", st.URLs)
	}
	one, two := st.URLs[0], st.URLs[1]
	if one.URL != url1 || one.Attempts != 20 || one.Successes != 20 || len(one.Failures) != 0 || one.LastError != "" {
		t.Errorf("URL 1: %+v", one)
	}
	if two.URL != url2 || two.Attempts != 20 || two.Successes != 0 || two.Failures["connection"] != 20 || two.LastError != "connection: failed" ||
		two.LastErrorAt == nil || !two.LastErrorAt.Equal(t0.Add(19*time.Second)) {
		t.Errorf("URL 2: %+v", two)
	}
}

// TestHealthFunnel: a scripted mix — filtered by the integrations switches and the suppression
// list (and one the deliverer dropped unsent), delivered on the first attempt, delivered after
// a retry, retrying, dead-lettered after retries and at once — each message counted once in
// its stage, with its reason and sample ids; and a dead-lettered message replayed and
// delivered moves to "delivered after retries".
func TestHealthFunnel(t *testing.T) {
	h := NewHealth(24*time.Hour, 1000)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	h.Add([]HealthEvent{
		filtered("f1", "integrations_off", at(1)),
		filtered("f2", "integrations_off", at(2)),
		filtered("f3", "suppressed", at(3)),
		{DestinationID: "d", MessageID: "f4", Class: "suppressed", At: at(4)},
		post("ok1", url1, 1, SuccessClass, at(5)),
		post("ok2", url1, 1, SuccessClass, at(6)),
		post("ok2", url1, 1, SuccessClass, at(6)), // delivered twice (at least once): counted once
		post("re1", url1, 1, "status_5xx", at(7)),
		post("re1", url1, 2, SuccessClass, at(20)),
		post("wait1", url1, 1, "timeout", at(8)),
		post("wait2", url1, 1, "connection", at(9)),
		post("wait2", url1, 2, "status_5xx", at(21)),
		post("dead1", url1, 1, "status_5xx", at(10)),
		post("dead1", url1, 9, "status_5xx", at(30)),
		post("dead2", url1, 1, "status_4xx", at(11)),
		{DestinationID: "d", MessageID: "test", URL: url1, Attempt: 1, Class: "status_5xx", At: at(12), Test: true}, // counted nowhere
	}, nil)
	// The dead letters are read apart: one before its attempts' records, as after a restart.
	h.Add([]HealthEvent{deadLetterEvent("dead1", "retries_exhausted", at(31)), deadLetterEvent("dead2", "status_4xx", at(11)),
		deadLetterEvent("rep1", "retries_exhausted", at(12))}, nil)
	h.Add([]HealthEvent{post("dead1", url1, 5, "status_5xx", at(25))}, nil) // older than its dead letter: no change
	h.Add([]HealthEvent{post("rep1", url1, 1, SuccessClass, at(40))}, nil)  // replayed: attempt 1 again, delivered

	f := h.Funnel("d", t0.Add(time.Minute), time.Hour)
	got := map[string]uint64{"received": f.Received, "dropped": f.Dropped.Count, "first": f.DeliveredFirstAttempt.Count,
		"retried": f.DeliveredAfterRetries.Count, "retrying": f.Retrying.Count, "dead": f.DeadLettered.Count}
	want := map[string]uint64{"received": 12, "dropped": 4, "first": 2, "retried": 2, "retrying": 2, "dead": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("funnel %v, want %v", got, want)
	}
	reasons := func(st FunnelStage) string {
		var out []string
		for _, r := range st.Reasons {
			out = append(out, fmt.Sprintf("%s:%d:%v", r.Reason, r.Count, r.Samples))
		}
		return fmt.Sprint(out)
	}
	if r := reasons(f.Retrying); r != "[status_5xx:1:[wait2] timeout:1:[wait1]]" {
		t.Errorf("retrying reasons %s", r)
	}
	if r := reasons(f.DeadLettered); r != "[retries_exhausted:1:[dead1] status_4xx:1:[dead2]]" {
		t.Errorf("dead-lettered reasons %s (rep1, replayed and delivered, is no sample)", r)
	}
	// Filtered by the router (f3) and dropped unsent by the deliverer (f4) share the reason.
	if r := reasons(f.Dropped); r != "[integrations_off:2:[f2 f1] suppressed:2:[f3 f4]]" && r != "[integrations_off:2:[f2 f1] suppressed:2:[f4 f3]]" {
		t.Errorf("dropped reasons %s", r)
	}
	if len(f.DeliveredFirstAttempt.Reasons) != 0 {
		t.Errorf("delivered has reasons: %+v", f.DeliveredFirstAttempt)
	}
	st := h.Stats("d", t0.Add(time.Minute), time.Hour)
	if want := (MessageCounts{Delivered: 4, Retrying: 2, DeadLettered: 2, Filtered: 4}); st.Messages != want {
		t.Errorf("stats messages %+v, want %+v", st.Messages, want)
	}
	if st.DeliveryRate == nil || *st.DeliveryRate != 0.6667 {
		t.Errorf("delivery rate %v, want 4/6", st.DeliveryRate)
	}
	// Out of the window: nothing.
	if f := h.Funnel("d", t0.Add(2*time.Hour), time.Hour); f.Received != 0 || len(f.Dropped.Reasons) != 0 {
		t.Errorf("an hour later: %+v", f)
	}
	if f := h.Funnel("d", t0.Add(2*time.Hour), 24*time.Hour); f.Received != 12 {
		t.Errorf("an hour later, over 24 hours: received %d, want 12", f.Received)
	}
}

// TestHealthEndToEndLatency: the latency from acceptance to the 2xx, retries included, of the
// delivered messages whose acceptance time is known; one delivered twice counts once.
func TestHealthEndToEndLatency(t *testing.T) {
	h := NewHealth(24*time.Hour, 1000)
	var batch []HealthEvent
	for i := range 100 {
		e := post(fmt.Sprint("m", i), url1, 1, SuccessClass, t0.Add(time.Duration(i+1)*100*time.Millisecond))
		e.ReceivedAt = e.At.Add(-time.Duration(i+1) * 10 * time.Millisecond) // 10 ms … 1 s
		batch = append(batch, e, e)
	}
	batch = append(batch, post("unknown", url1, 1, SuccessClass, t0)) // no acceptance time: no latency
	h.Add(batch, nil)
	st := h.Stats("d", t0.Add(time.Minute), time.Hour)
	e2e := st.EndToEndMs
	if e2e.P50 == nil || e2e.P95 == nil || e2e.P99 == nil {
		t.Fatalf("latency %+v", e2e)
	}
	within := func(got *float64, want float64) bool { return *got > want*0.85 && *got < want*1.15 }
	if !within(e2e.P50, 500) || !within(e2e.P95, 950) || !within(e2e.P99, 990) {
		t.Errorf("p50 %v p95 %v p99 %v, want about 500, 950, 990 ms", *e2e.P50, *e2e.P95, *e2e.P99)
	}
	if st.Messages.Delivered != 101 {
		t.Errorf("delivered %d, want 101", st.Messages.Delivered)
	}
	if empty := h.Stats("other", t0, time.Hour); empty.EndToEndMs.P50 != nil || empty.DeliveryRate != nil || len(empty.URLs) != 0 {
		t.Errorf("no message: %+v", empty)
	}
}

// TestHealthBounded: past maxMessages the finished messages' states are forgotten first (their
// counters stay), then the oldest open ones; Forget drops a message's state and samples;
// Prune a destination.
func TestHealthBounded(t *testing.T) {
	h := NewHealth(time.Hour, 3)
	h.Add([]HealthEvent{post("wait", url1, 1, "timeout", t0), post("a", url1, 1, SuccessClass, t0), post("b", url1, 1, SuccessClass, t0),
		post("c", url1, 1, SuccessClass, t0)}, nil)
	if n := h.Tracked(); n != 3 {
		t.Fatalf("%d states, want 3", n)
	}
	h.Add([]HealthEvent{post("wait", url1, 2, SuccessClass, t0.Add(time.Second))}, nil)
	st := h.Stats("d", t0, time.Hour)
	if st.Messages.Retrying != 0 || st.Messages.Delivered != 4 || st.DeliveredAfterRetries != 1 {
		t.Fatalf("the retrying message's state was forgotten before the delivered ones': %+v", st)
	}
	h.Add([]HealthEvent{post("x", url1, 1, "timeout", t0), post("y", url1, 1, "timeout", t0)}, nil)
	if f := h.Funnel("d", t0, time.Hour); !slices.Equal(f.Retrying.Reasons[0].Samples, []string{"y", "x"}) {
		t.Fatalf("samples %+v", f.Retrying.Reasons)
	}
	h.Forget([]string{"y"})
	if f := h.Funnel("d", t0, time.Hour); f.Retrying.Count != 2 || !slices.Equal(f.Retrying.Reasons[0].Samples, []string{"x"}) {
		t.Errorf("after forgetting y: %+v (the counters stay, the ids go)", f.Retrying)
	}
	h.Prune(func(string) bool { return false })
	if h.Tracked() != 0 || h.Funnel("d", t0, time.Hour).Received != 0 {
		t.Error("prune left something")
	}
}

// TestHealthForgottenSkipped: the events of a forgotten message are not counted.
func TestHealthForgottenSkipped(t *testing.T) {
	h := NewHealth(time.Hour, 10)
	if n := h.Add([]HealthEvent{post("gone", url1, 1, SuccessClass, t0), post("m", url1, 1, SuccessClass, t0)},
		func(id string) bool { return id == "gone" }); n != 1 {
		t.Fatalf("skipped %d", n)
	}
	if st := h.Stats("d", t0, time.Hour); st.Messages.Delivered != 1 {
		t.Errorf("delivered %d, want 1", st.Messages.Delivered)
	}
}

// TestHealthStatesReused: the slots of forgotten states and the numbers of pruned destinations
// are used again without mixing messages up: one message id in two destinations has a state
// in each; a destination made after a prune (taking the pruned one's number) starts empty;
// and a message retried then delivered in a reused slot is delivered after retries.
func TestHealthStatesReused(t *testing.T) {
	h := NewHealth(time.Hour, 4)
	in := func(dest string, e HealthEvent) HealthEvent { e.DestinationID = dest; return e }
	h.Add([]HealthEvent{in("a", post("m", url1, 1, "timeout", t0)), in("b", post("m", url1, 1, SuccessClass, t0))}, nil)
	if st := h.Stats("a", t0, time.Hour); st.Messages.Retrying != 1 || st.Messages.Delivered != 0 {
		t.Fatalf("a: %+v", st.Messages)
	}
	h.Prune(func(dest string) bool { return dest != "a" })
	if n := h.Tracked(); n != 1 {
		t.Fatalf("%d states after the prune, want b's 1", n)
	}
	// c takes a's number: m is new there (delivered on its first attempt, not after a's retry).
	h.Add([]HealthEvent{in("c", post("m", url1, 1, SuccessClass, t0))}, nil)
	if st := h.Stats("c", t0, time.Hour); st.DeliveredFirstAttempt != 1 || st.DeliveredAfterRetries != 0 {
		t.Fatalf("c: %+v", st)
	}
	for i := range 10 { // through the bound: slots freed and taken again
		h.Add([]HealthEvent{in("b", post(fmt.Sprint("x", i), url1, 1, "timeout", t0))}, nil)
	}
	h.Forget([]string{"x9"})
	h.Add([]HealthEvent{in("b", post("x8", url1, 2, SuccessClass, t0.Add(time.Second))), in("b", post("x9", url1, 1, SuccessClass, t0.Add(time.Second)))}, nil)
	st := h.Stats("b", t0, time.Hour)
	if h.Tracked() != 4 || st.Messages.Delivered != 3 || st.DeliveredAfterRetries != 1 || st.Messages.Retrying != 9 {
		t.Errorf("%d states; b: %+v (first %d, after retries %d)", h.Tracked(), st.Messages, st.DeliveredFirstAttempt, st.DeliveredAfterRetries)
	}
}

// reportGC times full collections of a heap that holds view (filled by the caller), and
// reports the heap bytes the last one scanned and the live heap's objects and bytes after one: what the garbage collector marks on
// every cycle while the view is kept (docs/benchmarks.md#the-views-and-the-garbage-collector).
func reportGC(b *testing.B, view any) {
	runtime.GC()
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
	}
	b.StopTimer()
	scanned := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(scanned)
	b.ReportMetric(float64(scanned[0].Value.Uint64())/(1<<20), "scanned-MiB")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapObjects), "heap-objects")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	runtime.KeepAlive(view)
}

// BenchmarkHealthFilled: a full collection while the health view holds its default bound
// (100,000 message states over 20 destinations, a day of minutes, two URLs each), 1 message
// in 10 delivered after a retry and 1 in 20 still retrying; ns/op is one runtime.GC().
//
//	go test -run '^$' -bench 'HealthFilled|MessagesFilled' -benchtime 20x -count 3 ./console/internal/views/
func BenchmarkHealthFilled(b *testing.B) {
	const states, dests = 100_000, 20
	h := NewHealth(24*time.Hour, states)
	batch := make([]HealthEvent, 0, 1000)
	for i := range states + states/2 { // past the bound: the steady state
		at := t0.Add(time.Duration(i) * 576 * time.Millisecond) // a day
		e := post(fmt.Sprintf("%08x-7c1e-4c3b-9f2a-%012d", i, i), url1, 1, SuccessClass, at)
		e.DestinationID = "dest-" + strconv.Itoa(i%dests)
		e.ReceivedAt = at.Add(-50 * time.Millisecond)
		switch {
		case i%20 == 0:
			e.URL, e.Class, e.Error = url2, "timeout", "timeout: no answer"
		case i%10 == 0:
			fail := e
			fail.URL, fail.Class, fail.Error = url2, "status_5xx", "status_5xx: 503"
			batch = append(batch, fail)
			e.Attempt = 2
		}
		batch = append(batch, e)
		if len(batch) >= 999 {
			h.Add(batch, nil)
			batch = batch[:0]
		}
	}
	h.Add(batch, nil)
	if h.Tracked() != states {
		b.Fatalf("%d states", h.Tracked())
	}
	reportGC(b, h)
}
