package router_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

// A router whose broker disappeared stops within its ShutdownTimeout, in both modes.
func TestRouterStopsWithinShutdownTimeoutWhenTheBrokerIsGone(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	for _, tt := range []struct {
		name        string
		exactlyOnce bool
	}{{"exactly-once", true}, {"at-least-once", false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := embedded.Start(embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			closeBroker := sync.OnceFunc(b.Close)
			t.Cleanup(closeBroker)
			logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
			kafka := platform.KafkaSettings{Brokers: b.Addrs(), ReplicationFactor: -1, Partitions: 3}
			cl, err := platform.NewKafkaClient(kafka, logger)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := platform.EnsureTopics(t.Context(), kadm.NewClient(cl), -1, platform.DefaultTopics(3, []time.Duration{time.Second})); err != nil {
				t.Fatal(err)
			}
			cfgYAML, err := schemas.ParseConfig([]byte(baseYAML), schemas.ConfigFormatYAML)
			if err != nil {
				t.Fatal(err)
			}
			if err := platform.ApplyConfig(t.Context(), cl, schemas.TopicConfig, cfgYAML); err != nil {
				t.Fatal(err)
			}
			store, err := platform.NewConfigStore(kafka, schemas.TopicConfig, logger)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			storeDone := make(chan struct{})
			go func() { defer close(storeDone); _ = store.Run(ctx) }()
			defer func() { cancel(); <-storeDone }()

			const grace = time.Second
			cfg := router.DefaultConfig()
			cfg.ExactlyOnce = tt.exactlyOnce
			cfg.TransactionalID = "test-router-shutdown"
			cfg.ShutdownTimeout = grace
			svc, err := router.New(cfg, router.Deps{
				Kafka: kafka, Logger: logger, ConfigReady: store.Ready(),
				Config: func() router.Snapshot { return store.Snapshot() },
			})
			if err != nil {
				t.Fatal(err)
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- svc.Run(rctx) }()

			// Events and a deletion request stream in until the broker disappears.
			var recs []*kgo.Record
			for i := range 200 {
				recs = append(recs, eventRecord(t, "web", `{"type":"track","event":"E","userId":"u`+strconv.Itoa(i)+`","messageId":"m`+strconv.Itoa(i)+`"}`))
			}
			del, err := json.Marshal(schemas.DeletionRequest{UserID: "u1", Kind: schemas.KindSuppressWithDelete, RequestID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: schemas.TopicDeletions, Key: []byte("u1"), Value: del})
			if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			closeBroker()
			time.Sleep(300 * time.Millisecond)
			stop()
			start := time.Now()
			select {
			case err := <-done:
				t.Logf("Run returned %s after the stop signal (ShutdownTimeout %s): %v", time.Since(start), grace, err)
			case <-time.After(grace + 5*time.Second):
				t.Fatalf("Run did not return within %s of the stop signal (ShutdownTimeout %s)", grace+5*time.Second, grace)
			}
		})
	}
}
