package deliverer_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// userRecords are webhooks.deliveries records as the router writes them for user's messages
// ids, in order: keyed destinationId:userId.
func userRecords(destID, user string, ids ...string) []*kgo.Record {
	var recs []*kgo.Record
	now := schemas.FormatTimestamp(time.Now())
	for _, id := range ids {
		recs = append(recs, &kgo.Record{Topic: schemas.TopicDeliveries, Key: []byte(destID + ":" + user),
			Value: []byte(`{"version":1,"type":"track","messageId":"` + id + `","userId":"` + user + `","event":"Step"}`),
			Headers: []kgo.RecordHeader{
				{Key: schemas.HeaderDestinationID, Value: []byte(destID)},
				{Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderAttempt, Value: []byte("1")},
				{Key: schemas.HeaderFirstAttemptAt, Value: []byte(now)},
				{Key: schemas.HeaderType, Value: []byte("track")},
			}})
	}
	return recs
}

// orderReceiver answers 408 to each user's first request (retried, and not a failure of the
// host: no breaker), 200 to the others, and keeps each user's delivered message ids in the
// order they arrived.
type orderReceiver struct {
	*receiver
	mu        sync.Mutex
	failed    map[string]bool
	delivered map[string][]string // by user: message ids, in arrival order
}

func newOrderReceiver(t *testing.T) *orderReceiver {
	o := &orderReceiver{failed: map[string]bool{}, delivered: map[string][]string{}}
	o.receiver = newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		id := r.Header.Get("X-Message-Id")
		user, _, _ := splitID(id)
		o.mu.Lock()
		defer o.mu.Unlock()
		if !o.failed[user] {
			o.failed[user] = true
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		o.delivered[user] = append(o.delivered[user], id)
	})
	return o
}

// splitID splits "<user>-<n>".
func splitID(id string) (user string, n int, err error) {
	i := len(id) - 1
	for i >= 0 && id[i] != '-' {
		i--
	}
	if i < 0 {
		return id, 0, fmt.Errorf("no n in %q", id)
	}
	_, err = fmt.Sscan(id[i+1:], &n)
	return id[:i], n, err
}

// sendUsers produces msgs messages of each of users users, interleaved (user by user within
// each step), from message from on.
func sendUsers(h *harness, destID string, users, from, to int) {
	h.t.Helper()
	var recs []*kgo.Record
	for n := from; n < to; n++ {
		for u := range users {
			user := fmt.Sprintf("u%d", u)
			recs = append(recs, userRecords(destID, user, fmt.Sprintf("%s-%d", user, n))...)
		}
	}
	h.env.Produce(recs...)
}

