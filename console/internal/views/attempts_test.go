package views

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func attemptOf(dest, msg string, status int, class string, at time.Time) DeliveryAttempt {
	return DeliveryAttempt{At: at, DestinationID: dest, MessageID: msg, URL: "https://example.com/hook", Attempt: 1, Status: status, LatencyMs: 12, ErrorClass: class}
}

// TestAttemptsQueries: the log pages newest first, filtered and before a cursor; finds an
// attempt by seq and a message's attempts oldest first; skips forgotten messages; and what it
// returns is a copy.
func TestAttemptsQueries(t *testing.T) {
	l := NewAttempts(3, time.Hour)
	skipped := l.Add([]DeliveryAttempt{
		attemptOf("d", "m1", 200, SuccessClass, t0),
		attemptOf("d", "m2", 503, "status_5xx", t0),
		attemptOf("d", "gone", 200, SuccessClass, t0),
		attemptOf("d", "m3", 200, SuccessClass, t0),
		attemptOf("d", "m4", 200, SuccessClass, t0), // the ring keeps m2 m3 m4
		attemptOf("e", "m1", 200, SuccessClass, t0),
	}, func(id string) bool { return id == "gone" })
	if skipped != 1 {
		t.Fatalf("skipped %d, want 1", skipped)
	}
	page, more := l.Page("d", math.MaxUint64, "", 2)
	if len(page) != 2 || page[0].MessageID != "m4" || page[1].MessageID != "m3" || !more {
		t.Fatalf("first page: %+v, more %v", page, more)
	}
	page, more = l.Page("d", page[1].Seq, "", 2)
	if len(page) != 1 || page[0].MessageID != "m2" || more {
		t.Fatalf("second page: %+v, more %v", page, more)
	}
	if page, _ := l.Page("d", math.MaxUint64, "5xx", 10); len(page) != 1 || page[0].Status != 503 {
		t.Fatalf("5xx: %+v", page)
	}
	if page, more := l.Page("nope", math.MaxUint64, "", 10); page == nil || len(page) != 0 || more {
		t.Fatalf("unknown destination: %#v, %v", page, more)
	}
	page, _ = l.Page("d", math.MaxUint64, "", 10)
	page[0].MessageID = "changed"
	a, ok := l.Attempt("d", page[0].Seq)
	if !ok || a.MessageID != "m4" {
		t.Fatalf("Attempt after changing a page: %+v, %v", a, ok)
	}
	a.MessageID = "changed"
	if again, _ := l.Attempt("d", a.Seq); again.MessageID != "m4" {
		t.Fatalf("changing an Attempt changed the log: %+v", again)
	}
	if _, ok := l.Attempt("d", 1); ok {
		t.Fatal("an attempt the ring dropped is found")
	}
	msg := l.OfMessage("m1")
	if len(msg) != 1 || msg[0].DestinationID != "e" {
		t.Fatalf("OfMessage(m1): %+v", msg)
	}
	msg[0].DestinationID = "changed"
	if again := l.OfMessage("m1"); again[0].DestinationID != "e" {
		t.Fatal("changing OfMessage's answer changed the log")
	}
}

// TestAttemptsStats: the counters per minute over the window, failures by class, latency
// quantiles; a test attempt and one older than the window count nowhere.
func TestAttemptsStats(t *testing.T) {
	l := NewAttempts(10, time.Hour)
	test := attemptOf("d", "t", 200, SuccessClass, t0)
	test.Test = true
	l.Add([]DeliveryAttempt{
		attemptOf("d", "m1", 200, SuccessClass, t0.Add(-time.Minute)),
		attemptOf("d", "m2", 503, "status_5xx", t0),
		attemptOf("d", "m3", 0, "a-class-of-tomorrow", t0),
		attemptOf("d", "old", 200, SuccessClass, t0.Add(-2*time.Hour)),
		test,
	}, nil)
	st := l.Stats("d", t0, 24*time.Hour, time.Minute) // at most the log's window
	if st.Window != "1h" || len(st.Series) != 60 || st.Attempts != 3 || st.Successes != 1 ||
		st.Failures["status_5xx"] != 1 || st.Failures[otherClass] != 1 || st.SuccessRate == nil || *st.SuccessRate != 0.3333 {
		t.Fatalf("stats: %+v", st)
	}
	if st.LatencyMs.P50 == nil || *st.LatencyMs.P50 < 10 || *st.LatencyMs.P50 > 15 {
		t.Fatalf("p50: %v", st.LatencyMs.P50)
	}
	if last := st.Series[59]; !last.At.Equal(t0) || last.Attempts != 2 || last.Failures != 2 {
		t.Fatalf("the last minute: %+v", last)
	}
	if none := l.Stats("nope", t0, time.Hour, time.Minute); none.Attempts != 0 || none.SuccessRate != nil || len(none.Series) != 60 {
		t.Fatalf("unknown destination: %+v", none)
	}
}

// TestAttemptsForgetAndPrune: Forget drops a message's attempts everywhere (the counters stay);
// Prune drops the destinations keep refuses.
func TestAttemptsForgetAndPrune(t *testing.T) {
	l := NewAttempts(10, time.Hour)
	l.Add([]DeliveryAttempt{attemptOf("d", "m1", 200, SuccessClass, t0), attemptOf("d", "m2", 200, SuccessClass, t0),
		attemptOf("e", "m1", 200, SuccessClass, t0)}, nil)
	if n := l.Forget([]string{"m1", ""}); n != 2 {
		t.Fatalf("forgot %d, want 2", n)
	}
	if got := l.OfMessage("m1"); len(got) != 0 {
		t.Fatalf("m1 after Forget: %+v", got)
	}
	if page, _ := l.Page("d", math.MaxUint64, "", 10); len(page) != 1 || page[0].MessageID != "m2" {
		t.Fatalf("d after Forget: %+v", page)
	}
	if st := l.Stats("d", t0, time.Hour, time.Minute); st.Attempts != 2 {
		t.Fatalf("the counters after Forget: %d attempts, want 2", st.Attempts)
	}
	l.Prune(func(id string) bool { return id == "e" })
	if page, _ := l.Page("d", math.MaxUint64, "", 10); len(page) != 0 {
		t.Fatalf("d after Prune: %+v", page)
	}
	if st := l.Stats("d", t0, time.Hour, time.Minute); st.Attempts != 0 {
		t.Fatalf("d's counters after Prune: %d", st.Attempts)
	}
	if n := l.Forget(nil); n != 0 {
		t.Fatalf("Forget(nil) = %d", n)
	}
}

// TestAttemptsWait: a waiter hears of its message's attempts until it stops.
func TestAttemptsWait(t *testing.T) {
	l := NewAttempts(10, time.Hour)
	ch := make(chan DeliveryAttempt, 2)
	stop := l.Wait("m1", ch)
	l.Add([]DeliveryAttempt{attemptOf("d", "m1", 200, SuccessClass, t0), attemptOf("d", "m2", 200, SuccessClass, t0)}, nil)
	stop()
	l.Add([]DeliveryAttempt{attemptOf("d", "m1", 200, SuccessClass, t0)}, nil)
	if len(ch) != 1 || (<-ch).MessageID != "m1" {
		t.Fatal("the waiter did not hear of m1's attempt once")
	}
	if len(l.waiters) != 0 {
		t.Fatalf("waiters after stop: %v", l.waiters)
	}
}
