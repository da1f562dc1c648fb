package deliverer_test

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// retryNowCopies are the retry-now copies of tier records, as the console writes them
// (docs/delivery.md#retry-now): the record to webhooks.deliveries, its headers kept, plus
// retry-now naming the tier record.
func retryNowCopies(tier []*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, t := range tier {
		c := &kgo.Record{Topic: schemas.TopicDeliveries, Key: t.Key, Value: t.Value}
		c.Headers = append(c.Headers, t.Headers...)
		c.Headers = append(c.Headers, kgo.RecordHeader{Key: schemas.HeaderRetryNow, Value: []byte(schemas.RetryNowKey(t.Topic, t.Partition, t.Offset))})
		out = append(out, c)
	}
	return out
}

// endpoint is a webhook endpoint that answers 500 until up, and records when each message
// reached it.
type endpoint struct {
	mu  sync.Mutex
	up  bool
	got map[string][]time.Time
}

func newEndpoint(t *testing.T, h *harness, port int) *endpoint {
	ep := &endpoint{got: map[string][]time.Time{}}
	h.env.VirtualReceiver(port, func(_ int, r *http.Request, w http.ResponseWriter) {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		id := r.Header.Get("X-Message-Id")
		ep.got[id] = append(ep.got[id], time.Now())
		if !ep.up {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	return ep
}

func (ep *endpoint) setUp(up bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.up = up
}

// times returns when id reached the endpoint.
func (ep *endpoint) times(id string) []time.Time {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]time.Time(nil), ep.got[id]...)
}

// waitEach waits until every id reached the endpoint n times, at most timeout.
func (ep *endpoint) waitEach(t *testing.T, ids []string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		all := true
		for _, id := range ids {
			all = all && len(ep.times(id)) >= n
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			for _, id := range ids {
				t.Logf("%s: %d requests", id, len(ep.times(id)))
			}
			t.Fatalf("not every message reached the endpoint %d times within %v", n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// docs/delivery.md#retry-now: an endpoint back to 200 gets every message waiting in a tier
// within 2 s of the retry-now, each exactly once more: the copy written twice (a double click)
// is sent once, and when the tier records come due nothing is sent again — also after the
// deliverer restarted between the retry-now and the tier's due time (the marks are in Kafka).
// In virtual time: the 1-minute tier costs nothing.
func TestRetryNowDeliversEachWaitingMessageOnce(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "one deliverer"
		if restart {
			name = "deliverer restarted before the tier is due"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRetryNowOnce(t, restart) })
		})
	}
}

func testRetryNowOnce(t *testing.T, restart bool) {
	h := newVirtualHarness(t, "1m", destYAML(dest("back", []string{"http://localhost:9110/hook"}, "")))
	ep := newEndpoint(t, h, 9110)
	tier := h.reader(schemas.RetryTopic(time.Minute))
	cfg := h.config()
	_, stop := h.run(cfg)
	ids := []string{"m1", "m2", "m3"}
	h.send("back", ids...)
	waiting := tier.waitFor(3, 10*time.Second)
	ep.waitEach(t, ids, 1, 5*time.Second)

	ep.setUp(true)
	start := time.Now()
	h.env.Produce(retryNowCopies(waiting)...)
	h.env.Produce(retryNowCopies(waiting)...) // pressed twice
	ep.waitEach(t, ids, 2, 2*time.Second)
	t.Logf("every waiting message delivered %v after the retry-now", time.Since(start))
	marks := h.reader(schemas.TopicRetriedNow)
	marks.waitFor(6, 5*time.Second) // sending, then delivered, for each

	if restart {
		time.Sleep(time.Second) // the copies' offsets committed
		stop()
		h.run(cfg)
	}
	time.Sleep(2 * time.Minute) // every tier record came due
	for _, id := range ids {
		if n := len(ep.times(id)); n != 2 {
			t.Errorf("%s reached the endpoint %d times, want 2: its first attempt and the retry-now, not the tier's again", id, n)
		}
	}
	for _, r := range marks.waitFor(6, time.Second) {
		m, err := schemas.DecodeRetryNowMark(r.Value)
		if err != nil || (m.State != schemas.RetryNowSending && m.State != schemas.RetryNowDelivered) {
			t.Errorf("mark %s: %s (%v)", r.Key, r.Value, err)
		}
	}
}

// docs/delivery.md#retry-now: a retry-now that fails leaves the message on its schedule: its
// tier attempts it when due, as before, and delivers it then.
func TestFailedRetryNowKeepsTheSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newVirtualHarness(t, "1m", destYAML(dest("down", []string{"http://localhost:9111/hook"}, "")))
		ep := newEndpoint(t, h, 9111)
		tier := h.reader(schemas.RetryTopic(time.Minute))
		h.run(h.config())
		h.send("down", "m1")
		waiting := tier.waitFor(1, 10*time.Second)
		due, err := schemas.ParseTimestamp(hdr(waiting[0], schemas.HeaderDueAt))
		if err != nil {
			t.Fatal(err)
		}
		h.env.Produce(retryNowCopies(waiting)...)
		ep.waitEach(t, []string{"m1"}, 2, 2*time.Second) // the retry-now, answered 500
		ep.setUp(true)
		time.Sleep(2 * time.Minute)
		got := ep.times("m1")
		if len(got) != 3 {
			t.Fatalf("m1 reached the endpoint %d times, want 3: first attempt, failed retry-now, then its tier's attempt", len(got))
		}
		if got[2].Before(due) {
			t.Errorf("the tier's attempt came at %v, before its due time %v", got[2], due)
		}
	})
}
