package views

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// msgAttempt is an attempt record of message msg to dest, as the deliverer writes it: what
// the message is, and the answer.
func msgAttempt(dest, msg, url string, n, status int, class string, at time.Time) DeliveryAttempt {
	a := DeliveryAttempt{At: at, DestinationID: dest, MessageID: msg, URL: url, Attempt: n, Status: status, LatencyMs: 3, ErrorClass: class,
		MessageFacts: MessageFacts{Type: "track", Event: "Order Completed", UserID: "user-5", AnonymousID: "anon-5", ReceivedAt: at.Add(-time.Second)}}
	if status > 0 {
		a.ResponseHeaders = map[string]string{"Content-Type": "text/plain"}
		a.ResponseBody = "answer " + strconv.Itoa(status)
	}
	return a
}

func onlyMessage(t *testing.T, v *Messages, dest string) Message {
	t.Helper()
	page, _ := v.Page(dest, MessageQuery{}, 10)
	if len(page) != 1 {
		t.Fatalf("%d messages, want 1: %+v", len(page), page)
	}
	return page[0]
}

// TestMessagesTwoURLs: a destination with two URLs, the first answering 200 and the second
// refusing connections: every message is delivered (one URL took it), with both URLs'
// attempts under it.
func TestMessagesTwoURLs(t *testing.T) {
	v := NewMessages(100, 1<<20)
	var batch []DeliveryAttempt
	for i := range 5 {
		id := "m" + strconv.Itoa(i)
		at := t0.Add(time.Duration(i) * time.Second)
		batch = append(batch,
			msgAttempt("flaky", id, "https://a.example.com/in", 1, 200, SuccessClass, at),
			msgAttempt("flaky", id, "https://b.example.com/in", 1, 0, "connection", at.Add(time.Millisecond))) // the refusal ends last
	}
	v.Add(batch, nil)
	page, more := v.Page("flaky", MessageQuery{}, 10)
	if len(page) != 5 || more {
		t.Fatalf("%d messages (more %v), want 5", len(page), more)
	}
	for i, m := range page {
		if m.MessageID != "m"+strconv.Itoa(4-i) {
			t.Errorf("message %d is %s: not newest first", i, m.MessageID)
		}
		if m.Status != StatusDelivered || len(m.Attempts) != 2 || m.Attempts[0].URL == m.Attempts[1].URL || m.NextAttemptAt != nil {
			t.Errorf("message %s: %+v", m.MessageID, m)
		}
	}
	if page, _ := v.Page("flaky", MessageQuery{Status: StatusRetrying}, 10); len(page) != 0 {
		t.Errorf("retrying: %+v", page)
	}
}

