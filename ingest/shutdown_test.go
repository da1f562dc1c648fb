package ingest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// Run stops within ShutdownTimeout even when the broker disappeared with a request's records
// still unacknowledged (the flush is bounded by SHUTDOWN_TIMEOUT, not by the much longer
// INGEST_PRODUCE_TIMEOUT).
func TestRunStopsWithinShutdownTimeoutWhenTheBrokerIsGone(t *testing.T) {
	brokers, closeBroker := servicetest.Broker(t)
	createTopics(t, brokers)
	const grace = time.Second
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.ProduceTimeout = 30 * time.Second
	cfg.ShutdownTimeout = grace
	svc, err := New(cfg, Deps{
		Deps: platform.Deps{
			Kafka:  kafkaSettings(t, brokers...),
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel),
		},
		Sources: func() Sources { return testSources },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	post := func() (int, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+svc.Addr()+"/v1/track",
			strings.NewReader(`{"type":"track","userId":"u","event":"E"}`))
		req.SetBasicAuth(testKey, "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if status, err := post(); err != nil || status != http.StatusOK {
		t.Fatalf("first request: %d %v", status, err)
	}
	closeBroker()
	answered := make(chan struct{})
	go func() { defer close(answered); _, _ = post() }() // waits on a broker that is gone
	time.Sleep(300 * time.Millisecond)
	took, err := servicetest.StopWithin(t, fmt.Sprintf("Run (SHUTDOWN_TIMEOUT %s)", grace), cancel, done, grace+5*time.Second)
	t.Logf("Run returned %s after the stop signal (SHUTDOWN_TIMEOUT %s): %v", took, grace, err)
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("the request in flight was never answered")
	}
}
