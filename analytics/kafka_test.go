package analytics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/analytics"
)

// embeddedBroker starts franz-go's kfake, the broker Tributary embeds (platform/embedded wraps
// the same cluster; the analytics module may not import platform, see docs/architecture.md),
// with topics created.
func embeddedBroker(t *testing.T, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// consume reads n records of topic from the start with a franz-go consumer.
func consume(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s", len(recs), n, topic)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		recs = append(recs, fs.Records()...)
	}
	return recs
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func TestKafkaTransport(t *testing.T) {
	brokers := embeddedBroker(t, analytics.DefaultKafkaTopic)
	cb := &recorder{}
	c := analytics.New("wk_kafka")
	c.Kafka = &analytics.KafkaTransport{Brokers: brokers}
	c.FlushAt = 4
	c.Callback = cb
	calls := []func() error{
		func() error {
			return c.Identify(&analytics.Identify{UserId: "u1", Traits: map[string]any{"plan": "pro"}})
		},
		func() error { return c.Track(&analytics.Track{AnonymousId: "anon-7", Event: "Viewed"}) },
		func() error { return c.Page(&analytics.Page{UserId: "u1", AnonymousId: "anon-1", Name: "Home"}) },
		func() error { return c.Group(&analytics.Group{UserId: "u2", GroupId: "acme"}) },
		func() error { return c.Alias(&analytics.Alias{UserId: "u3", PreviousId: "anon-3"}) },
		func() error { return c.Screen(&analytics.Screen{AnonymousId: "anon-9", Name: "Cart"}) },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// The same limits as over HTTP.
	if err := c.Track(&analytics.Track{UserId: "u", Event: "big", Properties: map[string]any{"b": string(make([]byte, 33<<10))}}); !errors.Is(err, analytics.ErrMessageTooLarge) {
		t.Fatalf("oversized Track = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if ok, failed := cb.counts(); ok != 6 || failed != 0 {
		t.Fatalf("callback: %d ok, %d failed", ok, failed)
	}

	recs := consume(t, brokers, analytics.DefaultKafkaTopic, 6)
	byType := map[string]*kgo.Record{}
	for _, r := range recs {
		if got := header(r, analytics.KafkaHeaderWriteKey); got != "wk_kafka" {
			t.Fatalf("write-key header %q", got)
		}
		var m map[string]any
		if err := json.Unmarshal(r.Value, &m); err != nil {
			t.Fatalf("record value is not JSON: %v", err)
		}
		if !timeRE.MatchString(fmt.Sprint(m["sentAt"])) || !timeRE.MatchString(fmt.Sprint(m["timestamp"])) {
			t.Fatalf("record %s lacks sentAt or timestamp", r.Value)
		}
		if !uuidRE.MatchString(fmt.Sprint(m["messageId"])) || m["context"].(map[string]any)["library"] == nil {
			t.Fatalf("record %s lacks messageId or context.library", r.Value)
		}
		byType[m["type"].(string)] = r
	}
	for typ, key := range map[string]string{"identify": "u1", "track": "anon-7", "page": "u1", "group": "u2", "alias": "u3", "screen": "anon-9"} {
		r := byType[typ]
		if r == nil {
			t.Fatalf("no %s record", typ)
		}
		if string(r.Key) != key {
			t.Fatalf("%s record key %q, want %q (userId, else anonymousId)", typ, r.Key, key)
		}
	}
	// One partition per key: the same user always lands on the same partition.
	if byType["identify"].Partition != byType["page"].Partition {
		t.Fatal("two records of user u1 on different partitions")
	}
}

func TestKafkaTransportGivesUp(t *testing.T) {
	brokers := embeddedBroker(t) // no topic: every attempt fails
	cb := &recorder{}
	c := analytics.New("wk_kafka")
	c.Kafka = &analytics.KafkaTransport{Brokers: brokers, Topic: "missing.topic"}
	c.FlushAt = 1
	c.MaxRetries = 2
	fastRetries(c)
	c.Callback = cb
	_ = c.Track(&analytics.Track{UserId: "u", Event: "e"})
	err := c.Flush(context.Background())
	if err == nil {
		t.Fatal("Flush = nil for a topic that does not exist")
	}
	if _, failed := cb.counts(); failed != 1 {
		t.Fatalf("%d failures reported, want 1", failed)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

func TestKafkaCloseIsBounded(t *testing.T) {
	// A port nobody listens on: every attempt fails at once, and Close must still end on time.
	c := analytics.New("wk_kafka")
	c.Kafka = &analytics.KafkaTransport{Brokers: []string{"127.0.0.1:1"}}
	c.CloseTimeout = 300 * time.Millisecond
	c.RetryInitialInterval = 50 * time.Millisecond
	cb := &recorder{}
	c.Callback = cb
	for range 3 {
		_ = c.Track(&analytics.Track{UserId: "u", Event: "e"})
	}
	start := time.Now()
	err := c.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v with CloseTimeout 300ms", took)
	}
	if !errors.Is(err, analytics.ErrClosed) {
		t.Fatalf("Close = %v, want the messages failed with ErrClosed", err)
	}
	if _, failed := cb.counts(); failed != 3 {
		t.Fatalf("%d failures, want 3", failed)
	}
}