// TestMessagesStatus: a message retries (with its next attempt time), then is delivered; another
// retries, then is dead-lettered; a message dropped before the destination is filtered; a
// dead-lettered message replayed and delivered is delivered.
func TestMessagesStatus(t *testing.T) {
	v := NewMessages(100, 1<<20)
	next := t0.Add(10 * time.Second)
	retry := msgAttempt("d", "ok", "https://a/", 1, 500, "status_5xx", t0)
	retry.NextAttemptAt = next
	v.Add([]DeliveryAttempt{retry}, nil)
	m := onlyMessage(t, v, "d")
	if m.Status != StatusRetrying || m.NextAttemptAt == nil || !m.NextAttemptAt.Equal(next) || m.Attempts[0].ResponseBody != "answer 500" || m.Attempts[0].ResponseHeaders["Content-Type"] != "text/plain" {
		t.Fatalf("after a 500: %+v", m)
	}
	v.Add([]DeliveryAttempt{msgAttempt("d", "ok", "https://a/", 2, 200, SuccessClass, next)}, nil)
	if m := onlyMessage(t, v, "d"); m.Status != StatusDelivered || m.NextAttemptAt != nil || len(m.Attempts) != 2 || !m.LastAttemptAt.Equal(next) || !m.FirstAttemptAt.Equal(t0) {
		t.Fatalf("after the 200: %+v", m)
	}

	w := NewMessages(100, 1<<20)
	w.Add([]DeliveryAttempt{retry}, nil)
	dead := msgAttempt("d", "ok", "https://a/", 2, 500, "status_5xx", next)
	dead.DeadLettered = "retries_exhausted"
	w.Add([]DeliveryAttempt{dead}, nil)
	if m := onlyMessage(t, w, "d"); m.Status != StatusDeadLettered || m.DeadLettered != "retries_exhausted" || m.NextAttemptAt != nil {
		t.Fatalf("dead-lettered: %+v", m)
	}
	w.Add([]DeliveryAttempt{msgAttempt("d", "ok", "https://a/", 1, 200, SuccessClass, next.Add(time.Hour))}, nil) // replayed
	if m := onlyMessage(t, w, "d"); m.Status != StatusDelivered || m.DeadLettered != "" {
		t.Fatalf("replayed: %+v", m)
	}

	// A dead letter written without an attempt (its retry window ended while it waited on a
	// tier): the DLQ says so, read before or after the attempts; an attempt after it (a replay)
	// decides again.
	for _, dlqFirst := range []bool{false, true} {
		x := NewMessages(100, 1<<20)
		if dlqFirst {
			x.DeadLettered("d", "ok", "retry_window_expired", next.Add(time.Minute))
		}
		x.Add([]DeliveryAttempt{retry}, nil)
		if !dlqFirst {
			if m := onlyMessage(t, x, "d"); m.Status != StatusRetrying {
				t.Fatalf("before the dead letter: %+v", m)
			}
			x.DeadLettered("d", "ok", "retry_window_expired", next.Add(time.Minute))
		}
		if m := onlyMessage(t, x, "d"); m.Status != StatusDeadLettered || m.DeadLettered != "retry_window_expired" || m.NextAttemptAt != nil {
			t.Fatalf("dead-lettered by the DLQ (read first: %v): %+v", dlqFirst, m)
		}
		if page, _ := x.Page("d", MessageQuery{Status: StatusDeadLettered}, 10); len(page) != 1 {
			t.Fatalf("?status=dead_lettered: %+v", page)
		}
		replay := msgAttempt("d", "ok", "https://a/", 1, 503, "status_5xx", next.Add(time.Hour))
		replay.NextAttemptAt = next.Add(time.Hour + time.Minute)
		x.Add([]DeliveryAttempt{replay}, nil)
		if m := onlyMessage(t, x, "d"); m.Status != StatusRetrying {
			t.Fatalf("replayed: %+v", m)
		}
	}

	f := NewMessages(100, 1<<20)
	f.Add([]DeliveryAttempt{msgAttempt("d", "f", "", 1, 0, "filtered", t0)}, nil)
	if m := onlyMessage(t, f, "d"); m.Status != StatusFiltered {
		t.Fatalf("filtered: %+v", m)
	}
}

// TestMessagesSearch: found by user, anonymous id, event, type, message id, status and since,
// each page newest first with a cursor; a record of an older deliverer (no facts) is a
// message too; a test delivery is none; what a query returns is a copy.
func TestMessagesSearch(t *testing.T) {
	v := NewMessages(1000, 1<<20)
	var batch []DeliveryAttempt
	for i := range 30 {
		a := msgAttempt("d", "m"+strconv.Itoa(i), "https://a/", 1, 200, SuccessClass, t0.Add(time.Duration(i)*time.Minute))
		a.UserID = "user-" + strconv.Itoa(i%3)
		a.AnonymousID = "anon-" + strconv.Itoa(i)
		if i%5 == 0 {
			a.Type, a.Event = "page", "Pricing"
		}
		batch = append(batch, a)
	}
	old := DeliveryAttempt{At: t0, DestinationID: "d", MessageID: "old", URL: "https://a/", Attempt: 1, Status: 200, ErrorClass: SuccessClass}
	test := msgAttempt("d", "t", "https://a/", 1, 200, SuccessClass, t0)
	test.Test = true
	batch = append(batch, old, test)
	v.Add(batch, nil)
	ids := func(q MessageQuery, limit int) (out []string, more bool) {
		page, more := v.Page("d", q, limit)
		for _, m := range page {
			out = append(out, m.MessageID)
		}
		return out, more
	}
	for _, c := range []struct {
		q    MessageQuery
		want string
	}{
		{MessageQuery{UserID: "user-1"}, "m28 m25 m22 m19 m16 m13 m10 m7 m4 m1"},
		{MessageQuery{UserID: "user-1", Event: "Pricing"}, "m25 m10"},
		{MessageQuery{Event: "Pricing"}, "m25 m20 m15 m10 m5 m0"},
		{MessageQuery{Type: "page", UserID: "user-0"}, "m15 m0"},
		{MessageQuery{AnonymousID: "anon-7"}, "m7"},
		{MessageQuery{MessageID: "m3"}, "m3"},
		{MessageQuery{MessageID: "old"}, "old"},
		{MessageQuery{MessageID: "t"}, ""},
		{MessageQuery{UserID: "nobody"}, ""},
		{MessageQuery{Event: "Pricing", Since: t0.Add(15*time.Minute - time.Second)}, "m25 m20 m15"},
		{MessageQuery{Status: StatusRetrying}, ""},
	} {
		got, _ := ids(c.q, 100)
		if strings.Join(got, " ") != c.want {
			t.Errorf("%+v: %v, want %s", c.q, got, c.want)
		}
	}
	// Pages: newest first, from the cursor on.
	page, _ := v.Page("d", MessageQuery{UserID: "user-1"}, 4)
	got, more := ids(MessageQuery{UserID: "user-1", Before: page[3].Seq}, 4)
	if strings.Join(got, " ") != "m16 m13 m10 m7" || !more {
		t.Errorf("second page %v (more %v)", got, more)
	}
	// A copy: changing it changes nothing in the view.
	page[0].Attempts[0].ResponseBody = "changed"
	if m := v.Message("m28"); len(m) != 1 || m[0].Attempts[0].ResponseBody != "answer 200" {
		t.Errorf("the view changed: %+v", m)
	}
}

