package router_test

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestRouterSIGKILL kills the real router binary with SIGKILL again and again while events
// stream in, restarts it each time, and counts webhooks.deliveries by message id and
// destination. Exactly once (the default): every event is routed exactly once to each
// destination, none lost, none twice — though a tenth of the events are produced twice, as by
// clients retrying (de-duplication by messageId). At least once: none lost; duplicates are
// reported (a batch read again after a kill is mostly dropped by the de-duplication too, when
// its router.dedupe record was written before the kill). With DEDUPE_WINDOW=0 the exactly-once
// run counts the resent events as duplicates, which shows that this test sees them.
func TestRouterSIGKILL(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	bin := servicetest.Binary(t, "./cmd/router", "builds and kills the router binary")
	for _, exactlyOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) { t.Parallel(); killRouter(t, bin, exactlyOnce) })
	}
}

func killRouter(t *testing.T, bin string, exactlyOnce bool) {
	h := newHarness(t, baseYAML) // web → orders, growth
	start := func() *exec.Cmd {
		return servicetest.Spawn(t, bin, servicetest.ServiceEnv(h.kafka.Brokers,
			fmt.Sprintf("ROUTER_EXACTLY_ONCE=%v", exactlyOnce),
			"ROUTER_TRANSACTIONAL_ID=kill-test",
			"LOG_LEVEL=warn")...)
	}

	const total, perBatch = 4000, 100
	produced := make(chan struct{})
	go func() { // the stream: batches of events while the router is being killed
		defer close(produced)
		for b := 0; b < total/perBatch; b++ {
			var recs []*kgo.Record
			for i := range perBatch {
				n := b*perBatch + i
				recs = append(recs, eventRecord(t, "web", fmt.Sprintf(`{"type":"track","event":"E","userId":"u%d","messageId":"m%d"}`, n%97, n)))
			}
			// Clients retrying: a tenth of the previous batch is sent again, and must not be
			// routed again (DEDUPE_WINDOW), across the kills too.
			for i := 0; b > 0 && i < perBatch; i += 10 {
				n := (b-1)*perBatch + i
				recs = append(recs, eventRecord(t, "web", fmt.Sprintf(`{"type":"track","event":"E","userId":"u%d","messageId":"m%d"}`, n%97, n)))
			}
			if err := h.cl.ProduceSync(h.ctx, recs...).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	out := h.deliveries()
	kills := 0
	cmd := start()
	for kills < 6 {
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		kills++
		cmd = start()
	}
	<-produced
	got := out.waitFor(2*total, 90*time.Second)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()

	count := map[string]int{}
	for _, r := range got {
		count[hdr(r, "message-id")+"/"+hdr(r, "destination-id")]++
	}
	var missing, dup int
	for n := range total {
		for _, d := range []string{"orders", "growth"} {
			switch c := count[fmt.Sprintf("m%d/%s", n, d)]; {
			case c == 0:
				missing++
			case c > 1:
				dup += c - 1
			}
		}
	}
	t.Logf("%d SIGKILLs, %d events, %d deliveries read: %d missing, %d duplicates", kills, total, len(got), missing, dup)
	if missing != 0 {
		t.Fatalf("%d deliveries lost", missing)
	}
	if exactlyOnce && (dup != 0 || len(got) != 2*total) {
		t.Fatalf("not exactly once: %d missing, %d duplicates, %d records for %d expected", missing, dup, len(got), 2*total)
	}
}
