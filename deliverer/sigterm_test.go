package deliverer_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestDelivererSIGTERMWithoutKafka runs the real deliverer binary, stops its broker while a
// failed delivery is being handed on to its retry tier, and sends SIGTERM: the process must
// stop by itself (exit status 0, not the command's backstop) within SHUTDOWN_TIMEOUT + 1 s.
func TestDelivererSIGTERMWithoutKafka(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	if testing.Short() {
		t.Skip("builds and runs the deliverer binary")
	}
	bin := filepath.Join(t.TempDir(), "deliverer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/deliverer")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building cmd/deliverer: %v", err)
	}
	broker, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	const schedule = "1s,2s"
	kafka := platform.KafkaSettings{Brokers: broker.Addrs(), ReplicationFactor: -1, Partitions: 1}
	h := &harness{t: t, ctx: t.Context(), kafka: kafka, schedule: schedule, logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)}
	if h.cl, err = platform.NewKafkaClient(kafka, h.logger); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cl.Close)
	sched, _ := schemas.ParseRetrySchedule(schedule)
	if err := platform.EnsureTopics(h.ctx, kadm.NewClient(h.cl), -1, platform.DefaultTopics(1, sched)); err != nil {
		t.Fatal(err)
	}
	var (
		stopOnce sync.Once
		failed   = make(chan struct{})
	)
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		stopOnce.Do(func() {
			broker.Close() // Kafka is gone before the failed record is handed on
			close(failed)
		})
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	tenant, err := schemas.ParseConfig([]byte(destYAML(dest("hooks", []string{rc.URL}, ""))), schemas.ConfigFormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.ApplyConfig(h.ctx, h.cl, schemas.TopicConfig, tenant); err != nil {
		t.Fatal(err)
	}
	if err := h.cl.ProduceSync(h.ctx, deliveryRecords("hooks", "m1")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h.cl.Close()

	const shutdownTimeout = 2 * time.Second
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"KAFKA_BROKERS="+strings.Join(kafka.Brokers, ","),
		"RETRY_SCHEDULE="+schedule,
		"WEBHOOK_ALLOW_PRIVATE=true",
		"SHUTDOWN_TIMEOUT="+shutdownTimeout.String(),
		"METRICS_ADDR=127.0.0.1:0",
		"LOG_LEVEL=error")
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
	stopped := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	limit := shutdownTimeout + time.Second
	select {
	case err := <-exited:
		took := time.Since(stopped)
		t.Logf("SIGTERM with Kafka unreachable: exited after %v (%v), SHUTDOWN_TIMEOUT %v", took.Round(time.Millisecond), err, shutdownTimeout)
		if err != nil { // exit status 1 with "did not stop within": the backstop of platform.Command.Run
			t.Fatalf("the deliverer did not stop cleanly: %v\n%s", err, stderr.String())
		}
		if took > limit {
			t.Fatalf("exited %v after SIGTERM, want within SHUTDOWN_TIMEOUT + 1 s = %v", took, limit)
		}
	case <-time.After(limit + 5*time.Second):
		t.Fatalf("still running %v after SIGTERM", limit+5*time.Second)
	}
}