// TestMessagesBounded: a destination keeps perDest messages, and at most its budget of
// attempts' bytes; the oldest go first, from every index; forgotten messages and users go, and
// a pruned destination.
func TestMessagesBounded(t *testing.T) {
	v := NewMessages(3, 1<<20)
	for i := range 5 {
		a := msgAttempt("d", "m"+strconv.Itoa(i), "https://a/", 1, 200, SuccessClass, t0)
		a.UserID = "user-" + strconv.Itoa(i)
		v.Add([]DeliveryAttempt{a, msgAttempt("e", "m"+strconv.Itoa(i), "https://a/", 1, 200, SuccessClass, t0)}, nil)
	}
	if n, _ := v.Len("d"); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}
	if page, _ := v.Page("d", MessageQuery{UserID: "user-1"}, 10); len(page) != 0 {
		t.Fatalf("an evicted message found: %+v", page)
	}
	if got := v.Message("m1"); len(got) != 0 {
		t.Fatalf("an evicted message found: %+v", got)
	}
	if got := v.Message("m4"); len(got) != 2 || got[0].DestinationID != "d" || got[1].DestinationID != "e" {
		t.Fatalf("m4 per destination: %+v", got)
	}

	big := NewMessages(1000, 10_000)
	for i := range 10 {
		a := msgAttempt("d", "m"+strconv.Itoa(i), "https://a/", 1, 500, "status_5xx", t0)
		a.ResponseBody = strings.Repeat("x", 3000)
		big.Add([]DeliveryAttempt{a}, nil)
	}
	if n, bytes := big.Len("d"); n != 3 || bytes > 10_000 {
		t.Fatalf("%d messages, %d bytes: over the budget", n, bytes)
	}

	if n := v.Forget([]string{"m4"}); n != 2 {
		t.Fatalf("forgot %d, want 2", n)
	}
	ids := v.ForgetUsers(func(user string, _ time.Time) bool { return user == "user-3" })
	if len(ids) != 1 || ids[0] != "m3" {
		t.Fatalf("forgot %v, want m3", ids)
	}
	if page, _ := v.Page("d", MessageQuery{}, 10); len(page) != 1 || page[0].MessageID != "m2" {
		t.Fatalf("left %+v, want m2", page)
	}
	skipped := v.Add([]DeliveryAttempt{msgAttempt("d", "late", "https://a/", 1, 200, SuccessClass, t0)}, func(a *DeliveryAttempt) bool { return a.MessageID == "late" })
	if skipped != 1 || len(v.Message("late")) != 0 {
		t.Fatalf("a forgotten message kept")
	}
	v.Prune(func(dest string) bool { return dest != "e" })
	if n, _ := v.Len("e"); n != 0 || len(v.Message("m2")) != 1 {
		t.Fatalf("prune: %d left in e", n)
	}
}