// waitInOrder waits until every user's messages 0..msgs-1 arrived and checks that each user's
// first deliveries came in order (a message delivered again after a restart, at least once,
// is not counted twice).
func (o *orderReceiver) waitInOrder(t *testing.T, users, msgs int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		o.mu.Lock()
		done, bad := 0, ""
		for u := range users {
			user := fmt.Sprintf("u%d", u)
			var firsts []int
			seen := map[string]bool{}
			for _, id := range o.delivered[user] {
				if seen[id] {
					continue
				}
				seen[id] = true
				_, n, _ := splitID(id)
				firsts = append(firsts, n)
			}
			if !slices.IsSorted(firsts) && bad == "" {
				bad = fmt.Sprintf("user %s's messages arrived in the order %v", user, firsts)
			}
			if len(firsts) == msgs {
				done++
			}
		}
		o.mu.Unlock()
		if bad != "" {
			t.Fatal(bad)
		}
		if done == users {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d users got their %d messages within %s", done, users, msgs, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOrderedDestinationKeepsEachUsersOrderThroughRetries: 40 users send 10 messages each to a
// destination with ordering: perUser, whose endpoint fails each user's first request (408).
// Each user's head goes to a retry tier; its later messages must not overtake it: each user's
// messages arrive in order. Without ordering they arrive out of order (the head last).
func TestOrderedDestinationKeepsEachUsersOrderThroughRetries(t *testing.T) {
	rc := newOrderReceiver(t)
	h := newHarness(t, "1s,1s,1s", destYAML(dest("ord", []string{rc.URL}, ", ordering: perUser")))
	h.run(h.config())
	const users, msgs = 40, 10
	sendUsers(h, "ord", users, 0, msgs/2)
	time.Sleep(200 * time.Millisecond) // some heads fail while the rest is sent
	sendUsers(h, "ord", users, msgs/2, msgs)
	rc.waitInOrder(t, users, msgs, 30*time.Second)
}

// TestOrderedDestinationKeepsOrderAcrossARestart: as above, with the deliverer stopped in the
// middle of the stream (heads and followers in the tier, some records uncommitted) and a new
// one started: each user's messages still arrive in order (duplicates, the price of
// at-least-once, aside).
func TestOrderedDestinationKeepsOrderAcrossARestart(t *testing.T) {
	rc := newOrderReceiver(t)
	h := newHarness(t, "2s,2s,2s", destYAML(dest("ord", []string{rc.URL}, ", ordering: perUser")))
	_, stop := h.run(h.config())
	const users, msgs = 30, 10
	sendUsers(h, "ord", users, 0, msgs/2)
	time.Sleep(500 * time.Millisecond)
	stop()
	sendUsers(h, "ord", users, msgs/2, msgs)
	h.run(h.config())
	rc.waitInOrder(t, users, msgs, 40*time.Second)
}

// TestOrderedDestinationAUsersFailingHeadDelaysNoOtherUser: one user's head message fails on
// every attempt (408); the other users' messages to the same destination and endpoint go on
// as fast as before: their p99 latency from produce to arrival rises by at most 100 ms over
// the same stream without the failing user, and none of the failing user's later messages is
// sent while its head waits.
func TestOrderedDestinationAUsersFailingHeadDelaysNoOtherUser(t *testing.T) {
	skipUnderRace(t)
	var mu sync.Mutex
	sentAt := map[string]time.Time{}
	var lat []time.Duration
	badSent := 0
	rc := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		id := r.Header.Get("X-Message-Id")
		user, _, _ := splitID(id)
		mu.Lock()
		defer mu.Unlock()
		if user == "bad" {
			badSent++
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		lat = append(lat, time.Since(sentAt[id]))
	})
	h := newHarness(t, "1s,1s,1s,1s,1s", destYAML(dest("ord", []string{rc.URL}, ", ordering: perUser")))
	h.run(h.config())
	p99 := func(bad bool, round int) time.Duration {
		mu.Lock()
		lat = lat[:0]
		mu.Unlock()
		for step := range 20 {
			var recs []*kgo.Record
			if bad {
				recs = append(recs, userRecords("ord", "bad", fmt.Sprintf("bad-%d", round*100+step))...)
			}
			for u := range 20 {
				user := fmt.Sprintf("u%d", u)
				id := fmt.Sprintf("%s-%d", user, round*100+step)
				mu.Lock()
				sentAt[id] = time.Now()
				mu.Unlock()
				recs = append(recs, userRecords("ord", user, id)...)
			}
			h.env.Produce(recs...)
			time.Sleep(20 * time.Millisecond)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(lat)
			mu.Unlock()
			if n >= 400 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d of 400 messages of the other users arrived", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		s := slices.Clone(lat)
		slices.Sort(s)
		return s[len(s)*99/100]
	}
	p99(false, 0) // warms up: connections, the host's limit
	base := p99(false, 1)
	with := p99(true, 2)
	t.Logf("other users' p99 from produce to arrival: %s alone, %s beside a user whose head fails", base, with)
	if with > base+100*time.Millisecond {
		t.Errorf("a user's failing head raised the other users' p99 from %s to %s (more than 100 ms)", base, with)
	}
	mu.Lock()
	defer mu.Unlock()
	// The head's first attempt, and its retries (one per second at most): never the 19
	// messages behind it.
	if badSent > 4 {
		t.Errorf("the failing user's endpoint got %d requests; only its head's attempts were expected", badSent)
	}
}

// TestOrderedDestinationKeepsOrderAcrossARebalance: as above, with a second deliverer joining
// the group in the middle of the stream (the partitions of webhooks.deliveries and of the tiers
// are shared anew between the two) and the first leaving later: each user's messages still
// arrive in order.
func TestOrderedDestinationKeepsOrderAcrossARebalance(t *testing.T) {
	rc := newOrderReceiver(t)
	h := newHarness(t, "1s,1s,1s", destYAML(dest("ord", []string{rc.URL}, ", ordering: perUser")))
	_, stopA := h.run(h.config())
	const users, msgs = 30, 12
	sendUsers(h, "ord", users, 0, msgs/3)
	time.Sleep(300 * time.Millisecond)
	h.run(h.config())
	sendUsers(h, "ord", users, msgs/3, 2*msgs/3)
	time.Sleep(1500 * time.Millisecond)
	stopA()
	sendUsers(h, "ord", users, 2*msgs/3, msgs)
	rc.waitInOrder(t, users, msgs, 60*time.Second)
}

// TestMeasureOrderedThroughput measures what ordering costs at a fast endpoint: the same stream
// (users users, msgs messages each, interleaved) to a destination with ordering: perUser and to
// one without, alternately, three rounds each after a warm-up, in one run (docs/benchmarks.md#per-user-ordering). The
// target: the ordered destination keeps at least 80% of the unordered one's throughput.
//
//	DELIVERER_MEASURE=1 go test -count=1 -run TestMeasureOrderedThroughput -v ./deliverer/
func TestMeasureOrderedThroughput(t *testing.T) {
	if os.Getenv("DELIVERER_MEASURE") == "" {
		t.Skip("a measurement: DELIVERER_MEASURE=1 runs it")
	}
	var delivered atomic.Int64
	rc := newReceiver(t, func(int, *http.Request, http.ResponseWriter) { delivered.Add(1) })
	h := newHarness(t, "10s", destYAML(
		dest("plain", []string{rc.URL}, ""),
		dest("ord", []string{rc.URL}, ", ordering: perUser")))
	reg, _ := h.run(h.config())
	const users, msgs = 2000, 10
	total := int64(0)
	rate := map[string][]float64{}
	for round := range 7 { // round 0 warms up (connections, the host's limit) and is not counted
		destID := []string{"ord", "plain"}[round%2]
		var recs []*kgo.Record
		for n := range msgs {
			for u := range users {
				user := fmt.Sprintf("u%d", u)
				recs = append(recs, userRecords(destID, user, fmt.Sprintf("%s-%d-%d", user, round, n))...)
			}
		}
		h.env.Produce(recs...) // written before the clock starts: the deliverer's speed alone
		start := time.Now()
		total += int64(len(recs))
		for delivered.Load() < total {
			if time.Since(start) > 2*time.Minute {
				t.Fatalf("%s: %d of %d delivered", destID, delivered.Load(), total)
			}
			time.Sleep(2 * time.Millisecond)
		}
		r := float64(len(recs)) / time.Since(start).Seconds()
		if round > 0 {
			rate[destID] = append(rate[destID], r)
		}
		t.Logf("round %d, %s: %d messages at %.0f/s (so far: %.0f deferred, %.0f retried, %.0f held back by ordering)", round, destID, len(recs), r,
			counter(t, reg, "tributary_deliverer_deferred_total"), counter(t, reg, "tributary_deliverer_retried_total"), counter(t, reg, "tributary_deliverer_order_held_total"))
	}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	ord, plain := median(rate["ord"]), median(rate["plain"])
	ratio := ord / plain
	t.Logf("ordered / unordered throughput (medians of 3 rounds): %.0f / %.0f = %.0f%%", ord, plain, 100*ratio)
	if ratio < 0.8 {
		t.Errorf("the ordered destination kept %.0f%% of the unordered one's throughput, less than 80%%", 100*ratio)
	}
}

// TestOrderedDestinationDeadLettersTheHeadThenGoesOn: a user's head message fails on every
// attempt; when its retries end it is dead-lettered and the user's next messages, held behind
// it until then, are delivered, in order. Another user's messages are not held at all.
func TestOrderedDestinationDeadLettersTheHeadThenGoesOn(t *testing.T) {
	var mu sync.Mutex
	var got []string
	rc := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		id := r.Header.Get("X-Message-Id")
		if id == "bad-0" {
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		mu.Lock()
		got = append(got, id)
		mu.Unlock()
	})
	h := newHarness(t, "1s,1s", destYAML(dest("ord", []string{rc.URL}, ", ordering: perUser")))
	h.run(h.config())
	dlq := h.reader(schemas.TopicDLQ)
	h.env.Produce(userRecords("ord", "bad", "bad-0", "bad-1", "bad-2", "bad-3")...)
	h.env.Produce(userRecords("ord", "good", "good-0", "good-1")...)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other user's messages were not delivered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if !slices.Equal(got, []string{"good-0", "good-1"}) {
		t.Errorf("while the head waits, delivered %v; want only the other user's good-0, good-1", got)
	}
	mu.Unlock()
	recs := dlq.waitFor(1, 20*time.Second)
	if id, reason := hdr(recs[0], schemas.HeaderMessageID), hdr(recs[0], schemas.HeaderReason); id != "bad-0" || reason != "retries_exhausted" {
		t.Errorf("dead-lettered %s (%s), want bad-0 (retries_exhausted)", id, reason)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the head was dead-lettered, delivered %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"good-0", "good-1", "bad-1", "bad-2", "bad-3"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
}
