package views

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/shred"
)

// TestEventsKeptSealed: an accepted event added sealed (Record.SealedWith) is kept as its
// ciphertext, and shown opened — by Recent, a live stream and Delivered — until its user's key
// is shredded; from then on it is shown nowhere, though the ring still holds its slot.
func TestEventsKeptSealed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafka := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 1, ShredEvents: true}
	keys, err := shred.New(shred.Config{Kafka: kafka, Logger: zerolog.Nop(), MissWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopKeys := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- keys.Run(runCtx) }()
	defer func() { stopKeys(); <-done }()
	<-keys.Ready()

	plain := accepted("u1", "m1", t0)
	sealed := accepted("u1", "m1", t0)
	if err := keys.SealRecords(ctx, []*kgo.Record{sealed.R}, shred.RecordKey); err != nil {
		t.Fatalf("sealing: %v", err)
	}
	key, err := keys.Key(shred.KeyOf(sealed.R))
	if err != nil {
		t.Fatal(err)
	}
	sealed.SealedWith = key
	other := accepted("u2", "m2", t0) // plain, another user's

	l := NewEvents(10)
	ch := make(chan EventView, 10)
	defer l.Watch("web", ch)()
	l.Add([]Record{sealed, other}, nil)

	held := 0
	for e := range l.sources["web"].ring.All() {
		if e.messageID == "m1" && strings.Contains(string(e.raw), "messageId") {
			t.Fatalf("the sealed event is held in clear: %q", e.raw)
		}
		held++
	}
	if held != 2 {
		t.Fatalf("the view holds %d events, want 2", held)
	}
	want := string(plain.R.Value)
	recent := l.Recent("web", -1)
	if got := ids(recent); got != "m2 m1" {
		t.Fatalf("recent: %q, want m2 m1", got)
	}
	if got := string(recent[1].Message); got != want {
		t.Errorf("the sealed event shown as %q, want %q", got, want)
	}
	if v := <-ch; string(v.Message) != want {
		t.Errorf("the live stream got %q, want %q", v.Message, want)
	}
	if got := string(l.Delivered([]string{"web"}, "m1")); got != want {
		t.Errorf("Delivered: %q, want %q", got, want)
	}

	if n, err := keys.Shred(ctx, "u1"); err != nil || n != 1 {
		t.Fatalf("Shred: %d, %v", n, err)
	}
	if got := ids(l.Recent("web", -1)); got != "m2" {
		t.Errorf("recent after the key was shredded: %q, want only m2", got)
	}
	if got := l.Delivered([]string{"web"}, "m1"); got != nil {
		t.Errorf("Delivered after the key was shredded: %q, want nothing", got)
	}
}