// TestMessagesKeptLayout: what the view keeps of a message comes back whole — the newest
// MaxMessageAttempts attempts in order with the count of the dropped ones and the budget
// counted for the kept only, times to the nanosecond (no receivedAt when unknown); a message
// that learns its user on a later record is listed in its place among the user's messages;
// and slots freed by eviction and Forget are used again without an index finding a message
// gone or missing one kept.
func TestMessagesKeptLayout(t *testing.T) {
	v := NewMessages(100, 1<<20)
	at := t0.Add(123456789 * time.Nanosecond)
	for n := 1; n <= MaxMessageAttempts+8; n++ {
		a := msgAttempt("d", "many", "https://a/", n, 500, "status_5xx", at.Add(time.Duration(n)*time.Second))
		a.ReceivedAt = time.Time{}
		v.Add([]DeliveryAttempt{a}, nil)
	}
	m := onlyMessage(t, v, "d")
	if len(m.Attempts) != MaxMessageAttempts || m.AttemptsDropped != 8 || m.Attempts[0].Attempt != 9 || m.Attempts[MaxMessageAttempts-1].Attempt != MaxMessageAttempts+8 {
		t.Fatalf("%d attempts (first %d), %d dropped", len(m.Attempts), m.Attempts[0].Attempt, m.AttemptsDropped)
	}
	if !m.FirstAttemptAt.Equal(at.Add(time.Second)) || !m.Attempts[0].At.Equal(at.Add(9*time.Second)) || m.ReceivedAt != nil || m.Attempts[0].At.Location() != time.UTC {
		t.Fatalf("times: first %v, attempt %v, received %v", m.FirstAttemptAt, m.Attempts[0].At, m.ReceivedAt)
	}
	want := 0
	for _, a := range m.Attempts {
		want += attemptOverhead + len(a.ResponseBody) + len(a.Error) + len("Content-Type") + len("text/plain") + 32
	}
	if _, bytes := v.Len("d"); bytes != want {
		t.Fatalf("budget counts %d bytes, want %d (the kept attempts)", bytes, want)
	}

	// "late" is seen first from a record without facts, then its user's newer messages, then a
	// record of it that names the user.
	u := NewMessages(100, 1<<20)
	u.Add([]DeliveryAttempt{{At: t0, DestinationID: "d", MessageID: "late", URL: "https://a/", Attempt: 1, Status: 500, ErrorClass: "status_5xx"}}, nil)
	for i := range 3 {
		u.Add([]DeliveryAttempt{msgAttempt("d", "m"+strconv.Itoa(i), "https://a/", 1, 200, SuccessClass, t0)}, nil)
	}
	u.Add([]DeliveryAttempt{msgAttempt("d", "late", "https://a/", 2, 200, SuccessClass, t0.Add(time.Minute))}, nil)
	ids := func(v *Messages, q MessageQuery) string {
		page, _ := v.Page("d", q, 100)
		var out []string
		for _, m := range page {
			out = append(out, m.MessageID)
		}
		return strings.Join(out, " ")
	}
	if got := ids(u, MessageQuery{UserID: "user-5"}); got != "m2 m1 m0 late" {
		t.Fatalf("user-5: %s, want m2 m1 m0 late", got)
	}

	// Through the bound, and Forget: slots taken again.
	w := NewMessages(3, 1<<20)
	for i := range 12 {
		a := msgAttempt("d", "m"+strconv.Itoa(i), "https://a/", 1, 200, SuccessClass, t0.Add(time.Duration(i)*time.Second))
		a.UserID = "user-" + strconv.Itoa(i%2)
		w.Add([]DeliveryAttempt{a}, nil)
		if i == 7 {
			w.Forget([]string{"m6"})
		}
	}
	if got := ids(w, MessageQuery{}); got != "m11 m10 m9" {
		t.Fatalf("kept %s, want m11 m10 m9", got)
	}
	if got := ids(w, MessageQuery{UserID: "user-1"}) + " / " + ids(w, MessageQuery{UserID: "user-0"}); got != "m11 m9 / m10" {
		t.Fatalf("by user: %s, want m11 m9 / m10", got)
	}
	for i := range 9 {
		if got := w.Message("m" + strconv.Itoa(i)); len(got) != 0 {
			t.Fatalf("m%d still found: %+v", i, got)
		}
	}
}

// benchMessages is a view of 100,000 attempts: 50,000 messages of 1,000 users and 20 event
// names, each with a 500 then a 200.
func benchMessages(b testing.TB) *Messages {
	v := NewMessages(50_000, 1<<30)
	batch := make([]DeliveryAttempt, 0, 1000)
	for i := range 50_000 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		id := fmt.Sprintf("%08x-7c1e-4c3b-9f2a-%012d", i, i)
		for n, status := range []int{500, 200} {
			class := SuccessClass
			if status == 500 {
				class = "status_5xx"
			}
			a := msgAttempt("d", id, "https://hooks.example.com/in", n+1, status, class, at.Add(time.Duration(n)*time.Second))
			a.UserID, a.AnonymousID = "user-"+strconv.Itoa(i%1000), "anon-"+strconv.Itoa(i)
			a.Event = "Event " + strconv.Itoa(i%20)
			a.ResponseHeaders = map[string]string{"Content-Type": "application/json", "Date": at.Format(time.RFC1123)}
			a.ResponseBody = `{"ok":false,"error":"temporarily unavailable"}`
			batch = append(batch, a)
		}
		if len(batch) == cap(batch) {
			v.Add(batch, nil)
			batch = batch[:0]
		}
	}
	v.Add(batch, nil)
	return v
}

