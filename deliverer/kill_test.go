package deliverer_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestDelivererSIGKILLAtLeastOnce kills the real deliverer binary with SIGKILL again and again
// while it delivers 10,000 messages to a receiver that fails 20% of requests with a 503; each
// time it is restarted. Every message must be delivered at least once; the duplicates (the
// price of at-least-once) are counted and reported.
func TestDelivererSIGKILLAtLeastOnce(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	bin := servicetest.Binary(t, "./cmd/deliverer", "builds and kills the deliverer binary")
	var (
		mu        sync.Mutex
		delivered = map[string]int{}
		failed    int
	)
	rc := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if rand.IntN(5) == 0 {
			mu.Lock()
			failed++
			mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		delivered[r.Header.Get("X-Message-Id")]++
		mu.Unlock()
	})
	const schedule = "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s"
	h := newHarness(t, schedule, destYAML(dest("flaky", []string{rc.URL}, "")))
	const total = 10000
	for b := 0; b < total; b += 1000 {
		h.send("flaky", messageIDs(b, b+1000)...)
	}
	start := func() *exec.Cmd {
		return servicetest.Spawn(t, bin, servicetest.ServiceEnv(h.kafka.Brokers,
			"RETRY_SCHEDULE="+schedule,
			"WEBHOOK_ALLOW_PRIVATE=true",
			"DELIVERER_INSTANCE_ID=kill-test",
			"LOG_LEVEL=error")...)
	}
	progress := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range delivered {
			n += c
		}
		return len(delivered), n
	}
	cmd := start()
	kills := 0
	for kills < 8 {
		time.Sleep(time.Duration(400+rand.IntN(800)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		kills++
		u, _ := progress()
		t.Logf("SIGKILL %d: %d of %d messages delivered so far", kills, u, total)
		cmd = start()
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		u, _ := progress()
		if u == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d SIGKILLs only %d of %d messages were delivered", kills, u, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	u, n := progress()
	mu.Lock()
	f := failed
	mu.Unlock()
	t.Logf("%d SIGKILLs: %d of %d messages delivered, %d duplicates (%.2f%%), %d transient 503s retried; %d requests in all",
		kills, u, total, n-u, 100*float64(n-u)/total, f, len(rc.requests()))
	fmt.Fprintf(os.Stderr, "deliverer crash test: %d SIGKILLs, %d/%d delivered, %d duplicates\n", kills, u, total, n-u)
}
