package deliverer_test

import (
	"net/http"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestDeadEndpointRecordsWaitWithoutRewrites (docs/delivery.md#parked-records-wait-for-their-endpoint):
// a record refused by an open breaker used to be deferred to a tier unsent, and again each time
// it came due with the breaker still open — with tiers of at most 30 s, a dead endpoint's record
// was written to a tier every 30 s until its window ended (9.3 writes per record over 7.5
// minutes). Now a tier record behind an open breaker waits in memory, uncommitted, until the
// breaker lets a request through: one deferral, then no more writes. Everything still reaches the
// DLQ (nothing lost) within the window, and a healthy endpoint's retries in the same tier
// partitions are not held back by the parked records.
//
// With a small MaxPollRecords, parked records are handed on to a tier once their partition moved
// that far past them (the bound on what a parked record keeps uncommitted): more writes then,
// but the same guarantees.
//
// It runs in virtual time (testing/synctest): four minutes of it take seconds.
func TestDeadEndpointRecordsWaitWithoutRewrites(t *testing.T) {
	t.Run("parked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { testDeadEndpointRecordsWait(t, 0, 2) })
	})
	t.Run("parked records handed on past MaxPollRecords", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { testDeadEndpointRecordsWait(t, 5, 0) })
	})
}

// testDeadEndpointRecordsWait runs the scenario with MaxPollRecords maxPoll (0: the default)
// and wants at most perRecord tier writes per dead record (0: no bound).
func testDeadEndpointRecordsWait(t *testing.T, maxPoll int, perRecord float64) {
	const window = 3 * time.Minute
	h := newVirtualHarness(t, "1s,2s,5s,10s,20s,30s", destYAML(
		dest("dead", []string{"http://localhost:9101/hook"}, ""),
		dest("flaky", []string{"http://localhost:9102/hook"}, ""),
	))
	h.env.VirtualReceiver(9101, func(_ int, r *http.Request, _ http.ResponseWriter) { <-r.Context().Done() }) // never answers
	var mu sync.Mutex
	seen := map[string][]time.Time{}
	h.env.VirtualReceiver(9102, func(_ int, r *http.Request, w http.ResponseWriter) {
		id := r.Header.Get("X-Message-Id")
		mu.Lock()
		defer mu.Unlock()
		seen[id] = append(seen[id], time.Now())
		if len(seen[id]) == 1 {
			w.WriteHeader(http.StatusRequestTimeout) // retried through the 1 s tier; not a failure of the host
		}
	})
	cfg := h.config()
	cfg.RetryWindow = window
	if maxPoll > 0 {
		cfg.MaxPollRecords = maxPoll
	}
	reg, _ := h.run(cfg)
	dlq := h.reader(schemas.TopicDLQ)

	const perSecond, seconds = 2, 90
	for i := range seconds {
		ids := messageIDs(i*perSecond, (i+1)*perSecond)
		h.send("dead", ids...)
		h.send("flaky", ids...)
		time.Sleep(time.Second)
	}
	const n = perSecond * seconds
	letters := dlq.waitFor(n, window+time.Minute)
	time.Sleep(5 * time.Second) // anything written late would show now

	writes := counter(t, reg, "tributary_deliverer_retried_total", "destination", "dead")
	t.Logf("dead endpoint: %d records, %.0f tier writes (%.2f per record), %.0f POSTs, %.0f dead letters",
		n, writes, writes/n, counter(t, reg, "tributary_deliverer_attempts_total", "destination", "dead"), counter(t, reg, "tributary_deliverer_dlq_total", "destination", "dead"))
	if perRecord > 0 && writes/n > perRecord {
		t.Errorf("%.0f tier writes for %d records of a dead endpoint: %.2f per record, want at most %.0f", writes, n, writes/n, perRecord)
	}
	// Every record finished: the group committed everything it read, tiers included.
	lags, err := kadm.NewClient(h.cl).Lag(h.ctx, cfg.Group)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lags {
		if err := l.Error(); err != nil {
			t.Fatal(err)
		}
		for topic, tl := range l.Lag.TotalByTopic() {
			if tl.Lag != 0 {
				t.Errorf("%s: %d records not committed once everything was dead-lettered", topic, tl.Lag)
			}
		}
	}
	dead := map[string]bool{}
	for _, r := range letters {
		if hdr(r, schemas.HeaderDestinationID) != "dead" {
			t.Errorf("dead letter of %s (%s)", hdr(r, schemas.HeaderDestinationID), hdr(r, schemas.HeaderReason))
			continue
		}
		dead[hdr(r, schemas.HeaderMessageID)] = true
		first, err := schemas.ParseTimestamp(hdr(r, schemas.HeaderFirstAttemptAt))
		if err != nil {
			t.Fatal(err)
		}
		// No attempt starts after the window: a breaker's trial started just before its end
		// is dead-lettered when its POST times out (DELIVERY_TIMEOUT, 5 s).
		if late := r.Timestamp.Sub(first.Add(window)); late > cfg.Timeout+time.Second {
			t.Errorf("%s dead-lettered %v after its window ended (%s)", hdr(r, schemas.HeaderMessageID), late, hdr(r, schemas.HeaderReason))
		}
	}
	if len(dead) != n {
		t.Errorf("%d of the dead endpoint's %d records dead-lettered, want all", len(dead), n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range messageIDs(0, n) {
		switch at := seen[id]; {
		case len(at) != 2:
			t.Errorf("flaky endpoint got %s %d times, want twice (a 408, then the retry)", id, len(at))
		case at[1].Sub(at[0]) > 2*time.Second:
			t.Errorf("the retry of %s came %v after its 408: held back beside the dead endpoint's records (tier 1 s)", id, at[1].Sub(at[0]))
		}
	}
}

// TestMeasureDeadEndpointTierWrites measures what a dead endpoint costs in tier writes with the
// default settings (RETRY_SCHEDULE, RETRY_WINDOW 4 h, breaker): 2 records a second for 10
// minutes to an endpoint that never answers, followed until every record is dead-lettered, in
// virtual time (a minute or two of real time). It only runs when asked
// (docs/benchmarks.md#a-dead-endpoints-records-tier-writes):
//
//	DELIVERER_MEASURE=1 go test -count=1 -run TestMeasureDeadEndpointTierWrites -v ./deliverer/
func TestMeasureDeadEndpointTierWrites(t *testing.T) {
	if os.Getenv("DELIVERER_MEASURE") == "" {
		t.Skip("a measurement: DELIVERER_MEASURE=1 runs it")
	}
	synctest.Test(t, func(t *testing.T) {
		h := newVirtualHarness(t, schemas.DefaultRetrySchedule, destYAML(dest("dead", []string{"http://localhost:9101/hook"}, "")))
		h.env.VirtualReceiver(9101, func(_ int, r *http.Request, _ http.ResponseWriter) { <-r.Context().Done() })
		cfg := h.config()
		reg, _ := h.run(cfg)
		dlq := h.reader(schemas.TopicDLQ)
		const perSecond, seconds = 2, 600
		for i := range seconds {
			h.send("dead", messageIDs(i*perSecond, (i+1)*perSecond)...)
			time.Sleep(time.Second)
		}
		const n = perSecond * seconds
		dlq.waitFor(n, cfg.RetryWindow+time.Hour)
		writes := counter(t, reg, "tributary_deliverer_retried_total", "destination", "dead")
		t.Logf("%d records to an endpoint that never answers, followed to the DLQ: %.0f tier writes (%.2f per record), %.0f POSTs",
			n, writes, writes/n, counter(t, reg, "tributary_deliverer_attempts_total", "destination", "dead"))
	})
}

// TestPausedEndpointRecordsWaitWithoutRewrites: the same for an endpoint that answers 429 with
// Retry-After for a minute: a tier record that comes due while the endpoint's pause lasts is
// parked until the pause ends, instead of being deferred again. Every record is delivered once
// the endpoint takes them, and no request reaches it during a pause it asked for.
func TestPausedEndpointRecordsWaitWithoutRewrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newVirtualHarness(t, "1s,2s,5s,10s,20s,30s", destYAML(dest("busy", []string{"http://localhost:9103/hook"}, "")))
		start := time.Now()
		var mu sync.Mutex
		delivered := map[string]bool{}
		var pausedAt, pausedUntil time.Time
		var during int
		h.env.VirtualReceiver(9103, func(_ int, r *http.Request, w http.ResponseWriter) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			if now.After(pausedAt.Add(100*time.Millisecond)) && now.Before(pausedUntil) { // not one sent beside the 429
				during++
			}
			if now.Sub(start) < time.Minute {
				pausedAt, pausedUntil = now, now.Add(10*time.Second)
				w.Header().Set("Retry-After", "10")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			delivered[r.Header.Get("X-Message-Id")] = true
		})
		reg, _ := h.run(h.config())
		const perSecond, seconds = 2, 60
		for i := range seconds {
			h.send("busy", messageIDs(i*perSecond, (i+1)*perSecond)...)
			time.Sleep(time.Second)
		}
		const n = perSecond * seconds
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			mu.Lock()
			got := len(delivered)
			mu.Unlock()
			if got == n {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		writes := counter(t, reg, "tributary_deliverer_retried_total", "destination", "busy")
		t.Logf("endpoint paused for a minute: %d records, %.0f tier writes (%.2f per record), %d delivered", n, writes, writes/n, len(delivered))
		if len(delivered) != n {
			t.Errorf("%d of %d records delivered", len(delivered), n)
		}
		if writes/n > 2 {
			t.Errorf("%.0f tier writes for %d records of a paused endpoint: %.2f per record, want at most 2", writes, n, writes/n)
		}
		if during > 0 {
			t.Errorf("%d requests during a pause the endpoint asked for", during)
		}
	})
}
