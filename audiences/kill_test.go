package audiences_test

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestAudiencesSIGKILL kills the real audiences binary with SIGKILL again and again while
// events stream in, restarts it each time, and checks that membership and computed values
// end exactly as the stream says they must (what a run without kills gives): no event lost
// or counted twice, each member sent true exactly once. A tenth of the events are produced
// twice, right after each other, as when a client retries a call ingest had accepted: they
// count once too. An audience with output track sends each member "Audience Entered" exactly
// once too.
// killedJoinWait is how long a kill test waits for the last instance's result: an instance
// SIGKILLed while joining its consumer group holds the embedded broker's rebalance until the
// rebalance timeout (kgo's default, 60 s) before the next instance is assigned the partitions,
// so the wait is that timeout and as much again for the work.
const killedJoinWait = 120 * time.Second

func TestAudiencesSIGKILL(t *testing.T) {
	t.Parallel()
	bin := servicetest.Binary(t, "./cmd/audiences", "builds and kills the audiences binary")
	h := newTCPHarness(t, sources+`
audiences:
  - id: active
    name: Active
    source: engage
    rule:
      event: E
      atLeast: 80
  - id: active-track
    name: Active Track
    source: engage
    output: track
    rule:
      event: E
      atLeast: 80
computedTraits:
  - id: e-count
    name: E Count
    source: engage
    count:
      event: E
  - id: e-sum
    name: E Sum
    source: engage
    sum:
      event: E
      property: n
`)
	start := func() *exec.Cmd {
		return servicetest.Spawn(t, bin, servicetest.ServiceEnv(h.Kafka.Brokers,
			"AUDIENCES_TRANSACTIONAL_ID=kill-test", "AUDIENCES_ADDR=127.0.0.1:0", "AUDIENCES_TOKEN="+testToken,
			"AUDIENCE_SYNC_INTERVAL=1s", "LOG_LEVEL=warn")...)
	}
	keys := h.Keyring() // the service seals its identify calls (SHRED_EVENTS)
	const users, total, perBatch = 50, 4000, 100
	count, sum := map[string]int{}, map[string]int{}
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for b := 0; b < total/perBatch; b++ {
			var recs []*kgo.Record
			event := func(n int) *kgo.Record {
				u := fmt.Sprintf("u%d", (n*7)%users+n%3) // uneven counts
				return servicetest.EventRecord(t, "web", fmt.Sprintf(`{"type":"track","userId":%q,"messageId":"m%d","event":"E","properties":{"n":%d}}`, u, n, n%10))
			}
			for i := range perBatch {
				n := b*perBatch + i
				u := fmt.Sprintf("u%d", (n*7)%users+n%3)
				count[u]++
				sum[u] += n % 10
				recs = append(recs, event(n))
				// A client's retry: the same message again, right after (not counted again).
				if n%10 == 0 {
					recs = append(recs, event(n))
				}
			}
			if err := h.Client.ProduceSync(h.Ctx, recs...).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()
	cmd := start()
	for range 5 {
		time.Sleep(700 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		cmd = start()
	}
	<-produced
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()

	var got []identify
	joined := map[string]int{}
	servicetest.Eventually(t, killedJoinWait, "every user's traits as the stream has them", func() string {
		h.events.Poll()
		got = decodeIdentifies(t, opened(t, keys, h.events.Got))
		lastCount, lastSum := map[string]float64{}, map[string]float64{}
		joined = map[string]int{}
		for _, id := range got {
			if v, ok := id.Traits["active"]; ok {
				if v != true {
					t.Fatalf("active %v for %s: no one ever leaves", v, id.UserID)
				}
				joined[id.UserID]++
			}
			if v, ok := id.Traits["e_count"].(float64); ok {
				lastCount[id.UserID] = v
			}
			if v, ok := id.Traits["e_sum"].(float64); ok {
				lastSum[id.UserID] = v
			}
		}
		var wrong []string
		for u, c := range count {
			member := joined[u] > 0
			if int(lastCount[u]) != c || int(lastSum[u]) != sum[u] || member != (c >= 80) {
				wrong = append(wrong, fmt.Sprintf("%s: count %v/%d sum %v/%d member %v", u, lastCount[u], c, lastSum[u], sum[u], member))
			}
		}
		if len(wrong) > 0 {
			return fmt.Sprintf("%d users differ from the stream, e.g. %v", len(wrong), wrong[:min(5, len(wrong))])
		}
		return ""
	})
	for u, n := range joined {
		if n != 1 {
			t.Errorf("%s was sent active true %d times", u, n)
		}
	}
	entered := map[string]int{}
	for _, tr := range decodeTracks(t, opened(t, keys, h.events.Got)) {
		if tr.Event != audiences.EventAudienceEntered || tr.Properties["audience_key"] != "active_track" || tr.Properties["active_track"] != true {
			t.Errorf("track call %+v: no one ever leaves", tr)
			continue
		}
		entered[tr.UserID]++
	}
	for u := range joined {
		if entered[u] != 1 {
			t.Errorf("%s was sent Audience Entered %d times, want once", u, entered[u])
		}
	}
	if len(entered) != len(joined) {
		t.Errorf("%d users entered active-track, %d joined active", len(entered), len(joined))
	}
	t.Logf("%d users, %d members, %d identify calls", len(count), len(joined), len(got))
}