// BenchmarkMessagesSearch: a message found by user id, and by event name, among 100,000
// attempts (docs/benchmarks.md#console): a page of 50, and the user's last page of 50 (a
// cursor deep in the index).
func BenchmarkMessagesSearch(b *testing.B) {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := benchMessages(b)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMessage := float64(after.HeapAlloc-before.HeapAlloc) / 50_000
	for _, c := range []struct {
		name string
		q    MessageQuery
	}{
		{"userId", MessageQuery{UserID: "user-42"}},
		{"event", MessageQuery{Event: "Event 7"}},
		{"event+status", MessageQuery{Event: "Event 7", Status: StatusDelivered}},
		{"anonymousId", MessageQuery{AnonymousID: "anon-4242"}},
		{"status only", MessageQuery{Status: StatusRetrying}}, // no index: every message scanned
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				page, _ := v.Page("d", c.q, 50)
				if len(page) == 0 && c.q.Status != StatusRetrying {
					b.Fatal("not found")
				}
			}
			b.ReportMetric(perMessage, "heapB/message")
		})
	}
}

// BenchmarkMessagesAdd: what the messages view costs per attempt record the console reads, in
// the steady state of a busy destination: full (10,000 messages, the default), each new
// message's one 2xx attempt evicting the oldest message.
func BenchmarkMessagesAdd(b *testing.B) {
	const perDest = 10_000
	v := NewMessages(perDest, 32<<20)
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	batch := make([]DeliveryAttempt, 100)
	ids := make([]string, 4*perDest)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-7c1e-4c3b-9f2a-%012d", i, i)
	}
	users := make([]string, 5000)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	n := 0
	fill := func() {
		for j := range batch {
			a := &batch[j]
			*a = DeliveryAttempt{At: t0.Add(time.Duration(n) * time.Millisecond), DestinationID: "d", MessageID: ids[n%len(ids)],
				URL: "https://hooks.example.com/in", Attempt: 1, Status: 200, LatencyMs: 3, ErrorClass: SuccessClass,
				MessageFacts: MessageFacts{Type: "track", Event: "Event " + strconv.Itoa(n%20), UserID: users[n%len(users)], AnonymousID: ids[(n+7)%len(ids)], ReceivedAt: t0}}
			n++
		}
	}
	for range 2 * perDest / len(batch) {
		fill()
		v.Add(batch, nil)
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		v.Add(batch, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
}

// BenchmarkMessagesFilled: a full collection while the messages view holds its default bound
// for two destinations (10,000 messages each, past it), each message of one of 5,000 users with
// its own anonymous id and one 2xx without an answer, 1 in 10 after a 503 with its answer;
// ns/op is one runtime.GC() (reportGC).
func BenchmarkMessagesFilled(b *testing.B) {
	const perDest = 10_000
	v := NewMessages(perDest, 32<<20)
	batch := make([]DeliveryAttempt, 0, 1000)
	for i := range 3 * perDest {
		for _, dest := range []string{"d1", "d2"} {
			at := t0.Add(time.Duration(i) * time.Millisecond)
			id := fmt.Sprintf("%08x-7c1e-4c3b-9f2a-%012d", i, i)
			a := DeliveryAttempt{At: at, DestinationID: dest, MessageID: id, URL: "https://hooks.example.com/in", Attempt: 1, Status: 200,
				LatencyMs: 3, ErrorClass: SuccessClass, MessageFacts: MessageFacts{Type: "track", Event: "Event " + strconv.Itoa(i%20),
					UserID: "user-" + strconv.Itoa(i%5000), AnonymousID: fmt.Sprintf("anon-%012d", i), ReceivedAt: at.Add(-time.Second)}}
			if i%10 == 0 {
				fail := a
				fail.Status, fail.ErrorClass, fail.Error = 503, "status_5xx", "status_5xx: 503"
				fail.NextAttemptAt = at.Add(10 * time.Second)
				fail.ResponseHeaders = map[string]string{"Content-Type": "application/json"}
				fail.ResponseBody = `{"ok":false,"error":"temporarily unavailable"}`
				batch = append(batch, fail)
				a.Attempt, a.At = 2, at.Add(10*time.Second)
			}
			batch = append(batch, a)
		}
		if len(batch) >= 998 {
			v.Add(batch, nil)
			batch = batch[:0]
		}
	}
	v.Add(batch, nil)
	if n, _ := v.Len("d1"); n != perDest {
		b.Fatalf("%d messages", n)
	}
	reportGC(b, v)
}
