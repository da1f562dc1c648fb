package analytics_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/analytics"
)

// The end-to-end test runs the real stack, `make run`'s binary (devstack/cmd/tributary: the
// embedded broker, ingest, the router, the deliverer), as a separate process, and follows
// messages from the client to tracking.events and on to a webhook receiver. Building it rather than
// importing devstack keeps the analytics module free of any dependency on the services (the
// import boundary of docs/architecture.md, checked by scripts/check-imports.sh, covers tests).

// stack is a running tributary process.
type stack struct {
	broker, ingest string
}

func startStack(t *testing.T, configYAML string) *stack {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "tributary")
	build := exec.Command("go", "build", "-o", bin, "./cmd/tributary")
	build.Dir = filepath.Join("..", "devstack")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building devstack/cmd/tributary: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DATA_DIR="+filepath.Join(dir, "data"), "EMBEDDED_KAFKA_PORT=0", "KAFKA_BROKERS=",
		"CONFIG_FILE="+cfg, "INGEST_ADDR=127.0.0.1:0", "CONSOLE_ADDR=127.0.0.1:0", "WEBHOOK_ALLOW_PRIVATE=true",
		"RETRY_SCHEDULE=1s", "LOG_LEVEL=info",
		// The test reads tracking.events as a plain consumer of the topic: its records sealed
		// per user (the default, docs/security.md#crypto-shredding) would not open without the
		// services' keyring, which this module does not import.
		"SHRED_EVENTS=false")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan map[string]any, 100)
	var readers sync.WaitGroup
	readers.Go(func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case lines <- m:
				default: // nobody listens any more
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		readers.Wait()
	})
	s := &stack{}
	ready := false
	deadline := time.After(60 * time.Second)
	for s.broker == "" || s.ingest == "" || !ready {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("tributary exited before it was ready")
			}
			switch m["message"] {
			case "embedded broker listening":
				s.broker, _ = m["kafka"].(string)
			case "config loaded; starting services":
				ready = true
			case "serving HTTP":
				if m["service"] == "ingest" {
					s.ingest, _ = m["addr"].(string)
				}
			}
			if lvl := m["level"]; lvl == "error" || lvl == "fatal" {
				t.Logf("tributary: %v", m)
			}
		case <-deadline:
			t.Fatal("tributary not ready within 60s")
		}
	}
	return s
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tributary binary")
	}
	hooks := make(chan map[string]any, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		select {
		case hooks <- m:
		default:
		}
	}))
	defer receiver.Close()
	s := startStack(t, `
sources:
  - id: web
    name: Web
    writeKey: wk_e2e
destinations:
  - id: hooks
    type: webhooks
    name: Hooks
    sources: [web]
    settings:
      webhooks:
        - url: `+receiver.URL+`/hook
`)

	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	run := hex.EncodeToString(rnd[:])
	httpUser, kafkaUser := "http-"+run, "kafka-"+run

	// Over HTTP, through ingest's /v1/batch.
	cb := &recorder{}
	hc := analytics.New("wk_e2e")
	hc.Endpoint = "http://" + s.ingest
	hc.Callback = cb
	if err := hc.Identify(&analytics.Identify{UserId: httpUser, Traits: map[string]any{"plan": "pro"}}); err != nil {
		t.Fatal(err)
	}
	if err := hc.Track(&analytics.Track{UserId: httpUser, Event: "Order Completed", Properties: map[string]any{"revenue": 9.99},
		Integrations: analytics.Integrations{"All": false, "Webhooks": true}}); err != nil {
		t.Fatal(err)
	}
	if err := hc.Close(); err != nil {
		t.Fatalf("HTTP client Close: %v", err)
	}
	if ok, failed := cb.counts(); ok != 2 || failed != 0 {
		t.Fatalf("HTTP client: %d delivered, %d failed (%v)", ok, failed, cb.failures)
	}

	// Over Kafka, through tracking.inbound and ingest's front door.
	kc := analytics.New("wk_e2e")
	kc.Kafka = &analytics.KafkaTransport{Brokers: []string{s.broker}}
	if err := kc.Track(&analytics.Track{AnonymousId: kafkaUser, Event: "Viewed Product"}); err != nil {
		t.Fatal(err)
	}
	if err := kc.Close(); err != nil {
		t.Fatalf("Kafka client Close: %v", err)
	}

	// All three reach tracking.events, validated and enriched.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker), kgo.ConsumeTopics("tracking.events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[string]string{httpUser + "/identify": "", httpUser + "/track": "", kafkaUser + "/track": ""}
	found := map[string]*kgo.Record{}
	for len(found) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("found %d of %d messages on tracking.events", len(found), len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			var m map[string]any
			if json.Unmarshal(r.Value, &m) != nil {
				return
			}
			id := fmt.Sprint(m["userId"])
			if id == "<nil>" {
				id = fmt.Sprint(m["anonymousId"])
			}
			if _, ok := want[id+"/"+fmt.Sprint(m["type"])]; ok {
				found[id+"/"+fmt.Sprint(m["type"])] = r
			}
		})
	}
	for k, r := range found {
		var m map[string]any
		_ = json.Unmarshal(r.Value, &m)
		if header(r, "source-id") != "web" || header(r, "message-id") != m["messageId"] || !uuidRE.MatchString(fmt.Sprint(m["messageId"])) {
			t.Fatalf("%s: headers %v, messageId %v", k, r.Headers, m["messageId"])
		}
		lib, _ := m["context"].(map[string]any)["library"].(map[string]any)
		if lib["name"] != analytics.LibraryName || m["receivedAt"] == nil || m["sentAt"] == nil {
			t.Fatalf("%s: not the client's enriched message: %s", k, r.Value)
		}
		if key := strings.SplitN(k, "/", 2)[0]; string(r.Key) != key {
			t.Fatalf("%s: key %q", k, r.Key)
		}
	}

	// And on to the webhook receiver (router, deliverer), with Integrations {"All": false,
	// "Webhooks": true} letting it through.
	t.Run("webhook", func(t *testing.T) {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case m := <-hooks:
				if m["userId"] == httpUser && m["event"] == "Order Completed" {
					want := found[httpUser+"/track"]
					var ev map[string]any
					_ = json.Unmarshal(want.Value, &ev)
					if m["type"] != "track" || m["messageId"] != ev["messageId"] || fmt.Sprint(m["properties"]) != "map[revenue:9.99]" {
						t.Fatalf("webhook body %v, want the track call as sent (messageId %v)", m, ev["messageId"])
					}
					return
				}
			case <-deadline:
				t.Fatal("the track call did not reach the webhook receiver within 30 s")
			}
		}
	})
}
