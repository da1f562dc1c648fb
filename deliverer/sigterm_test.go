package deliverer_test

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestDelivererSIGTERMWithoutKafka runs the real deliverer binary, stops its broker while a
// failed delivery is being handed on to its retry tier, and sends SIGTERM: the process must
// stop by itself (exit status 0, not the command's backstop) within SHUTDOWN_TIMEOUT + 1 s.
func TestDelivererSIGTERMWithoutKafka(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	bin := servicetest.Binary(t, "./cmd/deliverer", "builds and runs the deliverer binary")
	const schedule = "1s,2s"
	sched, _ := schemas.ParseRetrySchedule(schedule)
	env := servicetest.New(t, servicetest.Options{RetrySchedule: sched, Partitions: 1, Closable: true, LogLevel: zerolog.ErrorLevel})
	failed := make(chan struct{})
	var once sync.Once
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		once.Do(func() {
			env.CloseBroker() // Kafka is gone before the failed record is handed on
			close(failed)
		})
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	env.Apply(destYAML(dest("hooks", []string{rc.URL}, "")))
	env.Produce(deliveryRecords("hooks", "m1")...)

	const shutdownTimeout = 2 * time.Second
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), servicetest.ServiceEnv(env.Kafka.Brokers,
		"RETRY_SCHEDULE="+schedule,
		"WEBHOOK_ALLOW_PRIVATE=true",
		"SHUTDOWN_TIMEOUT="+shutdownTimeout.String(),
		"LOG_LEVEL=error")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	gone := make(chan struct{})
	go func() { exited <- cmd.Wait(); close(gone) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-gone
	})
	select {
	case <-failed:
	case err := <-exited:
		t.Fatalf("the deliverer exited before its first delivery: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery attempt within 30 s")
	}
	time.Sleep(500 * time.Millisecond) // the hand-off is under way, and cannot reach Kafka
	limit := shutdownTimeout + time.Second
	sigterm := func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	took, err := servicetest.StopWithin(t, "the deliverer", sigterm, exited, limit+5*time.Second)
	t.Logf("SIGTERM with Kafka unreachable: exited after %v (%v), SHUTDOWN_TIMEOUT %v", took.Round(time.Millisecond), err, shutdownTimeout)
	if err != nil { // exit status 1 with "did not stop within": the backstop of platform.Command.Run
		t.Fatalf("the deliverer did not stop cleanly: %v\n%s", err, stderr.String())
	}
	if took > limit {
		t.Fatalf("exited %v after SIGTERM, want within SHUTDOWN_TIMEOUT + 1 s = %v", took, limit)
	}
}
