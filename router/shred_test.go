package router_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestRouterSealedEvents: a sealed tracking.events record is opened and routed, each of its
// deliveries sealed with the same key (no new key) and holding nothing of the user in clear;
// a deletion shreds the user's keys (keysShredded in its status) before its notices, which
// stay plain; the user's records sealed before are dropped as deleted from then on.
func TestRouterSealedEvents(t *testing.T) {
	h := newHarness(t, baseYAML)
	keys := h.env.Keyring()
	reg, _ := h.runRouter(nil)
	out := h.deliveries()
	const email = "planted.jane@example.com"
	ev := eventRecord(t, "web", `{"type":"identify","userId":"jane","messageId":"m1","traits":{"email":"`+email+`"}}`)
	h.env.Seal(keys, ev)
	late := eventRecord(t, "web", `{"type":"track","event":"E","userId":"jane","messageId":"m2","properties":{"email":"`+email+`"}}`)
	h.env.Seal(keys, late)
	h.produce(ev)
	got := out.waitFor(2, 15*time.Second) // orders and growth
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2", len(got))
	}
	for _, r := range got {
		if bytes.Contains(r.Value, []byte(email)) || !bytes.Equal(shred.KeyOf(r), shred.KeyOf(ev)) {
			t.Fatalf("delivery not sealed with the event's key: key %q value %q", shred.KeyOf(r), r.Value)
		}
		body, err := keys.Open(r)
		if err != nil || !bytes.Contains(body, []byte(`"email":"`+email+`"`)) || !bytes.Contains(body, []byte(`"version":1`)) {
			t.Fatalf("delivery opens to %q, %v", body, err)
		}
	}
	if n := keys.Len(); n != 1 {
		t.Fatalf("%d keys, want the one of jane", n)
	}

	status := h.env.Reader(schemas.TopicDeletionsStatus)
	h.produce(&kgo.Record{Topic: schemas.TopicDeletions, Key: []byte("jane"), Value: []byte(`{"userId":"jane","requestId":"r1"}`)})
	st := status.WaitFor(1, 15*time.Second)
	s, err := schemas.DecodeDeletionStatus(st[0].Value)
	if err != nil || s.KeysShredded != 1 || s.Notices != 3 {
		t.Fatalf("status %s (%v), want keysShredded 1 and 3 notices", st[0].Value, err)
	}
	got = out.waitFor(5, 15*time.Second)
	for _, r := range got[2:] {
		if shred.KeyOf(r) != nil || hdr(r, "type") != "delete" {
			t.Fatalf("a delete notice is sealed, or not a notice: %v %q", r.Headers, r.Value)
		}
	}
	if _, err := keys.Open(got[0]); !errors.Is(err, shred.ErrShredded) {
		t.Fatalf("a delivery after the deletion: Open = %v, want ErrShredded", err)
	}
	// An event of the user sealed before the deletion (a late consumer's view) is dropped.
	h.produce(late)
	deadline := time.Now().Add(15 * time.Second)
	for counter(t, reg, "tributary_router_messages_total", "outcome", "deleted") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the sealed event of a deleted user was not counted deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got = out.waitFor(5, time.Second); len(got) != 5 {
		t.Fatalf("%d deliveries, want 5: a deleted user's event was routed", len(got))
	}
}
