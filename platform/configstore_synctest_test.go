package platform_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestConfigStoreTimingVirtual pins the config store's timing on the bubble's fake clock
// (testing/synctest, kfake on its virtual network), where the machine's load cannot move it:
// a store started before its topic exists waits for it and is ready once it is created, and
// a change is visible within ConfigFetchMaxWait, the bound its documentation gives.
func TestConfigStoreTimingVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		brokers, network := kafkatest.Virtual(t)
		s := platform.KafkaSettings{Brokers: brokers, ReplicationFactor: -1, Partitions: 1}
		dial := kgo.Dialer(network.DialContext)
		cl, err := platform.NewKafkaClient(s, zerolog.Nop(), dial)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		const topic = "config"

		store, err := platform.NewConfigStore(s, topic, zerolog.Nop(), dial)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- store.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()

		time.Sleep(time.Minute)
		select {
		case <-store.Ready():
			t.Fatal("the store is ready without its topic")
		default:
		}
		spec := []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}
		if err := platform.EnsureTopics(t.Context(), kadm.NewClient(cl), -1, spec); err != nil {
			t.Fatalf("EnsureTopics: %v", err)
		}
		created := time.Now()
		select {
		case <-store.Ready():
		case <-time.After(time.Hour):
			t.Fatal("the store is not ready an hour after its topic was created")
		}
		t.Logf("ready %v after the topic was created", time.Since(created))

		for _, id := range []string{"web", "app"} {
			cfg := &schemas.Config{Sources: []schemas.Source{{ID: id, WriteKey: "wk_" + id}}}
			if err := platform.ApplyConfig(t.Context(), cl, topic, cfg); err != nil {
				t.Fatalf("ApplyConfig: %v", err)
			}
			applied := time.Now()
			wctx, wcancel := context.WithTimeout(t.Context(), time.Hour)
			_, err := store.WaitFor(wctx, func(s *platform.Snapshot) bool { _, ok := s.SourceByID(id); return ok })
			wcancel()
			if err != nil {
				t.Fatalf("source %s never visible: %v", id, err)
			}
			if took := time.Since(applied); took > platform.ConfigFetchMaxWait {
				t.Errorf("source %s visible %v after it was applied, over ConfigFetchMaxWait (%v)", id, took, platform.ConfigFetchMaxWait)
			}
		}
	})
}
