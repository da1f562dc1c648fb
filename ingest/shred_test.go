package ingest

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// runKeyring runs a keyring with sealing on until the test ends.
func runKeyring(t *testing.T, brokers []string) *shred.Keyring {
	t.Helper()
	s := kafkaSettings(t, brokers...)
	s.ShredEvents = true
	k, err := shred.New(shred.Config{Kafka: s, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return k
}

// TestSealsWhatItWrites: with SHRED_EVENTS on, what ingest writes to tracking.events and
// tracking.rejected (over HTTP and from the front door) holds none of the user's data in
// clear; each record names its key and opens to the message; once the user is shredded, none
// opens. A rejected message without a user stays plain.
func TestSealsWhatItWrites(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	createTopics(t, brokers)
	keys := runKeyring(t, brokers)
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	s := kafkaSettings(t, brokers...)
	s.ShredEvents = true
	svc, err := New(cfg, Deps{Deps: platform.Deps{Kafka: s, Logger: zerolog.Nop()}, Keys: keys, Sources: func() Sources { return testSources }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	defer func() { stop(); <-done }()
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	h := &harness{t: t, svc: svc, brokers: brokers, srv: srv}

	const email = "jane.planted@example.com"
	batch := `{"batch":[{"type":"identify","userId":"jane","traits":{"email":"` + email + `"}},` +
		`{"type":"track","userId":"jane","properties":{"email":"` + email + `"}}]}`
	if status, body := h.post("/v1/batch", []byte(batch), basic(testKey)); status != 200 || !strings.Contains(body, "event: required") {
		t.Fatalf("batch: %d %s", status, body)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	wk := []kgo.RecordHeader{{Key: schemas.HeaderWriteKey, Value: []byte(testKey)}}
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: schemas.TopicInbound, Key: []byte("jane"), Value: []byte(`{"type":"track","userId":"jane","event":"Viewed","properties":{"email":"` + email + `"}}`), Headers: wk},
		&kgo.Record{Topic: schemas.TopicInbound, Value: []byte(`{"type":"track","event":"No User","properties":{"note":"anonymous"}}`), Headers: wk},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	events := consume(t, brokers, schemas.TopicEvents, 2)
	// The anonymous message is rejected (no userId nor anonymousId) with nothing to seal with.
	rejected := consume(t, brokers, schemas.TopicRejected, 2)
	var sealed []*kgo.Record
	for _, r := range append(events, rejected...) {
		if bytes.Contains(r.Value, []byte(email)) {
			t.Errorf("%s record holds the email in clear: %s", r.Topic, r.Value)
		}
		if string(r.Key) == "jane" {
			if shred.KeyOf(r) == nil {
				t.Errorf("%s record of jane is not sealed", r.Topic)
				continue
			}
			plain, err := keys.Open(r)
			if err != nil || !bytes.Contains(plain, []byte(email)) {
				t.Errorf("%s record does not open: %q, %v", r.Topic, plain, err)
			}
			sealed = append(sealed, r)
		} else if shred.KeyOf(r) != nil || !bytes.Contains(r.Value, []byte("anonymous")) {
			t.Errorf("%s record without a user: sealed or altered: %q", r.Topic, r.Value)
		}
	}
	if len(sealed) != 3 {
		t.Fatalf("%d sealed records of jane, want 3", len(sealed))
	}
	if n, err := keys.Shred(ctx, "jane"); err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v; want 1 key", n, err)
	}
	for _, r := range sealed {
		if _, err := keys.Open(r); err != shred.ErrShredded {
			t.Errorf("%s record after Shred: %v, want ErrShredded", r.Topic, err)
		}
	}
}
