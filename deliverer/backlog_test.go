package deliverer_test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestBacklogMemory measures the deliverer binary's peak RSS while it works through a backlog
// of 100,000 records to a dead endpoint (a closed port: every connection is refused). It is a
// benchmark as well as a guard (the target is under 256 MB: docs/benchmarks.md):
//
//	go test -run BacklogMemory -v ./deliverer
func TestBacklogMemory(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	bin := servicetest.Binary(t, "./cmd/deliverer", "builds the deliverer and produces 100,000 records")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + ln.Addr().String() + "/hook"
	ln.Close() // nothing listens there any more
	h := newHarness(t, "10s,1m,5m", destYAML(dest("dead", []string{deadURL}, "")))
	const total = 100000
	for b := 0; b < total; b += 5000 {
		h.send("dead", messageIDs(b, b+5000)...)
	}
	start := time.Now()
	cmd := servicetest.Spawn(t, bin, servicetest.ServiceEnv(h.kafka.Brokers,
		"RETRY_SCHEDULE=10s,1m,5m", "WEBHOOK_ALLOW_PRIVATE=true", "LOG_LEVEL=error")...)
	adm := kadm.NewClient(h.cl)
	for {
		time.Sleep(500 * time.Millisecond)
		lags, err := adm.Lag(h.ctx, "tributary-deliverer")
		if err == nil {
			if l, ok := lags["tributary-deliverer"]; ok && l.Error() == nil {
				if tl := l.Lag.TotalByTopic()[schemas.TopicDeliveries]; tl.Lag == 0 && tl.Topic != "" {
					break
				}
			}
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatal("backlog not consumed in 5 minutes")
		}
	}
	took := time.Since(start)
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	var hwm, rss string
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
	}
	t.Logf("100,000-record backlog to a dead endpoint consumed in %v; deliverer peak RSS %s, RSS now %s", took.Round(time.Millisecond), hwm, rss)
	kb, _ := strconv.Atoi(strings.Fields(hwm + " 0")[0])
	if kb > 256*1024 {
		t.Fatalf("peak RSS %d kB, over 256 MB", kb)
	}
}
