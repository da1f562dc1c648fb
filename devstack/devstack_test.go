package devstack_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// buildTributary builds the `make run` binary once per test.
func buildTributary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tributary")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tributary")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building cmd/tributary: %v", err)
	}
	return bin
}

// startTributary starts the binary with env and returns it with the embedded broker's address,
// read from its "embedded broker listening" log line; it waits for "config loaded".
func startTributary(t *testing.T, bin string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin)
	_, thisFile, _, _ := runtime.Caller(0)
	cmd.Dir = filepath.Dir(filepath.Dir(thisFile)) // the repository root, like make run
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan map[string]any)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var broker string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("tributary exited before it was ready")
			}
			if m["message"] == "embedded broker listening" {
				broker, _ = m["kafka"].(string)
			}
			if m["message"] == "config loaded; starting services" {
				go drain(lines)
				return cmd, broker
			}
		case <-deadline:
			t.Fatal("tributary not ready within 30s")
		}
	}
}

func TestMakeRunSurvivesRestartAndStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTributary(t)
	dataDir := t.TempDir()
	env := []string{"DATA_DIR=" + dataDir, "EMBEDDED_KAFKA_PORT=0", "KAFKA_BROKERS=", "CONFIG_FILE=deploy/config/dev.yaml", "LOG_LEVEL=info"}

	cmd, broker := startTributary(t, bin, env...)
	if broker == "" {
		t.Fatal("no embedded broker address in the log")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: schemas.TopicEvents, Key: []byte("user-1"), Value: []byte(`{"type":"track","event":"Survived"}`)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
	cl.Close()

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stopped %v after SIGTERM, want under 5s", took)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start))

	// Restart on the same DATA_DIR, without re-applying the config: both the event and the
	// config must still be there.
	env[3] = "CONFIG_FILE="
	_, broker = startTributary(t, bin, env...)
	cl, err = kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(schemas.TopicEvents, schemas.TopicConfig),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var sawEvent, sawSource bool
	for !(sawEvent && sawSource) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after restart: event found %v, source config found %v", sawEvent, sawSource)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case r.Topic == schemas.TopicEvents && strings.Contains(string(r.Value), "Survived"):
				sawEvent = true
			case r.Topic == schemas.TopicConfig && string(r.Key) == "source/web":
				sawSource = true
			}
		})
	}
}

// drain reads the rest of the log so the child never blocks on a full pipe.
func drain(lines <-chan map[string]any) {
	for range lines {
	}
}
